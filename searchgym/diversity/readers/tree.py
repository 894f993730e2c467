"""The generic reader: any JSON-like record read as a tree, for records no named format describes.

One walk of the record finds the structured search calls (``calls``) and the string leaves that hold calls in a
text grammar (tags, ``<tool_call>`` JSON, ReAct under any ``Question:`` / ``Claim:`` / ``Instruction:`` /
``Task:`` header, Search-o1 markers). Each is a competing *reading* of the record: the structured calls
together, or one text leaf. The reading with the most executed queries wins (ties: the structured one). The
question, reward, step and episode id are found by name at the shallowest depth (``fields``); a question also
as the first chat ``user`` turn or a text header; success from a reward, a success field, a reward stated in
the text (``outcomes``), or exact match of a prediction against gold answers; never 0 where none is stated.
What was found where, and why other readings lost, is kept for ``--explain`` (``Explanation``).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchgym.diversity.readers import calls as K
from searchgym.diversity.readers import fields as F
from searchgym.diversity.readers.assembly import _Assembler
from searchgym.diversity.readers.fields import parse_question
from searchgym.diversity.readers.grammars import scan_text
from searchgym.diversity.readers.outcomes import outcome
from searchgym.diversity.readers.records import (
    _ASSISTANT,
    _PROMPT_KEYS,
    _REACT_ACTION_LINE,
    TOOL_CALL,
    Episode,
    ReadStats,
)
from searchgym.diversity.readers.transcripts import (
    _PARSERS,
    ParsedRecord,
    _Opts,
    fields_of,
    react_episode_text,
    record_question,
    split_response,
    transcripts_of,
)


@dataclass
class Reading:
    """One way to read a record's calls: its queries (with evidence) and what did not count."""

    name: str
    expr: str
    queries: list[str] = field(default_factory=list)
    evidence: list[list[str]] = field(default_factory=list)
    titles: list[list[str]] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)
    pending: list[tuple[str, int, str]] = field(default_factory=list)
    n_obs: int = 0
    malformed: int = 0
    rejected: int = 0
    other: int = 0
    answer: str | None = None
    question: str | None = None
    text: str | None = None
    stats: ReadStats = field(default_factory=lambda: ReadStats(format="tree"))

    def score(self) -> int:
        return len(self.queries) + (len(self.pending) if not self.n_obs else 0)


@dataclass
class Explanation:
    """What the generic reader found in one record (for ``--explain``)."""

    where: str
    found: dict[str, tuple[str, Any]] = field(default_factory=dict)
    readings: list[tuple[str, str, int, str]] = field(default_factory=list)  # name, expr, score, verdict
    missing: list[str] = field(default_factory=list)


def _structured(found: list[K.Found], answer: str | None) -> Reading:
    r = Reading("structured calls", _calls_expr(found), answer=answer)
    for turn, f in enumerate(found):
        if f.other:
            r.other += 1
        elif f.queries is None:
            r.malformed += 1
        elif f.refused:
            r.rejected += len(f.queries)
        elif f.has_output:
            r.n_obs += 1
            for q in f.queries:
                r.queries.append(q)
                r.evidence.append(list(f.evidence))
                r.titles.append(list(f.titles))
                r.turns.append(turn)
        else:
            r.pending.extend((q, turn, "structured") for q in f.queries)
    r.stats.grammars["structured"] += len(r.queries)
    return r


def _calls_expr(found: list[K.Found]) -> str:
    """A JMESPath expression for the calls' queries: a filter on the name over the list that holds them."""
    search = [f for f in found if not f.other]
    if not search:
        return ""
    f0 = search[0]
    idx = list(re.finditer(r"\[\d+\]", f0.path))
    if not idx:
        return F.join(f0.path, f0.query_key) if f0.path else f0.query_key
    last = idx[-1]
    lst = re.sub(r"\[\d+\]", "[*]", f0.path[:last.start()])  # calls in nested lists: project the outer ones
    inner = f0.path[last.end():].lstrip(".")
    pre = f"{inner}." if inner else ""
    return f"{lst}[?{pre}{f0.name_key}=={_raw(f0.name)}].{pre}{f0.query_key}"


def _raw(s: str) -> str:
    """A JMESPath JSON literal (`"search"`): it survives the shell's single quotes."""
    return "`" + json.dumps(s).replace("`", "\\`") + "`"


def _text_reading(path: str, text: str, opts: _Opts) -> Reading:
    r = Reading(f"text at {path}", path, text=text)
    body = text
    if _ASSISTANT.search(text):
        prompt, body = split_response(text)
        r.question = parse_question(prompt)
    elif "ction" in text and _REACT_ACTION_LINE.search(text):
        body, r.question = react_episode_text(text)
    asm = _Assembler(opts.search_tools)
    scan_text(body, asm, query_tags=opts.query_tags, grammar_names=opts.names)
    ep, r.pending = asm.build(r.stats)
    r.queries, r.evidence, r.titles, r.turns = ep.queries, ep.evidence, ep.titles, ep.turns
    r.n_obs, r.malformed, r.answer = asm.n_obs, ep.malformed, asm.answer
    r.rejected, r.other = r.stats.rejected, r.stats.other_calls
    return r


def _has_calls(s: str, opts: _Opts) -> bool:
    if len(s) < 20:
        return False
    if any(o in s for o, _ in opts.query_tags) or TOOL_CALL[0] in s:
        return True
    return "ction" in s and _REACT_ACTION_LINE.search(s) is not None


def _output_text(node: dict) -> str | None:
    """The text of a Responses-API ``output_text`` item (the agent's final answer, the last one wins)."""
    t = node.get("text")
    if node.get("type") == "output_text" and isinstance(t, str) and t.strip():
        return t.strip()
    return None


def _last_key(path: str) -> str:
    tail = path.rsplit(".", 1)[-1]
    return tail.split("[", 1)[0].strip('"').lower()


def _under(path: str, keys: frozenset[str]) -> bool:
    """Whether a leaf's path lies under one of the top-level ``keys`` (as JMESPath identifiers)."""
    if not keys:
        return False
    head = path
    for sep in (".", "["):
        j = head.find(sep, 1)
        if j > 0:
            head = head[:j]
    return head in keys


def _flat(obj: dict) -> bool:
    for v in obj.values():
        if isinstance(v, (dict, list)):
            return False
    return True


def _flat_readings(obj: dict, opts: _Opts, claimed: frozenset[str]) -> tuple[list[Reading], list[tuple[str, str]]]:
    """``readings`` of a record without nested values (most rollout dumps), in one loop: the record itself may be
    a call; else its long string fields are its leaves."""
    c = K.call_at(obj, "", None, opts.search_tools)
    if c is not None:
        return [_structured([c], None)], []
    texts: list[Reading] = []
    leaves: list[tuple[str, str]] = []
    for k, v in obj.items():
        if isinstance(v, str) and len(v) >= 20:
            path = F.key_expr(k)
            leaves.append((path, v))
            if str(k).lower() not in _PROMPT_KEYS and path not in claimed and _has_calls(v, opts):
                texts.append(_text_reading(path, v, opts))
    return texts, leaves


def readings(obj: Any, opts: _Opts,
             claimed: frozenset[str] = frozenset()) -> tuple[list[Reading], list[tuple[str, str]]]:
    """The competing readings of a record, and its string leaves (path, text) for rewards in text. Text leaves
    under a ``claimed`` top-level key (a transcript read whole, ``transcripts_of``) are not read again alone."""
    if isinstance(obj, dict) and _flat(obj):
        return _flat_readings(obj, opts, claimed)
    found: list[K.Found] = []
    texts: list[Reading] = []
    leaves: list[tuple[str, str]] = []
    answer = None
    for path, node, call in K.walk(obj, opts.search_tools):
        if call is not None:
            found.append(call)
        elif isinstance(node, dict):
            answer = _output_text(node) or answer
        elif isinstance(node, str) and len(node) >= 20:
            leaves.append((path, node))
            if _last_key(path) not in _PROMPT_KEYS and not _under(path, claimed) and _has_calls(node, opts):
                texts.append(_text_reading(path, node, opts))
    out = ([_structured(found, answer)] if found else []) + texts
    return out, leaves


def best(rs: list[Reading]) -> Reading | None:
    """The reading with the most executed (or, in a run without outputs, issued) queries; structure wins ties."""
    if not rs:
        return None
    return max(enumerate(rs), key=lambda x: (x[1].score(), -x[0]))[1]


def _question(obj: dict, fs: dict[str, tuple[str, Any]], chosen: Reading | None) -> tuple[str | None, str | None]:
    """(path, question): the record's (``record_question``), else the header line of the text read."""
    path, q = record_question(obj, fs)
    if q:
        return path, q
    if chosen is not None and chosen.question:
        return f"{chosen.expr} (header line)", chosen.question
    return None, None


def _key(p: ParsedRecord) -> tuple[int, int]:
    """How much a reading read: its executed queries, then (a reading without any observation) its issued calls."""
    ep, pending, n_obs = p
    return len(ep.queries), (len(pending) if not n_obs else 0)


def _transcripts(obj: dict[str, Any], named: list[tuple[str, str | None]], path: Path, lineno: int, opts: _Opts,
                 default_step: int | None, into: ReadStats | None) -> tuple[str, ParsedRecord, ReadStats] | None:
    """The best reading of the record's whole transcripts (``transcripts_of``; the first wins ties). ``into``: the
    run's statistics, when this one reading is sure to win (else each reading counts apart, the winner's merged)."""
    out = None
    saved = opts.field
    try:
        for reader, key in named:
            st = into if into is not None else ReadStats(format=reader)
            opts.field = key
            got = _PARSERS[reader](obj, path, lineno, st, opts, default_step)
            if out is None or _key(got) > _key(out[1]):
                out = (reader, got, st)
    finally:
        opts.field = saved
    return out


def _merge_stats(stats: ReadStats, st: ReadStats) -> None:
    stats.grammars.update(st.grammars)
    stats.skipped_reasons.update(st.skipped_reasons)
    for k in ("reemitted", "unexecuted", "other_calls", "rejected", "sidecar"):
        setattr(stats, k, getattr(stats, k) + getattr(st, k))


def parse_tree(obj: dict[str, Any], path: Path, lineno: int, stats: ReadStats, opts: _Opts,
               default_step: int | None) -> ParsedRecord:
    """One record read by the generic reader: the best of its readings, whole transcripts (a chat turn list, a
    prompt / response pair, a text field; ``transcripts_of``) against calls found by structure anywhere and text
    leaves elsewhere; a transcript wins ties. ``opts.labels`` counts the kind of reading that won."""
    named = transcripts_of(obj, opts, fallback=True)
    claimed = frozenset([F.key_expr(k) for _, k in named if k is not None]) if named else frozenset()
    rs, leaves = readings(obj, opts, claimed)
    chosen = best(rs)
    if not named and chosen is None and opts.file_reading is not None:
        named = [opts.file_reading]  # nothing here: read as the file's records are (its field types checked)
    sure = chosen is None and len(named) == 1
    whole = _transcripts(obj, named, path, lineno, opts, default_step, stats if sure else None) if named else None
    if whole is not None and (chosen is None or _key(whole[1]) >= _key(_parsed(chosen))):
        reader, got, st = whole
        if not sure:
            _merge_stats(stats, st)
        opts.labels[reader] += 1
        if opts.file_reading is None:
            opts.file_reading = next(n for n in named if n[0] == reader)
        if opts.explain is not None and len(opts.explain) < opts.explain_limit:
            others = readings(obj, opts)[0]  # the generic reader's view of the transcript too
            opts.explain.append(_explain_transcript(f"{path.name}, record {lineno}", reader, named, got, others))
        return got
    opts.labels["tree" if chosen is not None else ""] += 1
    fs = fields_of(obj, opts, strict=False)
    qpath, question = _question(obj, fs, chosen)
    texts = ([(chosen.expr, chosen.text)] if chosen is not None and chosen.text else []) + leaves[::-1]
    reward, success, rpath = outcome(fs, texts, chosen.answer if chosen is not None else None, opts.success_threshold)
    step = fs["step"][1] if "step" in fs else default_step
    eid = fs["episode_id"][1] if "episode_id" in fs else f"{path.name}:{lineno}"
    qid = fs["question_id"][1] if "question_id" in fs else question
    ep = Episode(queries=[], step=step, question=sys.intern(question) if question else None,
                 question_id=qid, reward=reward, success=success, episode_id=eid, source_line=lineno)
    pending, n_obs = [], 0
    if chosen is not None:
        ep.queries, ep.evidence, ep.titles, ep.turns = chosen.queries, chosen.evidence, chosen.titles, chosen.turns
        ep.malformed, ep.answer = chosen.malformed, chosen.answer
        pending, n_obs = chosen.pending, chosen.n_obs
        _merge(stats, chosen)
    if ep.answer is None and "prediction" in fs:
        ep.answer = fs["prediction"][1]
    if opts.explain is not None and len(opts.explain) < opts.explain_limit:
        opts.explain.append(_explain(f"{path.name}, record {lineno}", fs, qpath, question, rpath, rs, chosen))
    return ep, pending, n_obs


def _parsed(r: Reading) -> ParsedRecord:
    return Episode(queries=r.queries), r.pending, r.n_obs


def _explain_transcript(where: str, reader: str, named: list[tuple[str, str | None]], got: ParsedRecord,
                        rs: list[Reading]) -> Explanation:
    ep, pending, _ = got
    ex = Explanation(where)
    key = next(k for r, k in named if r == reader)
    ex.found["queries"] = (f"{F.key_expr(key or '')} (a {reader} transcript: its calls parsed by the grammars)",
                           ep.queries[:3] or [q for q, _, _ in pending[:3]])
    if ep.question:
        ex.found["question"] = ("(the transcript's question)", ep.question)
    if ep.reward is not None or ep.success is not None:
        ex.found["reward"] = ("(the record's reward)", ep.reward)
    kept = _key(got)[0]
    ex.readings.append((f"{reader} transcript", F.key_expr(key or ""), kept, "kept"))
    for r in rs:
        ex.readings.append((r.name, r.expr, r.score(), f"lost: {r.score()} queries against {kept}"))
    ex.missing = [k for k in ("queries", "question", "reward") if k not in ex.found]
    return ex


def _merge(stats: ReadStats, r: Reading) -> None:
    s = r.stats
    stats.grammars.update(s.grammars)
    stats.reemitted += s.reemitted
    stats.unexecuted += s.unexecuted
    stats.other_calls += r.other
    stats.rejected += r.rejected


def _explain(where: str, fs: dict[str, tuple[str, Any]], qpath: str | None, question: str | None,
             rpath: str | None, rs: list[Reading], chosen: Reading | None) -> Explanation:
    ex = Explanation(where)
    if chosen is not None and chosen.expr:
        expr = chosen.expr if chosen.text is None else f"{chosen.expr} (a text: its calls parsed by the grammars)"
        ex.found["queries"] = (expr, chosen.queries[:3] or [q for q, _, _ in chosen.pending[:3]])
    if qpath:
        ex.found["question"] = (qpath, question)
    if rpath:
        ex.found["reward"] = (rpath, None)
    for k in ("step", "episode_id", "gold", "prediction"):
        if k in fs:
            ex.found[k] = fs[k]
    for r in rs:
        if r is chosen:
            verdict = "kept"
        else:
            verdict = f"lost: {r.score()} queries against {chosen.score() if chosen else 0}"
        extra = f" ({r.rejected} refused by the tool)" if r.rejected else ""
        ex.readings.append((r.name, r.expr, r.score(), verdict + extra))
    ex.missing = [k for k in ("queries", "question", "reward") if k not in ex.found]
    return ex
