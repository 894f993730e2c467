"""Checks on a model directory before its weights are loaded: the files come from outside (a download, a
colleague's run), and transformers trusts them.

:func:`check_model_dir` reads only ``config.json`` and the safetensors headers (bounded sizes), and refuses
with :class:`~searchgym.errors.ModelLoadError` a header whose offsets, shapes and dtypes disagree with each
other or with the file size, and a ``config.json`` that describes a model larger than its weights (which
transformers would otherwise allocate, then initialise at random). The model is built on the ``meta`` device
for that count, so a config naming billions of parameters costs nothing.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

from searchgym.errors import ModelLoadError

MAX_CONFIG_BYTES = 1 << 20          # config.json
MAX_SAFETENSORS_HEADER = 100 << 20  # the format's own limit
_DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
                "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
_SLACK_PARAMS = 1 << 20             # parameters a model may create beyond its files (buffers, small heads)


def _safetensors_numel(path: Path) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape from one safetensors file, after checking the header against the file."""
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ModelLoadError(f"{path}: not a safetensors file (shorter than its 8-byte header length)")
        n = struct.unpack("<Q", head)[0]
        if n > min(MAX_SAFETENSORS_HEADER, size - 8):
            raise ModelLoadError(f"{path}: the safetensors header claims {n:,} bytes; the file has {size:,}")
        try:
            header = json.loads(f.read(n))
        except (ValueError, RecursionError):
            raise ModelLoadError(f"{path}: the safetensors header is not valid JSON") from None
    if not isinstance(header, dict):
        raise ModelLoadError(f"{path}: the safetensors header is not a JSON object")
    data = size - 8 - n
    shapes: dict[str, tuple[int, ...]] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (start, end) = info["dtype"], info["shape"], info["data_offsets"]
            width = _DTYPE_BYTES[dtype]
            ok = (all(isinstance(d, int) and d >= 0 for d in shape) and isinstance(start, int)
                  and isinstance(end, int) and 0 <= start <= end <= data)
        except (KeyError, TypeError, ValueError):
            raise ModelLoadError(f"{path}: tensor {name!r} has a malformed entry in the safetensors header") from None
        if not ok or math.prod(shape) * width != end - start:
            raise ModelLoadError(f"{path}: tensor {name!r} claims shape {shape} of {dtype} at bytes "
                                 f"{start}..{end}, which the file ({data:,} data bytes) does not hold")
        shapes[name] = tuple(shape)
    return shapes


def _config(model_dir: Path) -> dict[str, Any]:
    p = model_dir / "config.json"
    if p.stat().st_size > MAX_CONFIG_BYTES:
        raise ModelLoadError(f"{p}: {p.stat().st_size:,} bytes; a config.json is at most {MAX_CONFIG_BYTES:,}")
    try:
        cfg = json.loads(p.read_text(encoding="utf-8"))
    except (ValueError, RecursionError, UnicodeDecodeError) as e:
        raise ModelLoadError(f"{p}: not valid JSON ({type(e).__name__})") from None
    if not isinstance(cfg, dict):
        raise ModelLoadError(f"{p}: must be a JSON object")
    return cfg


def check_model_dir(model_dir: str | Path, *, trust_remote_code: bool = False) -> None:
    """Refuse a local model directory whose files lie (see the module docstring). Directories without
    ``config.json`` or safetensors weights are left to transformers."""
    d = Path(model_dir)
    if not (d.is_dir() and (d / "config.json").is_file()):
        return
    files = sorted(d.glob("*.safetensors"))
    if not files:
        return
    cfg_dict = _config(d)
    on_disk: dict[str, tuple[int, ...]] = {}
    for f in files:
        on_disk.update(_safetensors_numel(f))
    file_params = sum(math.prod(s) for s in on_disk.values())
    if trust_remote_code:
        return  # building the model would run its code: leave that to the explicit load
    try:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM

        config = AutoConfig.from_pretrained(str(d), local_files_only=True)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
    except Exception as e:  # noqa: BLE001 - any failure to even describe the model is the config's fault
        raise ModelLoadError(f"{d / 'config.json'}: does not describe a causal LM transformers can build "
                             f"({type(e).__name__}: {str(e)[:200]})") from None
    params = dict(model.named_parameters())
    model_params = sum(p.numel() for p in params.values())
    for name, p in params.items():
        shape = on_disk.get(name)
        if shape is not None and tuple(p.shape) != shape:
            raise ModelLoadError(f"{d}: config.json gives {name} the shape {tuple(p.shape)}, the weights file "
                                 f"{shape}; the config and the weights are from different models")
    if model_params > file_params + _SLACK_PARAMS:
        raise ModelLoadError(f"{d}: config.json describes {model_params:,} parameters but the weights hold "
                             f"{file_params:,}; refusing to allocate a model its files cannot fill "
                             f"(config keys: {', '.join(sorted(k for k in cfg_dict if 'size' in k))})")
