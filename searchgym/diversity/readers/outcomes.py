"""Outcomes read from text: a tool's refusal of a call, a reward the log states, and exact match of a prediction
against gold answers (for files that hold both but no reward). Each looks at a bounded part of its text.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from searchgym.rewards.metrics import em

# An observation that says the call never ran: the executor rejected it (ReAct's "Invalid action!", a
# malformed-request reply, an unknown tool). Matched at the start of the observation only: a retrieved
# passage that mentions an error further in is a result.
_REFUSAL = re.compile(
    r"[\s\"'\[(]*(?:\[?(?:search|tool|error)\]?[ \t]*[:\-]?[ \t]*)?"
    r"(?:invalid[ \t]+(?:action|request|format|tool|call|query|arguments?|input|json)"
    r"|error[ \t]*:|error[ \t]+(?:calling|executing|parsing|in)|tool[ \t]+\S{0,80}[ \t]+not[ \t]+found"
    r"|unknown[ \t]+(?:tool|action|function)|no[ \t]+such[ \t]+tool|(?:is[ \t]+)?not[ \t]+a[ \t]+valid[ \t]+"
    r"(?:tool|action|function)"
    r"|the[ \t]+(?:tool[ \t]+)?call[ \t]+(?:failed|was[ \t]+rejected)|request[ \t]+(?:failed|rejected))",
    re.IGNORECASE)


_FIRST = frozenset("ietunsrIETUNSR")  # the first letters a refusal can open with (most results: "Doc 1 …")


def is_refusal(observation: str) -> bool:
    """True when an observation is the tool refusing the call (the call was not a search that ran)."""
    head = observation[:300].lstrip(" \t\r\n\"'[(")
    return bool(head) and head[0] in _FIRST and _REFUSAL.match(head) is not None


# Rewards a log writes in its text: "Episode finished, reward = 1", "Your score (min 0.0, max 1.0): 1.0",
# and a trailing "{'em': 1, 'reward': 1, ...}" line.
_REWARD_PHRASE = re.compile(
    r"(?:episode[ \t]+(?:finished|ended|done)[ \t]*,?[ \t]*reward[ \t]*[=:][ \t]*"
    r"|your[ \t]+score[ \t]*(?:\([^)\n]{0,40}\))?[ \t]*:[ \t]*)(-?\d+(?:\.\d+)?)", re.IGNORECASE)
_DICT_LINE = re.compile(r"^[ \t]*(\{[^\n{}]{0,2000}\})[ \t]*$", re.MULTILINE)


def reward_in_text(text: str) -> float | None:
    """The reward a text states (the last such phrase; a trailing dict's ``reward``, else ``em``), or None."""
    if not text:
        return None
    tail = text[-4000:]
    found = None
    for m in _REWARD_PHRASE.finditer(tail):
        found = float(m.group(1))
    if found is not None:
        return found
    last = None
    for last in _DICT_LINE.finditer(tail):
        pass
    if last is None or ("reward" not in last.group(1) and "'em'" not in last.group(1)
                        and '"em"' not in last.group(1)):
        return None
    try:
        d = ast.literal_eval(last.group(1))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if isinstance(d, dict):
        for k in ("reward", "em", "score"):
            v = d.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return float(v)
            if isinstance(v, bool):
                return float(v)
    return None


def golds(v: Any) -> list[str] | None:
    """Gold answers of a field: a string, or a list of strings (nested one level, as FlashRAG's)."""
    if isinstance(v, str) and v.strip():
        return [v]
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return [str(v)]
    if isinstance(v, list):
        out = [x if isinstance(x, str) else str(x) for x in v if isinstance(x, (str, int, float))]
        return out or None
    return None


def em_success(gold: Any, prediction: Any) -> float | None:
    """Exact match (0/1) of a prediction against gold answers; None when either is missing."""
    g = golds(gold)
    if g is None:
        return None
    if isinstance(prediction, list) and len(prediction) == 1:
        prediction = prediction[0]
    if not isinstance(prediction, str) or not prediction.strip():
        return None
    return float(em(prediction, g))


def outcome(fs: dict[str, tuple[str, Any]], texts: list[tuple[str, str]], answer: Any,
            threshold: float) -> tuple[float | None, bool | None, str | None]:
    """(reward, success, where) of a record from its fields (``fields.record_fields``): its reward field, else its
    success field, else the reward a text states (``texts``: (path, text), the likeliest first), else exact match
    of its prediction (else ``answer``, the agent's answer read from the transcript) against its gold answers;
    (None, None, None) where the record states none of them (never a 0 for "unknown")."""
    for name in ("reward", "success"):
        if name in fs:
            path, r = fs[name]
            return r, r >= threshold, path
    for path, t in texts:
        r = reward_in_text(t)
        if r is not None:
            return r, r >= threshold, f"{path} (text)"
    pred = fs["prediction"][1] if "prediction" in fs else answer
    if "gold" in fs and pred:
        r = em_success(fs["gold"][1], pred)
        if r is not None:
            return r, r >= 1.0, f"exact match of {fs.get('prediction', ('the answer',))[0]} against {fs['gold'][0]}"
    return None, None, None
