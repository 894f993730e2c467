"""The ``searchgym`` command.

Each part of the system adds its own commands from ``searchgym/<part>/commands.py`` (a ``register``
function), so this file only assembles the groups. Heavy imports (torch, faiss, ray) happen inside the
commands, which keeps ``searchgym --help`` fast.
"""

from __future__ import annotations

import importlib
import importlib.util

import typer

app = typer.Typer(
    name="searchgym",
    help="A Gymnasium environment, trainers and query-diversity trackers for LLM search agents.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
)
index_app = typer.Typer(help="Build and inspect index directories (BM25, dense FAISS).", no_args_is_help=True)
data_app = typer.Typer(help="The procedural knowledge world and QA data files.", no_args_is_help=True)
app.add_typer(index_app, name="index")
app.add_typer(data_app, name="data")

GROUPS = {"index": index_app, "data": data_app}
# Modules that add commands; each has ``register(app, groups)``.
COMMAND_MODULES = (
    "searchgym.retrieval.commands",       # index build / index info / search
    "searchgym.retrieval.serve_command",  # serve
    "searchgym.data.commands",            # data export-world / data ...
    "searchgym.envs.commands",
    "searchgym.agents.commands",          # rollout / eval
    "searchgym.diversity.commands",       # analyze
    "searchgym.experiments.squeeze.commands",  # squeeze
    "searchgym.train.commands",           # sft / rl
    "searchgym.integrations.commands",    # serve-openenv
)


def _register_parts() -> None:
    for name in COMMAND_MODULES:
        if importlib.util.find_spec(name) is None:
            continue
        importlib.import_module(name).register(app, GROUPS)


_register_parts()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
