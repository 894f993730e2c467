"""Plain-text logs -> parsed episodes: ReAct / Reflexion trial logs and training stdout logs (see ``logs``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

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
from searchgym.diversity.readers.outcomes import reward_in_text
from searchgym.diversity.readers.records import (
    _QUESTION_LINE,
    _TRIAL,
    DEFAULT_QUERY_TAGS,
    ReadStats,
)
from searchgym.diversity.readers.transcripts import (
    ParsedRecord,
    _finish,
    _Opts,
    _parse_sequence,
    _parse_verl,
)
from searchgym.errors import TrajectoryFormatError


def _react_log_records(path: str | os.PathLike[str] | Source, *,
                       query_tags: tuple[tuple[str, str], ...] = DEFAULT_QUERY_TAGS,
                       stats: ReadStats | None = None, lenient: bool = False,
                       search_tools: tuple[str, ...] = ()) -> Iterator[ParsedRecord]:
    """Parsed episodes of a plain-text ReAct log (see the module docstring). An episode opens at a
    ``Question:`` line, or, in a log without any, at a ``Claim:`` / ``Instruction:`` / ``Task:`` line. A trial /
    attempt is the episode's ``series``, never its training ``step``: retries are not training."""
    src = path if isinstance(path, Source) else C.load(path)
    stats = stats if stats is not None else ReadStats(format="react-log")
    text = _utf8(src, stats, lenient)
    opts = _Opts(query_tags=query_tags, text_field=None, step_field=None, question_field=None,
                 reward_field=None, success_threshold=1.0, search_tools=search_tools)
    log = _ReactLog(src.path.name, opts, stats, _header_of(text))
    for lineno, line in enumerate(text.split("\n"), 1):
        yield from log.line(lineno, line)
    yield from log.flush()


def _utf8(src: Source, stats: ReadStats, lenient: bool) -> str:
    raw = src.data
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = raw.count(b"\n", 0, exc.start) + 1
        if not lenient:
            raise TrajectoryFormatError(f"{src.path}, line {bad}: not valid UTF-8 (byte {exc.start})") from None
        stats.skipped_reasons["not UTF-8"] += 1
        return raw.decode("utf-8", errors="replace")


_OTHER_HEADER = re.compile(r"[ \t]*(?:Claim|Instruction|Task)(?:[ \t]*\d+)?[ \t]*:[ \t]*")


def _header_of(text: str) -> re.Pattern:
    """The line that opens an episode: ``Question:`` where the log has one, else Claim / Instruction / Task."""
    if any(_QUESTION_LINE.match(text, m.start()) for m in re.finditer(r"(?<![^\n])[ \t]*Question", text)):
        return _QUESTION_LINE
    return _OTHER_HEADER


class _ReactLog:
    """The state of a ReAct log read line by line: the open episode, its trial and its outcome."""

    def __init__(self, name: str, opts: _Opts, stats: ReadStats, header: re.Pattern[str]) -> None:
        self.name, self.opts, self.stats, self.header = name, opts, stats, header
        self.series: str | None = None
        self.success: bool | None = None
        self.skipping = False
        self.cur: list[str] = []
        self.cur_q: str | None = None
        self.cur_line = 0

    def flush(self) -> Iterator[ParsedRecord]:
        if self.cur_q is not None:
            asm = _Assembler(self.opts.search_tools)
            body = "\n".join(self.cur)
            scan_text(body, asm, query_tags=self.opts.query_tags, grammar_names=self.opts.names)
            success, reward = self.success, None if self.success is None else float(self.success)
            if success is None and (said := reward_in_text(body)) is not None:
                reward, success = said, said >= self.opts.success_threshold  # "Episode finished, reward = 1"
            meta = {"step": None, "reward": reward, "episode_id": f"{self.name}:{self.cur_line}",
                    "question_id": None, "source_line": self.cur_line, "series": self.series}
            yield _finish(asm, self.stats, meta, self.cur_q, self.opts, success=success)
        self.cur, self.cur_q = [], None

    def line(self, lineno: int, line: str) -> Iterator[ParsedRecord]:
        low = line.lower()
        if self.skipping:
            self.skipping = not ("(end of examples)" in low or "end previous trial" in low)
            return
        if "here are some examples" in low or "last trial you attempted" in low or "previous trial:" in low:
            yield from self.flush()
            self.skipping = True
            return
        stripped = line.strip()
        if len(stripped) < 100 and not self.header.match(line) and not low.lstrip().startswith(
                ("thought", "action", "observation")):
            upd = _marker(stripped, low)
            if upd is not None:
                yield from self.flush()
                for k, v in upd.items():
                    setattr(self, k, v)
                return
        m = self.header.match(line)
        if m:
            yield from self.flush()
            self.cur_q = line[m.end():].strip()
            self.cur_line = lineno
            return
        if self.cur_q is not None:
            self.cur.append(line)


def _marker(stripped: str, low: str) -> dict[str, Any] | None:
    """A block marker line (agents' outcome, trial number, correct answer): the state it sets (the open
    episode ends there), or None."""
    if "begin correct agents" in low or "begin incorrect agents" in low or "begin halted agents" in low:
        return {"success": "begin correct" in low}
    m = _TRIAL.search(stripped)
    if m and not stripped.lower().startswith(("trial summary", "correct answer")):
        return {"series": f"{m.group(1).lower()} {int(m.group(2))}", "success": None}
    return {} if low.startswith("correct answer:") else None


def _train_log_records(src: Source, opts: _Opts, stats: ReadStats, lenient: bool) -> Iterator[ParsedRecord]:
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
