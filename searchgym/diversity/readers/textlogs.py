"""Plain-text logs -> parsed episodes: ReAct / Reflexion trial logs and training stdout logs (see ``logs``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from searchgym.diversity.readers import containers as C
from searchgym.diversity.readers import logs as L
from searchgym.diversity.readers.assembly import (
    _Assembler,
)
from searchgym.diversity.readers.containers import BadRecord as _BadRecord
from searchgym.diversity.readers.containers import Source
from searchgym.diversity.readers.detection import (
    _skip_or_raise,
)
from searchgym.diversity.readers.grammars import (
    scan_text,
)
from searchgym.diversity.readers.records import (
    _QUESTION_LINE,
    _TRIAL,
    DEFAULT_QUERY_TAGS,
    ReadStats,
)
from searchgym.diversity.readers.transcripts import (
    _finish,
    _Opts,
    _parse_sequence,
    _parse_verl,
    _Parsed,
)
from searchgym.errors import TrajectoryFormatError


def _react_log_records(path: str | os.PathLike[str] | Source, *,
                       query_tags: tuple[tuple[str, str], ...] = DEFAULT_QUERY_TAGS,
                       stats: ReadStats | None = None, lenient: bool = False,
                       search_tools: tuple[str, ...] = ()) -> Iterator[_Parsed]:
    """Parsed episodes of a plain-text ReAct log (see the module docstring). A trial / attempt is the
    episode's ``series``, never its training ``step``: retries are not training."""
    src = path if isinstance(path, Source) else C.load(path)
    p = src.path
    stats = stats if stats is not None else ReadStats(format="react-log")
    raw = src.data
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = raw.count(b"\n", 0, exc.start) + 1
        if not lenient:
            raise TrajectoryFormatError(f"{p}, line {bad}: not valid UTF-8 (byte {exc.start})") from None
        stats.skipped_reasons["not UTF-8"] += 1
        text = raw.decode("utf-8", errors="replace")
    opts = _Opts(query_tags=query_tags, text_field=None, step_field=None, question_field=None,
                 reward_field=None, success_threshold=1.0, search_tools=search_tools)
    trial: int | None = None
    series: str | None = None
    success: bool | None = None
    skipping = False
    cur: list[str] = []
    cur_q: str | None = None
    cur_line = 0

    def flush() -> Iterator[_Parsed]:
        nonlocal cur, cur_q
        if cur_q is not None:
            asm = _Assembler(opts.search_tools)
            scan_text("\n".join(cur), asm, query_tags=query_tags, grammar_names=opts.names)
            meta = {"step": None, "reward": None if success is None else float(success),
                    "episode_id": f"{p.name}:{cur_line}", "question_id": None, "source_line": cur_line,
                    "series": series}
            yield _finish(asm, stats, meta, cur_q, opts, success=success)
        cur, cur_q = [], None

    for lineno, line in enumerate(text.split("\n"), 1):
        low = line.lower()
        if skipping:
            if "(end of examples)" in low or "end previous trial" in low:
                skipping = False
            continue
        if "here are some examples" in low or "last trial you attempted" in low or "previous trial:" in low:
            yield from flush()
            skipping = True
            continue
        stripped = line.strip()
        if len(stripped) < 100 and not _QUESTION_LINE.match(line) and not stripped.lower().startswith(
                ("thought", "action", "observation")):
            if "begin correct agents" in low or "begin incorrect agents" in low or "begin halted agents" in low:
                yield from flush()
                success = "begin correct" in low
                continue
            m = _TRIAL.search(stripped)
            if m and not stripped.lower().startswith(("trial summary", "correct answer")):
                yield from flush()
                trial = int(m.group(2))
                series = f"{m.group(1).lower()} {trial}"
                success = None
                continue
            if low.startswith("correct answer:"):
                yield from flush()
                continue
        m = _QUESTION_LINE.match(line)
        if m:
            yield from flush()
            cur_q = line[m.end():].strip() or None
            cur_line = lineno
            if cur_q is None:
                cur_q = ""
            continue
        if cur_q is not None:
            cur.append(line)
    yield from flush()


def _train_log_records(src: Source, opts: _Opts, stats: ReadStats, lenient: bool) -> Iterator[_Parsed]:
    """Parsed samples of a training stdout log (``logs``): each a decoded sequence (or a prompt and its
    response) with its step."""
    text = src.data.decode("utf-8", errors="replace")
    opts.field = "sequence"
    for lineno, rec in L.training_log_records(text):
        em = L.exact_match(rec)
        if em is not None:
            rec["em"] = em
        try:
            if "output" in rec:  # verl's [prompt] / [response] printout: the response is the agent's text
                yield _parse_verl(rec, src.path, lineno, stats, opts, None)
            else:
                yield _parse_sequence(rec, src.path, lineno, stats, opts, None)
        except TrajectoryFormatError as exc:
            _skip_or_raise(_BadRecord("unreadable sample", str(exc)), f"{src.path}, line {lineno}", stats, lenient)
