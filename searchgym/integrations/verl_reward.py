"""verl's ``custom_reward_function`` for searchgym tasks, importable without verl.

``compute_score`` is re-exported by :mod:`searchgym.integrations.verl`; point
``reward.custom_reward_function.path`` at either file. Inputs come from a trainer's dataset and rollouts, so
they are bounded: a ``ground_truth`` nested deeper than :data:`MAX_GROUND_TRUTH_DEPTH` or with more than
:data:`MAX_GOLD_ANSWERS` answers raises :class:`~searchgym.errors.InputLimitError` (never a RecursionError).
"""

from __future__ import annotations

import json
import re
from typing import Any

from searchgym.errors import InputLimitError

MAX_GROUND_TRUTH_DEPTH = 8       # {"target": [answers]} is 2 deep; JSON-string ground truths are decoded once
MAX_GOLD_ANSWERS = 10_000
MAX_SOLUTION_CHARS = 1 << 22     # a longer response is scored on its first 4M characters

_CLOSERS = re.compile(r"</search>|</answer>|</tool_call>")


def _actions(solution_str: str) -> list[Any]:
    """The agent's actions in a verl response, parsed by searchgym's action parser (one per closing tag)."""
    from searchgym.envs.actions import parse_action

    out = []
    start = 0
    for m in _CLOSERS.finditer(solution_str):
        out.append(parse_action(solution_str[start:m.end()]))
        start = m.end()
    return out


def _depth_over(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists/tuples/dicts more than ``limit`` deep (iterative: no recursion)."""
    stack = [(value, 1)]
    seen = 0
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            v = list(v.values())
        elif hasattr(v, "tolist") and not isinstance(v, (str, bytes)):
            v = v.tolist()
        if isinstance(v, (list, tuple)):
            if d > limit:
                return True
            seen += len(v)
            if seen > MAX_GOLD_ANSWERS * 4:
                raise InputLimitError(f"ground_truth holds over {MAX_GOLD_ANSWERS * 4:,} values")
            stack.extend((x, d + 1) for x in v)
    return False


def _golds(ground_truth: Any, _decoded: bool = False) -> list[str]:
    if _depth_over(ground_truth, MAX_GROUND_TRUTH_DEPTH):
        raise InputLimitError(f"ground_truth is nested more than {MAX_GROUND_TRUTH_DEPTH} levels deep; expected "
                              'a string, a list of strings or {"target": [...]}')
    if isinstance(ground_truth, dict):
        ground_truth = ground_truth.get("target", ground_truth.get("answers", []))
    if isinstance(ground_truth, str):
        if _decoded:
            return [ground_truth]
        try:
            parsed = json.loads(ground_truth)
        except ValueError:
            return [ground_truth]
        except RecursionError:
            raise InputLimitError("ground_truth is a JSON string nested too deeply to decode; expected a string, "
                                  'a list of strings or {"target": [...]}') from None
        return _golds(parsed, True) if not isinstance(parsed, str) else [parsed]
    if hasattr(ground_truth, "tolist"):  # numpy arrays from parquet
        ground_truth = ground_truth.tolist()
    if isinstance(ground_truth, (list, tuple)):
        if len(ground_truth) > MAX_GOLD_ANSWERS:
            raise InputLimitError(f"ground_truth has {len(ground_truth):,} answers; at most {MAX_GOLD_ANSWERS:,}")
        return [str(a) for a in ground_truth]  # depth is bounded above, so str() cannot recurse far
    return [] if ground_truth is None else [str(ground_truth)]


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None,
                  **kwargs: Any) -> dict[str, Any]:
    """verl ``custom_reward_function``: ``score`` is exact match of the last answer (searchgym's rule).

    Returns ``{"score", "em", "f1", "num_searches", "queries"}``; the extra keys land in verl's rollout
    dump. Answers come from ``<answer>`` tags or ``answer`` tool calls; searches from ``<search>`` tags and
    ``search`` tool calls (``query`` or ``query_list``). Raises :class:`~searchgym.errors.InputLimitError`
    for a ground truth past the bounds above.
    """
    from searchgym.rewards import em, f1

    text = solution_str[:MAX_SOLUTION_CHARS] if isinstance(solution_str, str) else ""
    golds = _golds(ground_truth)
    queries: list[str] = []
    num_searches = 0
    prediction = None
    for p in _actions(text):
        if p.kind == "search":
            num_searches += 1
            queries.extend(p.queries)
        elif p.kind == "answer":
            prediction = p.answer
    e = em(prediction, golds) if golds else 0
    return {"score": float(e), "em": int(e), "f1": float(f1(prediction, golds)) if golds else 0.0,
            "num_searches": num_searches, "queries": queries}


__all__ = ["MAX_GOLD_ANSWERS", "MAX_GROUND_TRUTH_DEPTH", "compute_score"]
