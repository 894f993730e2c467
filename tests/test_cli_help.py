"""Every ``searchgym`` help text: conventional metavars, no Python types, and stated defaults that match the code.

Typer renders an option's Python type (``<bool>``, ``<list[Path]>``, ``<str,str>...``); searchgym's help shows
PATH / TEXT / INTEGER and nothing for a flag (``searchgym.cli`` installs that rendering). Options whose default is
resolved at run time (``None`` in the signature) say their default in prose, e.g. "(default 4)"; the table below
says where the code keeps each one, so a help text that drifts from the code fails here.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator
from typing import Any

import click
import pytest
import typer
from typer.testing import CliRunner

from searchgym.cli import app

COMMAND = typer.main.get_command(app)
PYTHON_TYPE = re.compile(r"<(?:bool|str|int|float|path|list\[[^\]]*\]|tuple\[[^\]]*\]|[a-z]+,[a-z,]+)>|"
                         r"<class '|typing\.|Optional\[", re.IGNORECASE)


def _walk(cmd: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    yield path, cmd
    for name, sub in sorted((getattr(cmd, "commands", None) or {}).items()):
        yield from _walk(sub, (*path, name))


COMMANDS = list(_walk(COMMAND))


def _help(path: tuple[str, ...]) -> str:
    res = CliRunner().invoke(app, [*path, "--help"], env={"TERMINAL_WIDTH": "200"})
    assert res.exit_code == 0, res.output
    return res.output


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=lambda p: " ".join(p) or "searchgym")
def test_help_shows_conventional_metavars_and_no_python_types(path):
    out = _help(path)
    assert not PYTHON_TYPE.search(out), PYTHON_TYPE.search(out)
    cmd = dict(COMMANDS)[path]
    for p in cmd.params:
        if isinstance(p, click.Argument):
            assert p.human_readable_name.upper() in out  # arguments in upper case, as click shows them
    if path == ("index", "build"):
        assert re.search(r"--out\s+-o\s+(PATH|DIR)", out) and re.search(r"--overwrite\s+Replace", out)


def test_long_help_lines_are_not_wrapped_at_80_columns_when_piped():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "searchgym.cli", "index", "build", "--help"], capture_output=True,
                         text=True, check=True, env={"PATH": "", "NO_COLOR": "1"}).stdout
    assert max(len(line) for line in out.splitlines()) > 80


# Where the code keeps the default an option's help states in prose ((command, option) -> getter).
def _squeeze_cfg() -> Any:
    from searchgym.experiments.squeeze.config import SqueezeConfig

    return SqueezeConfig()


def _server(name: str) -> Callable[[], Any]:
    def get() -> Any:
        from searchgym.retrieval.server import create_app

        value = inspect.signature(create_app).parameters[name].default
        return value // (1 << 20) if name == "max_body_bytes" else value
    return get


def _env(name: str) -> Callable[[], Any]:
    def get() -> Any:
        from searchgym.envs import registration

        return {"top_k": registration.DEFAULT_TOP_K, "max_turns": registration.DEFAULT_MAX_TURNS}[name]
    return get


def _agents_default_n() -> int:
    from searchgym.agents.commands import DEFAULT_N

    return DEFAULT_N


CODE_DEFAULTS: dict[tuple[str, str], Callable[[], Any]] = {
    ("squeeze", "seeds"): lambda: _squeeze_cfg().seeds,
    ("squeeze", "world_seed"): lambda: _squeeze_cfg().world_seed,
    ("squeeze", "minibatches"): lambda: _squeeze_cfg().minibatches,
    ("squeeze", "passk_max"): lambda: _squeeze_cfg().passk_max,
    ("squeeze", "strategy_seeds"): lambda: _squeeze_cfg().strategy_seeds,
    ("squeeze", "strategy_steps"): lambda: _squeeze_cfg().strategy_steps,
    ("serve", "max_queries"): _server("max_queries"),
    ("serve", "max_query_chars"): _server("max_query_chars"),
    ("serve", "max_topk"): _server("max_topk"),
    ("serve", "max_body_mb"): _server("max_body_bytes"),
    ("serve", "max_inflight"): _server("max_inflight"),
    ("rollout", "n"): _agents_default_n,
    ("eval", "n"): _agents_default_n,
    ("rollout", "top_k"): _env("top_k"),
    ("eval", "top_k"): _env("top_k"),
    ("rollout", "max_turns"): _env("max_turns"),
    ("eval", "max_turns"): _env("max_turns"),
}
STATED = re.compile(r"\(default:? (\d+(?:\.\d+)?)[;,)]")


def _stated_defaults() -> list[Any]:
    rows = []
    for path, cmd in COMMANDS:
        for p in cmd.params:
            m = STATED.search(getattr(p, "help", None) or "")
            if m:
                row = (" ".join(path), p.name, m.group(1), p.default)
                rows.append(pytest.param(*row))
    return rows


def test_every_prose_default_is_checked_against_the_code():
    unchecked = [(c, n) for c, n, _, default in (r.values for r in _stated_defaults())
                 if default is None and (c, n) not in CODE_DEFAULTS]
    assert not unchecked, f"say in CODE_DEFAULTS where the code keeps these defaults: {unchecked}"


@pytest.mark.parametrize("command,option,stated,default", _stated_defaults(), ids=lambda x: str(x))
def test_prose_default_matches_the_code(command, option, stated, default):
    actual = default if default is not None else CODE_DEFAULTS[(command, option)]()
    assert float(stated) == pytest.approx(float(actual)), f"{command} --{option}: help says {stated}, code {actual}"


def test_rendered_defaults_are_the_signature_defaults():
    out = _help(("index", "build"))
    assert "[default: 1.5]" in out and "[default: 64]" in out and "[default: lucene]" in out
