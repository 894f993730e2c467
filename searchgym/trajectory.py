"""Step and Trajectory records and their JSONL reading and writing: the common currency.

One episode per line. Anything that writes this schema can be analysed, trained on or replayed::

    {"schema": 2, "episode_id", "question_id", "question", "answers": [...], "family", "split",
     "agent", "policy_step": int|null, "seed",
     "steps": [{"action", "kind": "search"|"answer"|"invalid", "query", "queries": [...], "titles": [...],
                "doc_ids", "gold_hit", "reward"}],
     "prediction", "reward", "em", "f1", "num_searches"}

Schema 2 made two fields real that schema 1 kept among a step's extra keys: ``queries`` (every query of a
search step; several for a parallel search, ``query`` is the first) and ``titles`` (the titles of the
retrieved passages, in ``doc_ids`` order). Schema-1 lines (and lines without ``schema``) keep loading: their
``queries`` / ``titles`` extras become the fields, and a step with only ``query`` gets ``queries = [query]``.
Other unknown keys are kept in ``extra`` so that a round trip loses nothing.

Every malformed line (not JSON, not an object, wrong types, invalid UTF-8, nesting too deep) is a
``TrajectoryFormatError`` naming the file and the line; ``lenient=True`` skips such lines (pass a list as
``skipped`` to learn which and why).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from searchgym.errors import TrajectoryFormatError

SCHEMA_VERSION = 2
STEP_KINDS = ("search", "answer", "invalid")
MAX_LINE_BYTES = 64 << 20  # a longer line is refused rather than parsed


def _opt_str(v: Any, what: str) -> str | None:
    if v is None or isinstance(v, str):
        return v
    raise TrajectoryFormatError(f"{what} must be a string or null, got {type(v).__name__}")


def _str_list(v: Any, what: str, *, coerce: bool = False) -> list[str]:
    if v is None:
        return []
    if not isinstance(v, (list, tuple)):
        raise TrajectoryFormatError(f"{what} must be a list, got {type(v).__name__}")
    out = []
    for x in v:
        if isinstance(x, str):
            out.append(x)
        elif coerce and isinstance(x, (int, float)) and not isinstance(x, bool):
            out.append(str(x))  # numeric passage ids
        else:
            raise TrajectoryFormatError(f"{what} must hold strings, got {type(x).__name__}")
    return out


def _number(v: Any, what: str, default: float = 0.0) -> float:
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise TrajectoryFormatError(f"{what} must be a finite number, got {v!r:.40}")
    return float(v)


def _opt_int(v: Any, what: str) -> int | None:
    if v is None:
        return None
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise TrajectoryFormatError(f"{what} must be an integer or null, got {v!r:.40}")
    return v


@dataclass
class Step:
    """One action of an episode. ``queries``/``titles`` are real fields since schema 2 (see module doc).

    ``query`` is the first of ``queries``: give either one; the other is filled in. ``queries``/``titles``
    that older code put into ``extra`` are moved into the fields.
    """

    action: str
    kind: str
    query: str | None = None
    doc_ids: list[str] = field(default_factory=list)
    gold_hit: bool | None = None
    reward: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    queries: list[str] = field(default_factory=list)
    titles: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.extra:
            moved_q = self.extra.pop("queries", None) if "queries" in self.extra else None
            moved_t = self.extra.pop("titles", None) if "titles" in self.extra else None
            if moved_q and not self.queries:
                self.queries = [str(q) for q in moved_q]
            if moved_t and not self.titles:
                self.titles = [str(t) for t in moved_t]
        if not self.queries and self.query is not None:
            self.queries = [self.query]
        elif self.queries and self.query is None:
            self.query = self.queries[0]

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"action": self.action, "kind": self.kind, "query": self.query,
                             "queries": list(self.queries), "titles": list(self.titles),
                             "doc_ids": list(self.doc_ids), "gold_hit": self.gold_hit, "reward": self.reward}
        d.update(self.extra)
        return d

    @classmethod
    def from_dict(cls, d: Any) -> Step:
        if not isinstance(d, dict):
            raise TrajectoryFormatError(f"a step must be a JSON object, got {type(d).__name__}")
        if "action" not in d or "kind" not in d:
            raise TrajectoryFormatError(f"step needs 'action' and 'kind', got keys {sorted(d)}")
        action = d["action"]
        if not isinstance(action, str):
            raise TrajectoryFormatError(f"step 'action' must be a string, got {type(action).__name__}")
        kind = d["kind"]
        if not isinstance(kind, str):
            raise TrajectoryFormatError(f"step 'kind' must be a string, got {type(kind).__name__}")
        gold = d.get("gold_hit")
        if gold is not None and not isinstance(gold, bool):
            raise TrajectoryFormatError(f"step 'gold_hit' must be true, false or null, got {gold!r:.40}")
        known = {"action", "kind", "query", "doc_ids", "gold_hit", "reward", "queries", "titles"}
        extra = {k: v for k, v in d.items() if k not in known}
        return cls(action=action, kind=kind, query=_opt_str(d.get("query"), "step 'query'"),
                   doc_ids=_str_list(d.get("doc_ids"), "step 'doc_ids'", coerce=True), gold_hit=gold,
                   reward=_number(d.get("reward"), "step 'reward'"), extra=extra,
                   queries=_str_list(d.get("queries"), "step 'queries'"),
                   titles=_str_list(d.get("titles"), "step 'titles'"))


@dataclass
class Trajectory:
    episode_id: str
    question_id: str
    question: str
    answers: list[str]
    family: str | None = None
    split: str | None = None
    agent: str | None = None
    policy_step: int | None = None
    seed: int | None = None
    steps: list[Step] = field(default_factory=list)
    prediction: str | None = None
    reward: float = 0.0
    em: int = 0
    f1: float = 0.0
    num_searches: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def queries(self) -> list[str]:
        """The queries the agent issued, in order (parallel queries of one step are flattened)."""
        out: list[str] = []
        for s in self.steps:
            if s.kind == "search":
                out.extend(s.queries)
        return out

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"schema": SCHEMA_VERSION}
        for f in fields(self):
            if f.name in ("steps", "extra"):
                continue
            d[f.name] = getattr(self, f.name)
        d["steps"] = [s.to_dict() for s in self.steps]
        d.update(self.extra)
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, d: Any) -> Trajectory:
        if not isinstance(d, dict):
            raise TrajectoryFormatError(f"a trajectory must be a JSON object, got {type(d).__name__}")
        version = d.get("schema", 1)
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise TrajectoryFormatError(f"trajectory 'schema' must be a positive integer, got {version!r:.40}")
        if version > SCHEMA_VERSION:
            raise TrajectoryFormatError(
                f"trajectory schema {version!r} is newer than this searchgym ({SCHEMA_VERSION}); upgrade searchgym")
        for key in ("episode_id", "question"):
            if key not in d:
                raise TrajectoryFormatError(f"trajectory needs {key!r}, got keys {sorted(d)}")
        eid = d["episode_id"]
        if isinstance(eid, bool) or not isinstance(eid, (str, int)):
            raise TrajectoryFormatError(f"'episode_id' must be a string, got {type(eid).__name__}")
        question = d["question"]
        if not isinstance(question, str):
            raise TrajectoryFormatError(f"'question' must be a string, got {type(question).__name__}")
        qid = d.get("question_id", str(eid))
        if isinstance(qid, bool) or not isinstance(qid, (str, int)):
            raise TrajectoryFormatError(f"'question_id' must be a string, got {type(qid).__name__}")
        steps = d.get("steps") or []
        if not isinstance(steps, list):
            raise TrajectoryFormatError(f"'steps' must be a list, got {type(steps).__name__}")
        em_raw = d.get("em")
        em = float(em_raw) if isinstance(em_raw, bool) else _number(em_raw, "'em'")
        known = {f.name for f in fields(cls)} - {"extra", "steps"}
        extra = {k: v for k, v in d.items() if k not in known and k not in ("steps", "schema")}
        return cls(
            episode_id=str(eid), question_id=str(qid), question=question,
            answers=_str_list(d.get("answers"), "'answers'", coerce=True),
            family=_opt_str(d.get("family"), "'family'"), split=_opt_str(d.get("split"), "'split'"),
            agent=_opt_str(d.get("agent"), "'agent'"), policy_step=_opt_int(d.get("policy_step"), "'policy_step'"),
            seed=_opt_int(d.get("seed"), "'seed'"), steps=[Step.from_dict(s) for s in steps],
            prediction=_opt_str(d.get("prediction"), "'prediction'"), reward=_number(d.get("reward"), "'reward'"),
            em=int(em), f1=_number(d.get("f1"), "'f1'"),
            num_searches=_opt_int(d.get("num_searches"), "'num_searches'") or 0, extra=extra)


def _parse_line(raw: bytes) -> Trajectory:
    if len(raw) > MAX_LINE_BYTES:
        raise TrajectoryFormatError(f"line longer than {MAX_LINE_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TrajectoryFormatError(f"not valid UTF-8 (byte {exc.start})") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TrajectoryFormatError(f"not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise TrajectoryFormatError("JSON nested too deeply") from None
    try:
        return Trajectory.from_dict(obj)
    except RecursionError:
        raise TrajectoryFormatError("JSON nested too deeply") from None


def read_trajectories(path: str | os.PathLike, *, lenient: bool = False,
                      skipped: list[tuple[int, str]] | None = None) -> Iterator[Trajectory]:
    """Yield the trajectories of a JSONL file.

    A malformed line raises ``TrajectoryFormatError`` naming file and line, unless ``lenient``: then it is
    skipped, and ``(line number, reason)`` is appended to ``skipped`` when a list is given.
    """
    path = Path(path)
    with path.open("rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                traj = _parse_line(line)
            except TrajectoryFormatError as exc:
                if lenient:
                    if skipped is not None:
                        skipped.append((lineno, str(exc)))
                    continue
                raise TrajectoryFormatError(f"{path}, line {lineno}: {exc}") from None
            yield traj


def load_trajectories(path: str | os.PathLike, *, lenient: bool = False,
                      skipped: list[tuple[int, str]] | None = None) -> list[Trajectory]:
    return list(read_trajectories(path, lenient=lenient, skipped=skipped))


class TrajectoryWriter:
    """Append trajectories to a JSONL file, one flushed line per episode.

    Each line is written whole and flushed, so an interrupted run leaves a valid file of the finished
    episodes (a crash mid-write can only lose the last, unterminated line, which readers skip).
    """

    def __init__(self, path: str | os.PathLike, mode: str = "w"):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open(mode, encoding="utf-8")
        self.count = 0

    def write(self, traj: Trajectory | dict[str, Any]) -> None:
        line = traj.to_json() if isinstance(traj, Trajectory) else json.dumps(traj, ensure_ascii=False)
        self._fh.write(line + "\n")
        self._fh.flush()
        self.count += 1

    def write_many(self, trajs: Iterable[Trajectory]) -> None:
        for t in trajs:
            self.write(t)

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self) -> TrajectoryWriter:  # noqa: PYI034 - typing.Self needs 3.11
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_trajectories(path: str | os.PathLike, trajs: Iterable[Trajectory]) -> int:
    with TrajectoryWriter(path) as w:
        w.write_many(trajs)
        return w.count
