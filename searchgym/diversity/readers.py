"""Offline readers: turn a run on disk into ``Episode`` records (step, question, queries, reward, evidence).

Formats (``fmt``):

``searchgym``  trajectory JSONL (``searchgym.trajectory``); step = ``policy_step``; success = ``em``.
``verl``       a verl ``rollout_data_dir``: files ``<step>.jsonl``, one line per rollout with ``input``
               (the decoded prompt), ``output`` (the decoded response), ``score`` and ``step``. Queries are
               the ``<search>…</search>`` spans of ``output``; the question is the text after the last
               ``Question:`` of ``input`` (up to the line end), else the last user turn of a chat template.
``search-r1``  Search-R1-style generation dumps: JSONL whose lines carry the full decoded sequence
               (prompt + response with ``<search>`` and ``<information>`` blocks) in one of the keys
               ``sequences_str``, ``sequence``, ``text``, ``response``, ``output`` (the first present), and
               optionally ``step``/``global_step``, ``reward``/``score``, ``question``. Only text after the
               first ``<|im_start|>assistant`` (when present) is searched for queries, so that the
               instruction's own ``<search> query </search>`` example is not counted. Evidence is read from
               the ``<information>`` blocks, titles from their ``Doc i(Title: …)`` headers.
``jsonl``      any JSONL; the user names the text field (``text_field``, dotted paths allowed, e.g.
               ``response.text``) and optionally ``step_field``, ``question_field`` and ``reward_field``.
               A list value is a list of queries; a string with ``<search>`` tags yields its spans; any
               other string is one query.

``auto`` picks: a directory of ``<int>.jsonl`` files -> verl; a file (or directory of files) whose first
line has ``steps`` and ``episode_id`` -> searchgym, ``input`` and ``output`` -> verl, a sequence key ->
search-r1; ``text_field`` given -> jsonl.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchgym.errors import ConfigError, TrajectoryFormatError

FORMATS = ("auto", "searchgym", "verl", "search-r1", "jsonl")
SEQUENCE_KEYS = ("sequences_str", "sequence", "text", "response", "output")

_SEARCH = re.compile(r"<search>(.*?)</search>", re.DOTALL)
_INFO = re.compile(r"<information>(.*?)(?:</information>|$)", re.DOTALL)
_DOC_TITLE = re.compile(r"Doc \d+\s*\(Title:\s*(.*?)\)\s", re.DOTALL)
_QUESTION = re.compile(r"question\s*:\s*", re.IGNORECASE)
_ASSISTANT = re.compile(r"<\|im_start\|>assistant|<\|start_header_id\|>assistant<\|end_header_id\|>|\[/INST\]")
_USER_TURN = re.compile(r"<\|im_start\|>user\s*(.*?)(?:<\|im_end\|>|$)", re.DOTALL)
_STEP_FILE = re.compile(r"^(\d+)\.jsonl$")


@dataclass
class Episode:
    """One rollout as the metrics see it."""

    queries: list[str]
    step: int | None = None
    question: str | None = None
    question_id: str | None = None
    reward: float | None = None
    success: bool | None = None
    evidence: list[list[str]] = field(default_factory=list)  # per query: texts retrieved by it
    titles: list[list[str]] = field(default_factory=list)    # per query: retrieved titles
    doc_ids: list[list[str]] = field(default_factory=list)   # per query: retrieved ids
    token_entropy: float | None = None
    # Where each query was issued: turn index within the episode (parallel queries of one turn share it).
    # Empty means one query per turn (turn i = query i).
    turns: list[int] = field(default_factory=list)
    malformed: int = 0                 # search calls that could not be parsed (never counted as queries)
    series: str | None = None          # a grouping key besides ``step``, e.g. a ReAct log's trial/attempt
    episode_id: str | None = None
    answer: str | None = None          # the agent's final answer, where the file has it
    source_line: int | None = None     # line (or record index) in the file, for messages


@dataclass
class Run:
    name: str
    path: str
    fmt: str
    episodes: list[Episode]

    @property
    def has_steps(self) -> bool:
        return any(e.step is not None for e in self.episodes)


# ---------------------------------------------------------------------------------------------------
# text parsing helpers


def search_spans(text: str) -> list[str]:
    """The stripped contents of the ``<search>…</search>`` blocks of a text, in order (empty ones dropped)."""
    return [q.strip() for q in _SEARCH.findall(text or "") if q.strip()]


def information_blocks(text: str) -> list[str]:
    return [b.strip() for b in _INFO.findall(text or "")]


def doc_titles(block: str) -> list[str]:
    """Titles of a Search-R1 ``<information>`` block (``Doc 1(Title: "X") text``)."""
    return [t.strip().strip('"').strip() for t in _DOC_TITLE.findall(block + " ")]


def parse_question(prompt: str) -> str | None:
    """The question of a decoded prompt: text after the last ``Question:`` up to the line end, else the
    last chat-template user turn, else None."""
    if not prompt:
        return None
    matches = list(_QUESTION.finditer(prompt))
    if matches:
        rest = prompt[matches[-1].end():]
        rest = re.split(r"\n|<\|", rest, maxsplit=1)[0]
        return rest.strip() or None
    turns = _USER_TURN.findall(prompt)
    if turns:
        return turns[-1].strip() or None
    return None


def split_response(sequence: str) -> tuple[str, str]:
    """(prompt, response) of a full decoded sequence, split at the last assistant header if any."""
    ms = list(_ASSISTANT.finditer(sequence))
    if not ms:
        return "", sequence
    m = ms[0]
    return sequence[:m.start()], sequence[m.end():]


def episode_from_response(response: str, **kw: Any) -> Episode:
    """Queries and evidence of a Search-R1-style response: the i-th ``<information>`` block after the i-th
    ``<search>`` is that query's evidence."""
    queries: list[str] = []
    evidence: list[list[str]] = []
    titles: list[list[str]] = []
    pos = 0
    tokens = re.compile(r"<search>(.*?)</search>|<information>(.*?)(?:</information>|$)", re.DOTALL)
    for m in tokens.finditer(response or "", pos):
        if m.group(1) is not None:
            q = m.group(1).strip()
            if q:
                queries.append(q)
                evidence.append([])
                titles.append([])
        elif queries:
            block = (m.group(2) or "").strip()
            evidence[-1].append(block)
            titles[-1].extend(doc_titles(block))
    return Episode(queries=queries, evidence=evidence, titles=titles, **kw)


def _get(d: Any, dotted: str) -> Any:
    cur = d
    for part in dotted.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return None
    return cur


def _int_or_none(x: Any) -> int | None:
    try:
        return int(x) if x is not None else None
    except (TypeError, ValueError):
        return None


def _float_or_none(x: Any) -> float | None:
    if isinstance(x, dict):  # e.g. {"score": .., "acc": ..}
        x = x.get("score", x.get("reward"))
    try:
        return float(x) if x is not None else None
    except (TypeError, ValueError):
        return None


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open("r", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TrajectoryFormatError(f"{path}, line {lineno}: not valid JSON ({exc.msg})") from exc
            if not isinstance(obj, dict):
                raise TrajectoryFormatError(f"{path}, line {lineno}: expected a JSON object, got "
                                            f"{type(obj).__name__}")
            yield lineno, obj


def _first_record(path: Path) -> dict[str, Any] | None:
    for _, obj in _jsonl(path):
        return obj
    return None


# ---------------------------------------------------------------------------------------------------
# per-format readers


def read_searchgym(path: Path) -> Iterator[Episode]:
    from searchgym.diversity.tracker import step_evidence, step_titles
    from searchgym.trajectory import read_trajectories

    for tr in read_trajectories(path):
        searches = [s for s in tr.steps if s.kind == "search"]
        queries = tr.queries
        aligned = len(queries) == len(searches)
        yield Episode(
            queries=queries, step=tr.policy_step, question=tr.question, question_id=tr.question_id,
            reward=float(tr.reward), success=bool(tr.em),
            evidence=[step_evidence(s) for s in searches] if aligned else [],
            titles=[step_titles(s) for s in searches] if aligned else [],
            doc_ids=[list(s.doc_ids) for s in searches] if aligned else [],
            token_entropy=_float_or_none(tr.extra.get("token_entropy")),
        )


def _verl_episode(obj: dict[str, Any], path: Path, lineno: int, default_step: int | None) -> Episode:
    if "output" not in obj:
        raise TrajectoryFormatError(f"{path}, line {lineno}: verl rollout line needs 'output' "
                                    f"(keys: {sorted(obj)})")
    question = parse_question(str(obj.get("input") or ""))
    step = _int_or_none(obj.get("step"))
    return episode_from_response(
        str(obj.get("output") or ""), step=step if step is not None else default_step, question=question,
        question_id=question, reward=_float_or_none(obj.get("score", obj.get("reward"))))


def read_verl(path: Path) -> Iterator[Episode]:
    files: list[tuple[int | None, Path]] = []
    if path.is_dir():
        for p in path.iterdir():
            m = _STEP_FILE.match(p.name)
            if m:
                files.append((int(m.group(1)), p))
        if not files:
            files = [(None, p) for p in sorted(path.glob("*.jsonl"))]
        files.sort(key=lambda x: (x[0] is None, x[0] or 0, x[1].name))
    else:
        m = _STEP_FILE.match(path.name)
        files = [(int(m.group(1)) if m else None, path)]
    for step, p in files:
        for lineno, obj in _jsonl(p):
            yield _verl_episode(obj, p, lineno, step)


def read_search_r1(path: Path) -> Iterator[Episode]:
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    for p in files:
        for lineno, obj in _jsonl(p):
            key = next((k for k in SEQUENCE_KEYS if isinstance(obj.get(k), str)), None)
            if key is None:
                raise TrajectoryFormatError(f"{p}, line {lineno}: no decoded sequence; expected one of "
                                            f"{SEQUENCE_KEYS} (keys: {sorted(obj)})")
            prompt, response = split_response(obj[key])
            if isinstance(obj.get("prompt"), str):
                prompt = obj["prompt"]
            question = obj.get("question") if isinstance(obj.get("question"), str) else parse_question(prompt)
            if question is None and not prompt:
                # no assistant header: drop the instruction part before the question line, if any
                q = parse_question(response)
                if q is not None:
                    question = q
                    response = response[response.find(q) + len(q):]
            step = _int_or_none(obj.get("step", obj.get("global_step")))
            yield episode_from_response(response, step=step, question=question, question_id=question,
                                        reward=_float_or_none(obj.get("reward", obj.get("score"))))


def read_generic(path: Path, *, text_field: str, step_field: str | None = None,
                 question_field: str | None = None, reward_field: str | None = None) -> Iterator[Episode]:
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    for p in files:
        for lineno, obj in _jsonl(p):
            val = _get(obj, text_field)
            if val is None:
                raise TrajectoryFormatError(f"{p}, line {lineno}: text field {text_field!r} is missing "
                                            f"(keys: {sorted(obj)})")
            if isinstance(val, list):
                queries = [str(q).strip() for q in val if str(q).strip()]
                ep = Episode(queries=queries)
            elif "<search>" in str(val):
                ep = episode_from_response(str(val))
            else:
                ep = Episode(queries=[str(val).strip()] if str(val).strip() else [])
            if step_field:
                ep.step = _int_or_none(_get(obj, step_field))
            if question_field:
                q = _get(obj, question_field)
                ep.question = str(q) if q is not None else None
                ep.question_id = ep.question
            rv = _get(obj, reward_field) if reward_field else obj.get("reward", obj.get("score"))
            ep.reward = _float_or_none(rv)
            yield ep


# ---------------------------------------------------------------------------------------------------


def detect_format(path: str | os.PathLike, *, text_field: str | None = None) -> str:
    """Guess the format of a run (see module docstring)."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"run {p} does not exist")
    if text_field:
        return "jsonl"
    if p.is_dir():
        if any(_STEP_FILE.match(c.name) for c in p.iterdir()):
            return "verl"
        files = sorted(p.glob("*.jsonl"))
        if not files:
            raise ConfigError(f"run directory {p} has no .jsonl files")
        p = files[0]
    first = _first_record(p)
    if first is None:
        raise TrajectoryFormatError(f"{p} is empty")
    if "steps" in first and "episode_id" in first:
        return "searchgym"
    if "input" in first and "output" in first:
        return "verl"
    if any(isinstance(first.get(k), str) for k in SEQUENCE_KEYS):
        return "search-r1"
    raise TrajectoryFormatError(
        f"cannot tell the format of {p} (keys: {sorted(first)}); pass --format, or --text-field "
        "(and --step-field, --question-field) for a generic jsonl")


def run_name(path: str | os.PathLike) -> str:
    """The run's name: the file stem (``run.jsonl`` -> ``run``) or the folder name."""
    p = Path(path)
    name = p.name if p.is_dir() else p.name.split(".")[0]
    return name or str(p)


def read_run(path: str | os.PathLike, fmt: str = "auto", *, text_field: str | None = None,
             step_field: str | None = None, question_field: str | None = None,
             reward_field: str | None = None, name: str | None = None) -> Run:
    """Read one run (file or folder) into a ``Run`` of ``Episode`` records."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown run format {fmt!r}; choose from {', '.join(FORMATS)}")
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"run {p} does not exist")
    if fmt == "auto":
        fmt = detect_format(p, text_field=text_field)
    if fmt == "searchgym":
        files = sorted(p.glob("*.jsonl")) if p.is_dir() else [p]
        eps = [e for f in files for e in read_searchgym(f)]
    elif fmt == "verl":
        eps = list(read_verl(p))
    elif fmt == "search-r1":
        eps = list(read_search_r1(p))
    else:
        if not text_field:
            raise ConfigError("format 'jsonl' needs --text-field (the field holding the query text)")
        eps = list(read_generic(p, text_field=text_field, step_field=step_field,
                                question_field=question_field, reward_field=reward_field))
    return Run(name=name or run_name(p), path=str(p), fmt=fmt, episodes=eps)
