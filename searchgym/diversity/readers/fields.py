"""Fields of a record by name: the one lookup of the question, reward, success, step, episode id, question id,
gold and predicted answers that every reader uses (the generic tree reader, the transcript parsers, ``--map``).
Each is found at the shallowest depth where a known key holds a usable value (the question: a question field at
any depth before a prompt field's question line), with its path as a JMESPath expression (what ``--explain``
prints and ``--map`` takes). Formats add their own sources on top of it (a chat transcript's first user turn, a
text's header line, the user's ``--question-field``), never a lookup of their own beside it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from typing import Any

from searchgym.diversity.readers.records import (
    _QWORD,
    ANSWER_KEYS,
    EPISODE_ID_KEYS,
    QUESTION_ID_KEYS,
    QUESTION_KEYS,
    REWARD_KEYS,
    STEP_KEYS,
)
from searchgym.errors import TrajectoryFormatError

# keys that hold the question itself, and keys that hold a prompt (its question line is the question)
QUESTION_FIELD_KEYS = QUESTION_KEYS + ("claim", "input_question")
PROMPT_FIELD_KEYS = ("task", "instruction", "prompt", "input")
TREE_QUESTION_KEYS = QUESTION_FIELD_KEYS + PROMPT_FIELD_KEYS
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
        nxt: list[tuple[str, dict[str, Any]]] = []
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




def parse_question(prompt: str) -> str | None:
    """The question of a decoded prompt: text after the last ``Question:`` up to the line end, else the text
    after ``### Instruction:`` up to the next ``###``, else the last chat-template user turn, else None."""
    if not prompt:
        return None
    last = None
    for last in _QWORD.finditer(prompt):
        pass
    if last is not None:
        rest = prompt[last.end():]
        end = len(rest)
        for stop in ("\n", "<|"):
            j = rest.find(stop)
            if 0 <= j < end:
                end = j
        return rest[:end].strip() or None
    k = prompt.find("### Instruction:")
    if k >= 0:
        rest = prompt[k + len("### Instruction:"):]
        j = rest.find("###")
        return (rest[:j] if j >= 0 else rest).strip() or None
    k = prompt.rfind("<|im_start|>user")
    if k >= 0:
        rest = prompt[k + len("<|im_start|>user"):]
        j = rest.find("<|im_end|>")
        return (rest[:j] if j >= 0 else rest).strip() or None
    return None


def as_question(v: Any) -> str | None:
    """A question field's question: its text (``as_text``), or, where a whole prompt was stored in it, the prompt's
    question line (``parse_question``)."""
    q = as_text(v)
    if q is None:
        return None
    return parse_question(q) or q


def as_prompt_question(v: Any) -> str | None:
    """The question of a prompt field: its question line, else the prompt itself when it is one short line (a
    prompt of several lines without a question line is a template, not a question)."""
    p = as_text(v)
    if p is None:
        return None
    q = parse_question(p)
    if q:
        return q
    return p if "\n" not in p and len(p) < 500 else None


# name, keys, acceptor; "prompt" is the question's second source, used only where no question key holds one
_FIELDS: tuple[tuple[str, tuple[str, ...], Callable[[Any], Any]], ...] = (
    ("question", QUESTION_FIELD_KEYS, as_question), ("prompt", PROMPT_FIELD_KEYS, as_prompt_question),
    ("reward", REWARD_KEYS, as_number), ("success", SUCCESS_KEYS, as_number), ("step", STEP_KEYS, as_step),
    ("episode_id", EPISODE_ID_KEYS, as_id), ("question_id", QUESTION_ID_KEYS, as_id),
    ("gold", GOLD_KEYS, as_gold), ("prediction", PRED_KEYS, as_text), ("answer", ("answer",), as_text))
_BY_KEY: dict[str, list[tuple[int, int]]] = {}  # lower-case key -> [(field index, rank of the key)]
for _i, _field in enumerate(_FIELDS):
    for _r, _k in enumerate(_field[1]):
        _BY_KEY.setdefault(_k, []).append((_i, _r))
# fields whose top-level value must have the right type in a named format ("score": "high" is a bad record)
_TYPED = {i: what for i, (name, _, _) in enumerate(_FIELDS)
          for n, what in (("reward", "a number"), ("step", "an integer")) if name == n}

_LAST: list[Any] = [None, None, None]  # the last record, its fields and its type error (a record is asked often)


def _walk(obj: dict[str, Any]) -> tuple[dict[str, tuple[str, Any]], str | None]:
    """One breadth-first pass for every field: in each object, the best-ranked key that its acceptor takes; the
    first object (shallowest) that has one decides. Also the type error of the top level's typed fields."""
    found: dict[int, tuple[str, Any]] = {}
    top: dict[int, tuple[int, Any, Any]] = {}  # typed field -> (rank, key, value) of its best-ranked top-level key
    bad = None
    for path, d in _dicts(obj):
        here: dict[int, tuple[int, str, Any]] = {}
        for k, v in d.items():
            hits = _BY_KEY.get(k.lower() if isinstance(k, str) else str(k).lower())
            if hits is None:
                continue
            for fi, rank in hits:
                if fi in found:
                    continue
                if not path and fi in _TYPED and (fi not in top or rank < top[fi][0]):
                    top[fi] = (rank, k, v)
                cur = here.get(fi)
                if cur is not None and cur[0] <= rank:
                    continue
                got = _FIELDS[fi][2](v)
                if got is not None:
                    here[fi] = (rank, join(path, k), got)
        if not path:  # a typed field whose best-ranked key was refused (else it was taken, at that rank)
            bad = next((f"{str(k)!r} must be {_TYPED[fi]}, got {v!r:.40}" for fi, (rank, k, v) in top.items()
                        if v is not None and not isinstance(v, dict) and (fi not in here or here[fi][0] > rank)),
                       None)
        for fi, (_, p, got) in here.items():
            found[fi] = (p, got)
        if len(found) == len(_FIELDS):
            break
    return {_FIELDS[fi][0]: pv for fi, pv in sorted(found.items())}, bad


def record_fields(obj: dict[str, Any], *, strict: bool = False) -> dict[str, tuple[str, Any]]:
    """Field name -> (path, value) for the fields of a record found by name: question (a question field, else a
    prompt field's question line), reward, success, step, episode_id, question_id, gold, prediction and answer
    (the record's ``answer``, the agent's own in some formats and the gold in others: never scored against gold).
    ``strict`` (a named format's record): a top-level reward or step of the wrong type raises
    ``TrajectoryFormatError``. The returned dict is shared (the last record's is kept): do not change it."""
    out: dict[str, tuple[str, Any]]
    bad: str | None
    if _LAST[0] is obj:
        out, bad = _LAST[1], _LAST[2]
    else:
        out, bad = _walk(obj)
        prompt = out.pop("prompt", None)
        if prompt is not None and "question" not in out:
            out["question"] = prompt
        if "question_id" not in out and isinstance(obj.get("extra_info"), dict):  # verl / Search-R1 data rows
            qid = as_id(obj["extra_info"].get("index"))
            if qid is not None:
                out["question_id"] = ("extra_info.index", qid)
        if "gold" in out and "prediction" in out and out["gold"][0] == out["prediction"][0]:
            del out["gold"]  # one "answer" field is the prediction, not also its own gold
        _LAST[0], _LAST[1], _LAST[2] = obj, out, bad
    if strict and bad is not None:
        raise TrajectoryFormatError(bad)
    return out
