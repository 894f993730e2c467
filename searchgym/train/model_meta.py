"""The env settings a trained model expects, saved next to its weights.

A model trained by ``searchgym squeeze`` / ``sft`` / ``rl`` learned one prompt template (the tiny LM:
``"Question: {question}\\n"``) and one passage budget; ``searchgym rollout --agent MODEL_DIR`` reads them
back from ``MODEL_DIR/searchgym_prompt.json`` so the model is evaluated in the env it was trained in.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

META_FILE = "searchgym_prompt.json"
_ENV_KEYS = ("max_turns", "top_k", "passage_chars")


def write_prompt_meta(model_dir: str | Path, prompt_template: str, **env: Any) -> Path:
    """Write ``prompt_template`` and env settings (``max_turns``, ``top_k``, ``passage_chars``) into
    ``model_dir``."""
    if not isinstance(prompt_template, str):
        raise TypeError("prompt_template must be a string (a template with {question} or a named style)")
    data: dict[str, Any] = {"prompt_template": prompt_template}
    data.update({k: v for k, v in env.items() if k in _ENV_KEYS and v is not None})
    p = Path(model_dir) / META_FILE
    p.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return p


def read_prompt_meta(model: str | Path) -> dict[str, Any] | None:
    """The saved settings of a model directory, or None (a hub name, or a model searchgym did not train)."""
    p = Path(str(model)) / META_FILE
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("prompt_template"), str):
        return None
    out: dict[str, Any] = {"prompt_template": data["prompt_template"]}
    for k in _ENV_KEYS:
        v = data.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            out[k] = v
    return out
