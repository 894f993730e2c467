"""Records read through a ``--map`` field map (``fieldmap``): each mapped field is taken from its expression,
the others are found as the generic reader finds them (``tree``, ``fields``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from searchgym.diversity.readers import fields as F
from searchgym.diversity.readers import tree as T
from searchgym.diversity.readers.calls import _evidence, query_of
from searchgym.diversity.readers.outcomes import is_refusal
from searchgym.diversity.readers.records import Episode, ReadStats
from searchgym.diversity.readers.transcripts import ParsedRecord, _Opts
from searchgym.errors import TrajectoryFormatError


def episodes_of(rec: Any, fieldmap: dict[str, Any]) -> list[Any]:
    """The episodes of one record: those ``episode=EXPR`` selects, else the record itself."""
    expr = fieldmap.get("episode")
    if expr is None:
        return [rec]
    got = expr.search(rec)
    if got is None:
        return []
    return got if isinstance(got, list) else [got]


def _flat_queries(v: Any, depth: int = 0) -> tuple[list[str], int]:
    """(queries, malformed) of a mapped value: strings, lists, objects / JSON strings with a query-like key."""
    if v is None:
        return [], 0
    items = v if isinstance(v, list) else [v]
    out: list[str] = []
    bad = 0
    for it in items:
        if isinstance(it, list):
            qs, b = _flat_queries(it, depth + 1) if depth < 16 else ([], 1)
            out.extend(qs)
            bad += b
            continue
        got = query_of(it) if isinstance(it, (dict, str)) else None
        if got is None or got[1] is None:
            bad += 1
        else:
            out.extend(got[1])
    return out, bad


def _mapped_queries(obj: Any, expr: Any, ev_expr: Any, ep: Episode, stats: ReadStats) -> None:
    qs, ep.malformed = _flat_queries(expr.search(obj))
    ev = ev_expr.search(obj) if ev_expr is not None else None
    per = ev if isinstance(ev, list) and len(ev) == len(qs) else [ev] * len(qs)
    for i, (q, e) in enumerate(zip(qs, per)):
        texts, titles = _evidence(e) if e is not None else ([], [])
        if texts and is_refusal(texts[0]):
            stats.rejected += 1
            continue
        ep.queries.append(q)
        ep.turns.append(i)
        ep.evidence.append(texts)
        ep.titles.append(titles)
        stats.grammars["map"] += 1


def _value(obj: Any, fieldmap: dict[str, Any], name: str, found: dict[str, tuple[str, Any]],
           conv: Any) -> Any:
    if name in fieldmap:
        return conv(fieldmap[name].search(obj))
    return found[name][1] if name in found else None


def parse_mapped(obj: Any, path: Path, lineno: int, stats: ReadStats, opts: _Opts,
                 default_step: int | None) -> ParsedRecord:
    """One episode object read through ``opts.fieldmap``."""
    fm = opts.fieldmap or {}
    if not isinstance(obj, (dict, list)):
        raise TrajectoryFormatError(f"an episode must be a JSON object or list, got {type(obj).__name__}")
    found = F.record_fields(obj) if isinstance(obj, dict) else {}
    question = _value(obj, fm, "question", found, F.as_text)
    reward = _value(obj, fm, "reward", found, F.as_number)
    success = _value(obj, fm, "success", found, F.as_number)
    step = _value(obj, fm, "step", found, F.as_step)
    eid = _value(obj, fm, "episode_id", found, F.as_id)
    qid = found["question_id"][1] if "question_id" in found and "question" not in fm else None
    answer = F.as_text(fm["answer"].search(obj)) if "answer" in fm else found.get("prediction", (None, None))[1]
    ep = Episode(queries=[], step=step if step is not None else default_step,
                 question=sys.intern(question) if question else None, question_id=qid or question, reward=reward,
                 episode_id=eid or f"{path.name}:{lineno}", source_line=lineno, answer=answer)
    if reward is None and success is not None:
        ep.reward = success
    ep.success = None if ep.reward is None else ep.reward >= (opts.success_threshold if success is None else 1.0)
    if "queries" in fm:
        _mapped_queries(obj, fm["queries"], fm.get("evidence"), ep, stats)
        return ep, [], 1
    rs, _ = T.readings(obj, opts)
    chosen = T.best(rs)
    if chosen is None:
        return ep, [], 0
    ep.queries, ep.evidence, ep.titles, ep.turns = chosen.queries, chosen.evidence, chosen.titles, chosen.turns
    ep.malformed = chosen.malformed
    T._merge(stats, chosen)
    return ep, chosen.pending, chosen.n_obs


def parsed_records(records: Iterator[tuple[int, str, Any]], fieldmap: dict[str, Any]) -> Iterator[tuple[int, str, Any]]:
    """The records of a container, each expanded into its mapped episodes."""
    for n, kind, rec in records:
        for sub in episodes_of(rec, fieldmap):
            yield n, kind, sub
