"""Atomic checkpoints with exact resume, and no pickle anywhere.

A checkpoint is a directory::

    ckpt/                      (written as ckpt.tmp-<host>-<pid>-<rand>, then swapped into place)
      model/                   save_pretrained() of the policy + tokenizer (loadable by AutoModelForCausalLM)
      tensors.safetensors      every tensor of the optimizer state, RNG states and ``extra`` (safetensors)
      extra.json               the rest of those structures (numbers, strings, lists, dicts, tuples), with
                               {"__tensor__": key} references into tensors.safetensors
      state.json               step, config, metric history (human-readable)
      COMPLETE                 marker written last; a directory without it is rejected

RNG states saved and restored: python ``random``, numpy's global generator, torch CPU and, when CUDA is
available, every CUDA device's generator. Loading reads JSON and safetensors only, so a tampered run
directory cannot execute code on ``--resume``. Checkpoints of the older format (``extra.pt``, torch pickle)
load through ``torch.load(weights_only=True)`` when they hold nothing but tensors and plain containers, and
otherwise fail with a CheckpointError that says so (never unpickling arbitrary objects).

Writing goes to a temporary sibling directory that is swapped into place only when complete (an atomic
rename-exchange on Linux), so a killed process leaves the previous checkpoint intact under the final name,
and the final name never goes missing. :func:`cleanup_partial` removes leftovers, and puts a parked ``.old-``
copy back rather than deleting it when the final name is missing.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from searchgym import dirswap
from searchgym.errors import CheckpointError

MARKER = "COMPLETE"
FORMAT_VERSION = 2
TENSORS = "tensors.safetensors"
EXTRA = "extra.json"
LEGACY_EXTRA = "extra.pt"


def rng_state() -> dict[str, Any]:
    import torch

    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = list(torch.cuda.get_rng_state_all())
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    import torch

    torch.set_rng_state(state["torch"].cpu() if hasattr(state["torch"], "cpu") else state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    cuda = state.get("cuda")
    if cuda and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all([t.cpu() for t in cuda])


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{os.urandom(4).hex()}")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# -- pickle-free encoding of nested state ----------------------------------------------------------------
def _pack(obj: Any, tensors: dict[str, Any], seen: set[int], where: str) -> Any:
    """JSON-able form of ``obj``; tensors and numpy arrays go into ``tensors`` and are referenced by key."""
    import torch

    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu()
        ptr = t.untyped_storage().data_ptr() if t.numel() else None
        if ptr is not None and ptr in seen or not t.is_contiguous():
            t = t.contiguous().clone()  # safetensors refuses tensors that share memory
        if ptr is not None:
            seen.add(t.untyped_storage().data_ptr())
        key = f"t{len(tensors)}"
        tensors[key] = t
        return {"__tensor__": key}
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in "biuf":
            raise CheckpointError(f"cannot store a numpy array of dtype {obj.dtype} at {where} in a checkpoint")
        key = f"t{len(tensors)}"
        tensors[key] = torch.from_numpy(np.ascontiguousarray(obj).copy())
        return {"__ndarray__": key}
    if isinstance(obj, np.generic):
        return _pack(obj.item(), tensors, seen, where)
    if isinstance(obj, tuple):
        return {"__tuple__": [_pack(v, tensors, seen, f"{where}[{i}]") for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_pack(v, tensors, seen, f"{where}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        if all(isinstance(k, str) and not k.startswith("__") for k in obj):
            return {k: _pack(v, tensors, seen, f"{where}.{k}") for k, v in obj.items()}
        return {"__items__": [[_pack(k, tensors, seen, where), _pack(v, tensors, seen, f"{where}[{k!r}]")]
                              for k, v in obj.items()]}
    raise CheckpointError(f"cannot store a {type(obj).__name__} at {where} in a checkpoint (only tensors, "
                          "numpy arrays, numbers, strings, lists, tuples and dicts; nothing is pickled)")


def _unpack(obj: Any, tensors: dict[str, Any]) -> Any:
    if isinstance(obj, list):
        return [_unpack(v, tensors) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if len(obj) == 1:
        (k, v), = obj.items()
        if k == "__tensor__":
            return tensors[v]
        if k == "__ndarray__":
            return tensors[v].numpy()
        if k == "__tuple__":
            return tuple(_unpack(x, tensors) for x in v)
        if k == "__items__":
            return {_freeze(_unpack(a, tensors)): _unpack(b, tensors) for a, b in v}
    return {k: _unpack(v, tensors) for k, v in obj.items()}


def _freeze(k: Any) -> Any:
    return tuple(_freeze(x) for x in k) if isinstance(k, list) else k


# -- writing and reading -----------------------------------------------------------------------------------
def save_checkpoint(path: str | os.PathLike, *, model: Any, tokenizer: Any = None, optimizer: Any = None,
                    state: dict[str, Any] | None = None, extra: dict[str, Any] | None = None,
                    _crash_before_commit: bool = False) -> Path:
    """Write a checkpoint atomically to ``path`` (replacing an older one there)."""
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = dirswap.tmp_name(path, hidden=False)
    tmp.mkdir()
    committed = False
    try:
        model.save_pretrained(tmp / "model")
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp / "model")
        tensors: dict[str, Any] = {}
        blob = {"optimizer": optimizer.state_dict() if optimizer is not None else None,
                "rng": rng_state(), "extra": extra or {}}
        packed = _pack(blob, tensors, set(), "checkpoint")
        save_file(tensors, str(tmp / TENSORS))
        (tmp / EXTRA).write_text(json.dumps(packed), encoding="utf-8")
        (tmp / "state.json").write_text(json.dumps({"format_version": FORMAT_VERSION, **(state or {})},
                                                   indent=1, default=str), encoding="utf-8")
        (tmp / MARKER).write_text("ok\n")
        if _crash_before_commit:  # used by tests to simulate a kill between writing and committing
            committed = True  # leave the temp dir behind, as a kill would
            raise KeyboardInterrupt("simulated crash before commit")
        dirswap.swap_into_place(tmp, path, hidden=False)
        committed = True
    finally:
        if not committed:
            shutil.rmtree(tmp, ignore_errors=True)
    return path


def is_complete(path: str | os.PathLike) -> bool:
    p = Path(path)
    return (p / MARKER).is_file() and (p / "state.json").is_file() and (
        ((p / TENSORS).is_file() and (p / EXTRA).is_file()) or (p / LEGACY_EXTRA).is_file())


def cleanup_partial(parent: str | os.PathLike) -> list[Path]:
    """Tidy leftovers of interrupted writes under ``parent``: remove ``*.tmp-*`` directories whose writer is
    gone (or is this process); remove ``*.old-*`` copies, except that when the final name is missing (a writer
    killed between the two renames of the non-atomic fallback) the complete old copy is renamed back."""
    parent = Path(parent)
    if not parent.is_dir():
        return []
    finals = set()
    for p in parent.iterdir():
        for sep in (".tmp-", ".old-"):
            if sep in p.name and p.is_dir():
                finals.add(p.name.split(sep, 1)[0])
    removed: list[Path] = []
    for name in sorted(finals):
        removed += dirswap.cleanup_siblings(parent / name, hidden=False, is_complete=is_complete,
                                            own_is_stale=True)
    return removed


def _latest_or_parked(p: Path) -> Path:
    """``p``, or the parked ``.old-`` copy when a swap was interrupted between its two renames."""
    if p.exists() or not p.parent.is_dir():
        return p
    olds = [o for o in p.parent.glob(f"{p.name}.old-*") if is_complete(o)]
    return max(olds, key=lambda o: o.stat().st_mtime) if olds else p


def load_checkpoint(path: str | os.PathLike, *, device: str = "cpu") -> dict[str, Any]:
    """Read a checkpoint; returns ``{"model_dir", "state", "optimizer", "rng", "extra"}``.

    Tensors come back on the CPU (``optimizer.load_state_dict`` moves them to the parameters' device);
    ``device`` is kept for compatibility."""
    del device
    p = _latest_or_parked(Path(path))
    if not p.is_dir():
        raise CheckpointError(f"no checkpoint at {p}")
    if not is_complete(p):
        raise CheckpointError(f"checkpoint {p} is incomplete (no {MARKER} marker): it was interrupted while "
                              "being written; delete it and resume from an earlier one")
    try:
        state = json.loads((p / "state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as e:
        raise CheckpointError(f"checkpoint {p}: state.json cannot be read ({e})") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"checkpoint {p}: state.json is not a JSON object")
    version = state.get("format_version")
    if version == 1 and (p / LEGACY_EXTRA).is_file():
        blob = _load_legacy(p)
    elif version == FORMAT_VERSION:
        blob = _load_blob(p)
    else:
        raise CheckpointError(f"checkpoint {p} has format version {version!r}, this searchgym reads "
                              f"{FORMAT_VERSION} (and 1 with extra.pt)")
    if not isinstance(blob, dict) or not {"optimizer", "rng", "extra"} <= set(blob):
        raise CheckpointError(f"checkpoint {p} lacks its optimizer / rng / extra entries")
    return {"model_dir": p / "model", "state": state, "optimizer": blob["optimizer"], "rng": blob["rng"],
            "extra": blob["extra"]}


def _load_blob(p: Path) -> Any:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        tensors = load_file(str(p / TENSORS), device="cpu")
        packed = json.loads((p / EXTRA).read_text(encoding="utf-8"))
        return _unpack(packed, tensors)
    except (OSError, ValueError, KeyError, TypeError, RecursionError, SafetensorError) as e:
        raise CheckpointError(f"checkpoint {p} cannot be read ({type(e).__name__}: {e}); resume from an "
                              "earlier checkpoint or start again") from None


def _load_legacy(p: Path) -> Any:
    """A format-1 checkpoint (extra.pt): only tensors and plain containers are accepted (weights_only)."""
    import torch

    try:
        from numpy._core.multiarray import _reconstruct
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import _reconstruct
    try:
        with torch.serialization.safe_globals([np.ndarray, np.dtype, type(np.dtype(np.uint32)), _reconstruct]):
            return torch.load(p / LEGACY_EXTRA, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - the unpickler raises many types; all mean 'not loadable safely'
        raise CheckpointError(
            f"checkpoint {p} is in the old extra.pt (pickle) format and holds objects that cannot be loaded "
            f"safely ({type(e).__name__}: {str(e)[:200]}); it is not unpickled, since a tampered run directory "
            "could run code. Start the run again without --resume (the checkpoints it writes hold no pickle)") from None
