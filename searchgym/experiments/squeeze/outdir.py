"""``squeeze --out`` / ``--resume``: which folder a run may write into, checked before anything is written.

A fresh run may write into an absent or empty folder, or over a squeeze run (it replaces only its own files, as
it always did); a folder of other files is refused unless ``--overwrite`` (even then only the run's own names
are replaced; the other files stay). ``--resume`` needs a squeeze run whose ``stages.json`` is a valid stage
record; anything else is a ConfigError that says how to start afresh. Every file a run writes is written
atomically (``stages._write_json`` / ``atomic_write_text``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from searchgym.errors import ConfigError
from searchgym.experiments.squeeze.worlds import read_json_capped
from searchgym.outdir import is_empty_dir

# keys every squeeze config.json holds (SqueezeConfig's fields)
_CONFIG_KEYS = {"world_seed", "seeds", "arms", "sft", "rl"}


def is_squeeze_run(path: Path) -> bool:
    """A folder written by ``searchgym squeeze`` (its config.json is a squeeze config)."""
    p = path / "config.json"
    if not p.is_file():
        return False
    try:
        c = read_json_capped(p, "config.json")
    except ConfigError:
        return False
    return isinstance(c, dict) and _CONFIG_KEYS <= set(c)


def check_stages(path: Path) -> dict[str, Any]:
    """``stages.json`` of a run to resume: an object of stage records with a finite, non-negative _elapsed_s."""
    hint = "run without --resume to start afresh"
    try:
        s = read_json_capped(path, "squeeze stages.json")
    except ConfigError as e:
        raise ConfigError(f"{e}; {hint}") from None
    if not isinstance(s, dict):
        raise ConfigError(f"{path} is not a squeeze stage record (a JSON object), but {type(s).__name__}; {hint}")
    el = s.get("_elapsed_s", 0.0)
    if isinstance(el, bool) or not isinstance(el, (int, float)) or not math.isfinite(el) or el < 0:
        raise ConfigError(f"{path}: _elapsed_s must be a non-negative number, not {el!r}; {hint}")
    return s


def check_out_dir(out: Path, *, resume: bool, overwrite: bool) -> None:
    """ConfigError unless ``out`` is a folder this run may write into (see the module docstring)."""
    if not out.exists() and not out.is_symlink():
        return
    if out.is_symlink() or not out.is_dir():
        raise ConfigError(f"--out {out} exists and is not a folder; choose another --out")
    if is_empty_dir(out):
        return
    own = is_squeeze_run(out)
    if resume:
        if not own:
            raise ConfigError(f"--out {out} is not a squeeze run (no squeeze config.json) to resume; drop --resume "
                              "or point --out at the run")
        if (out / "stages.json").exists():
            check_stages(out / "stages.json")
        return
    if not own and not overwrite:
        raise ConfigError(f"--out {out} is a folder of other files (not a squeeze run); a run would replace its "
                          "plots/, sft/, report.md and config.json. Choose an empty or new folder, or pass "
                          "--overwrite to let it")
