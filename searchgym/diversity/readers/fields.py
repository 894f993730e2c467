"""Fields of a record tree by name: the question, reward, step, episode id, gold and predicted answers, found at
the shallowest depth where a known key holds a usable value, each with its path as a JMESPath expression (what
``--explain`` prints and ``--map`` takes).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from typing import Any

from searchgym.diversity.readers.records import (
    ANSWER_KEYS,
    EPISODE_ID_KEYS,
    QUESTION_KEYS,
    REWARD_KEYS,
    STEP_KEYS,
)

TREE_QUESTION_KEYS = QUESTION_KEYS + ("claim", "input_question", "task", "instruction", "prompt", "input")
SUCCESS_KEYS = ("success", "is_success", "solved", "passed")
GOLD_KEYS = ("expected", "expected_answer", "expected_answers", "gold", "gold_answer", "gold_answers",
             "golden_answers", "golden_answer", "ground_truth", "groundtruth", "answers", "reference_answer")
# (not "answer": in many dumps it is the agent's own answer, and EM against itself would always succeed)
PRED_KEYS = ANSWER_KEYS + ("predicted", "predicted_answers", "model_prediction", "output_answer")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_FIELD_DEPTH = 3


_EXPRS: dict[str, str] = {}  # key -> its expression (records repeat their keys; bounded below)


def key_expr(key: str) -> str:
    """A dict key as a JMESPath identifier (quoted when it is not a bare name)."""
    k = str(key)
    got = _EXPRS.get(k)
    if got is not None:
        return got
    got = k if _IDENT.match(k) else '"' + k.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if len(_EXPRS) < 4096:
        _EXPRS[k] = got
    return got


def join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key_expr(key)}" if path else key_expr(key)


def _dicts(obj: Any, max_depth: int = MAX_FIELD_DEPTH) -> Iterator[tuple[str, dict]]:
    """(path, dict) breadth first through nested objects (not into lists: those hold calls and turns)."""
    level = [("", obj)] if isinstance(obj, dict) else []
    for _ in range(max_depth + 1):
        nxt = []
        for path, d in level:
            yield path, d
            nxt.extend((join(path, k), v) for k, v in d.items() if isinstance(v, dict))
        level = nxt
        if not level:
            return


def find(obj: Any, keys: tuple[str, ...], accept: Callable[[Any], Any]) -> tuple[str | None, Any]:
    """(path, converted value) of the shallowest key of ``keys`` (case-insensitive) that ``accept`` takes."""
    want = {k: i for i, k in enumerate(keys)}
    for path, d in _dicts(obj):
        best = None
        for k, v in d.items():
            rank = want.get(str(k).lower())
            if rank is None or (best is not None and rank >= best[0]):
                continue
            got = accept(v)
            if got is not None:
                best = (rank, join(path, k), got)
        if best is not None:
            return best[1], best[2]
    return None, None


def as_text(v: Any) -> str | None:
    """A question-like value: a non-empty string, or a list of one (``"question": ["…"]``)."""
    if isinstance(v, list) and len(v) == 1:
        v = v[0]
    if isinstance(v, str) and v.strip():
        return v.strip()
    return None


def as_number(v: Any) -> float | None:
    if isinstance(v, dict):
        return next((n for k in ("score", "reward", "acc", "em") if (n := as_number(v.get(k))) is not None), None)
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)) and math.isfinite(v):
        return float(v)
    if isinstance(v, str):
        try:
            f = float(v)
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


def as_step(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and v.strip().isdigit():
        return int(v)
    return None


def as_id(v: Any) -> str | None:
    if isinstance(v, str) and v.strip():
        return v.strip()
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    return None


def as_gold(v: Any) -> Any:
    if isinstance(v, str) and v.strip():
        return v
    if isinstance(v, list) and v and all(isinstance(x, (str, int, float)) for x in v):
        return v
    return None


def record_fields(obj: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """Field name -> (path, value) for the fields of a record that are found by name."""
    out: dict[str, tuple[str, Any]] = {}
    for name, keys, accept in (("question", TREE_QUESTION_KEYS, as_text), ("reward", REWARD_KEYS, as_number),
                               ("success", SUCCESS_KEYS, as_number), ("step", STEP_KEYS, as_step),
                               ("episode_id", EPISODE_ID_KEYS, as_id), ("gold", GOLD_KEYS, as_gold),
                               ("prediction", PRED_KEYS, as_text)):
        path, v = find(obj, keys, accept)
        if path is not None:
            out[name] = (path, v)
    if "gold" in out and "prediction" in out and out["gold"][0] == out["prediction"][0]:
        del out["gold"]  # one "answer" field is the prediction, not also its own gold
    return out
