"""The ``searchgym`` command.

Each part of the system adds its own commands from ``searchgym/<part>/commands.py`` (a ``register``
function), so this file only assembles the groups. Heavy imports (torch, faiss, ray) happen inside the
commands, which keeps ``searchgym --help`` fast.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any, get_args, get_origin

import typer
import typer.core
import typer.rich_utils

# -- help rendering ---------------------------------------------------------------------------------------
# Typer >= 0.20 shows an option's Python type in angle brackets (`<bool>` even for --help, `<list[Path]>`,
# `<str,str>...`). searchgym's help uses the conventional metavars instead: PATH, TEXT, INTEGER, FLOAT,
# [a|b|c], a tuple as `TEXT TEXT`, and nothing at all for a flag. Arguments show in upper case (CORPUS...).
_METAVARS = {str: "TEXT", int: "INTEGER", float: "FLOAT", Path: "PATH", bool: "BOOLEAN", datetime: "DATETIME"}


def _metavar_of(annotation: Any) -> str:
    if get_origin(annotation) in (list, tuple, set):
        args = [a for a in get_args(annotation) if a is not Ellipsis]
        return _metavar_of(args[0]) if args else "TEXT"
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return "[" + "|".join(str(m.value) for m in annotation) + "]"
    if isinstance(annotation, type) and issubclass(annotation, os.PathLike):
        return "PATH"
    return _METAVARS.get(annotation, "TEXT")


def conventional_metavar(param: Any, ctx: Any = None) -> str | None:
    """The metavar searchgym's help shows for a Typer parameter (None for a flag: no value to type)."""
    if getattr(param, "is_bool_flag", False) or getattr(param, "is_flag", False):
        return None
    desc = param.type_descriptor
    if desc.is_choice and desc.choices is not None:
        return "[" + "|".join(str(getattr(c, "value", c)) for c in desc.choices) + "]"
    if desc.is_tuple:
        return " ".join(_metavar_of(a) for a in get_args(desc.annotation) if a is not Ellipsis)
    if desc.is_path:
        return "PATH"
    label = _metavar_of(desc.annotation)
    return f"{label} RANGE" if desc.is_ranged else label


def _display_type(self: Any, ctx: Any) -> str | None:
    return conventional_metavar(self)


def _argument_display_name(self: Any) -> str:
    return str(self.metavar or (self.name or "").upper())


def _argument_name(self: Any) -> str:
    return _argument_display_name(self) + ("..." if self.nargs != 1 else "")


def _argument_usage(self: Any) -> str:
    name = _argument_display_name(self)
    name = name if self.required else f"[{name}]"
    return name + ("..." if self.nargs != 1 else "")


def _argument_type(self: Any, ctx: Any) -> str | None:
    return None  # the upper-case name is the metavar already (click's convention)


def _folding(make_text: Any) -> Any:
    """Typer's help text, with a word longer than its column folded onto the next line instead of cut with
    an ellipsis (a comma-separated list of choices is one such word)."""
    def make(*args: Any, **kwargs: Any) -> Any:
        text = make_text(*args, **kwargs)
        if hasattr(text, "overflow"):
            text.overflow = "fold"
        return text

    return make


def _install_help_rendering() -> None:
    rich_utils: Any = typer.rich_utils
    make_text = getattr(rich_utils, "_make_rich_text", None)  # a private name: absent in another Typer, skip
    if make_text is not None and not getattr(make_text, "_searchgym_folds", False):
        rich_utils._make_rich_text = _folding(make_text)
        rich_utils._make_rich_text._searchgym_folds = True
    core: Any = typer.core
    core._TyperParameter.display_type = _display_type
    core.TyperArgument.display_name_raw = property(_argument_display_name)
    core.TyperArgument._rich_display_name = _argument_name
    core.TyperArgument._usage_display_name = _argument_usage
    core.TyperArgument.display_type_rich = _argument_type
    # Rich wraps help at 80 columns when stdout is not a terminal; use a wider page there (TERMINAL_WIDTH wins).
    if not os.environ.get("TERMINAL_WIDTH") and not sys.stdout.isatty():
        typer.rich_utils.MAX_WIDTH = 120  # type: ignore[attr-defined]


_install_help_rendering()

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
