"""Step and Trajectory records and their JSONL reading and writing: the common currency.

One episode per line. Anything that writes this schema can be analysed, trained on or replayed::

    {"schema": 1, "episode_id", "question_id", "question", "answers": [...], "family", "split",
     "agent", "policy_step": int|null, "seed",
     "steps": [{"action", "kind": "search"|"answer"|"invalid", "query", "doc_ids", "gold_hit", "reward"}],
     "prediction", "reward", "em", "f1", "num_searches"}

Readers accept older schema versions (and lines without ``schema``, taken as version 1). Extra keys are
kept in ``extra`` so that a round trip loses nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from searchgym.errors import TrajectoryFormatError

SCHEMA_VERSION = 1
STEP_KINDS = ("search", "answer", "invalid")


@dataclass
class Step:
    action: str
    kind: str
    query: str | None = None
    doc_ids: list[str] = field(default_factory=list)
    gold_hit: bool | None = None
    reward: float = 0.0
    # Optional extras: retrieved titles, queries of a parallel search, etc.
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if k != "extra"}
        d.update(self.extra)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Step:
        if "action" not in d or "kind" not in d:
            raise TrajectoryFormatError(f"step needs 'action' and 'kind', got keys {sorted(d)}")
        known = {f.name for f in fields(cls)} - {"extra"}
        kw = {k: d[k] for k in known if k in d}
        kw["doc_ids"] = [str(x) for x in (kw.get("doc_ids") or [])]
        extra = {k: v for k, v in d.items() if k not in known}
        return cls(**kw, extra=extra)


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
            if s.kind != "search":
                continue
            multi = s.extra.get("queries")
            if multi:
                out.extend(str(q) for q in multi)
            elif s.query is not None:
                out.append(s.query)
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
    def from_dict(cls, d: dict[str, Any]) -> Trajectory:
        version = d.get("schema", 1)
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise TrajectoryFormatError(
                f"trajectory schema {version!r} is newer than this searchgym ({SCHEMA_VERSION}); upgrade searchgym")
        for key in ("episode_id", "question"):
            if key not in d:
                raise TrajectoryFormatError(f"trajectory needs {key!r}, got keys {sorted(d)}")
        known = {f.name for f in fields(cls)} - {"extra", "steps"}
        kw = {k: d[k] for k in known if k in d}
        kw.setdefault("question_id", str(d["episode_id"]))
        kw.setdefault("answers", [])
        kw["steps"] = [Step.from_dict(s) for s in d.get("steps", [])]
        extra = {k: v for k, v in d.items() if k not in known and k not in ("steps", "schema")}
        return cls(**kw, extra=extra)


def read_trajectories(path: str | os.PathLike, *, lenient: bool = False) -> Iterator[Trajectory]:
    """Yield the trajectories of a JSONL file. A bad line raises (naming file and line) unless ``lenient``."""
    path = Path(path)
    with path.open("r", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield Trajectory.from_dict(json.loads(line))
            except (json.JSONDecodeError, TrajectoryFormatError, TypeError) as exc:
                if lenient:
                    continue
                raise TrajectoryFormatError(f"{path}, line {lineno}: {exc}") from exc


def load_trajectories(path: str | os.PathLike, *, lenient: bool = False) -> list[Trajectory]:
    return list(read_trajectories(path, lenient=lenient))


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
