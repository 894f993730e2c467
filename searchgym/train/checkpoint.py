"""Atomic checkpoints with exact resume.

A checkpoint is a directory::

    ckpt/                      (written as ckpt.tmp-<pid>-<n>, then os.replace'd into place)
      model/                   save_pretrained() of the policy + tokenizer (loadable by AutoModelForCausalLM)
      extra.pt                 optimizer state, value head, RNG states (torch, numpy, python), arbitrary state
      state.json               step, config, metric history (human-readable)
      COMPLETE                 marker written last; a directory without it is rejected

Writing goes to a temporary sibling directory and is renamed into place only when complete, so a process
killed mid-write leaves the previous checkpoint intact and never a half-written one under the final name.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.errors import CheckpointError

MARKER = "COMPLETE"
FORMAT_VERSION = 1
_counter = itertools.count()


def rng_state() -> dict[str, Any]:
    import torch

    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}


def set_rng_state(state: dict[str, Any]) -> None:
    import torch

    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{next(_counter)}")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def save_checkpoint(path: str | os.PathLike, *, model: Any, tokenizer: Any = None, optimizer: Any = None,
                    state: dict[str, Any] | None = None, extra: dict[str, Any] | None = None,
                    _crash_before_commit: bool = False) -> Path:
    """Write a checkpoint atomically to ``path`` (replacing an older one there)."""
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}-{next(_counter)}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    model.save_pretrained(tmp / "model")
    if tokenizer is not None:
        tokenizer.save_pretrained(tmp / "model")
    blob = {"optimizer": optimizer.state_dict() if optimizer is not None else None,
            "rng": rng_state(), "extra": extra or {}}
    torch.save(blob, tmp / "extra.pt")
    (tmp / "state.json").write_text(json.dumps({"format_version": FORMAT_VERSION, **(state or {})},
                                               indent=1, default=str))
    (tmp / MARKER).write_text("ok\n")
    if _crash_before_commit:  # used by tests to simulate a kill between writing and committing
        raise KeyboardInterrupt("simulated crash before commit")
    old = None
    if path.exists():
        old = path.with_name(f"{path.name}.old-{os.getpid()}-{next(_counter)}")
        os.replace(path, old)
    os.replace(tmp, path)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return path


def is_complete(path: str | os.PathLike) -> bool:
    p = Path(path)
    return (p / MARKER).is_file() and (p / "extra.pt").is_file() and (p / "state.json").is_file()


def cleanup_partial(parent: str | os.PathLike) -> list[Path]:
    """Remove leftovers of interrupted writes (``*.tmp-*`` / ``*.old-*`` directories) under ``parent``."""
    removed = []
    parent = Path(parent)
    if not parent.is_dir():
        return removed
    for p in parent.iterdir():
        if p.is_dir() and (".tmp-" in p.name or ".old-" in p.name):
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed


def load_checkpoint(path: str | os.PathLike, *, device: str = "cpu") -> dict[str, Any]:
    """Read a checkpoint; returns ``{"model_dir", "state", "optimizer", "rng", "extra"}``."""
    import torch

    p = Path(path)
    if not p.is_dir():
        raise CheckpointError(f"no checkpoint at {p}")
    if not is_complete(p):
        raise CheckpointError(f"checkpoint {p} is incomplete (no {MARKER} marker): it was interrupted while "
                              "being written; delete it and resume from an earlier one")
    try:
        state = json.loads((p / "state.json").read_text())
        blob = torch.load(p / "extra.pt", map_location=device, weights_only=False)
    except Exception as e:
        raise CheckpointError(f"checkpoint {p} cannot be read: {e}") from e
    if state.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(f"checkpoint {p} has format version {state.get('format_version')}, "
                              f"this searchgym reads {FORMAT_VERSION}")
    return {"model_dir": p / "model", "state": state, "optimizer": blob["optimizer"], "rng": blob["rng"],
            "extra": blob["extra"]}
