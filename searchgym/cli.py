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


def _path_error_message(exc: OSError) -> str | None:
    """One line for an error about a path the user named (an ``--out`` that exists as a file, a folder
    where a file is needed, no permission, a full disk), without the ``[Errno N]`` prefix; None for other
    OS errors."""
    import errno

    name = exc.filename
    if name is None:
        return None
    hints = {
        errno.EEXIST: "it already exists (as a file where a folder is needed?); choose another path",
        errno.ENOTDIR: "a part of this path is a file, not a folder; choose another path",
        errno.EISDIR: "it is a folder where a file is needed; choose another path",
        errno.EACCES: "permission denied",
        errno.EPERM: "operation not permitted",
        errno.ENOSPC: "no space left on the device",
        errno.EROFS: "the file system is read-only",
        errno.ENAMETOOLONG: "the name is too long",
    }
    hint = hints.get(exc.errno or 0)
    if hint is None:
        return None
    return f"error: cannot write {name}: {hint}"


def main() -> None:
    """The console entry point: the app, with errors about a named path shown as one line (no traceback)."""
    import sys

    try:
        app()
    except OSError as exc:
        message = _path_error_message(exc)
        if message is None:
            raise
        print(message, file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
