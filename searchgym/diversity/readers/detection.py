"""Detection: which reader a file needs (searchgym's schema, a text log, or the generic reader for any other
JSON-like records), and its records (over the containers of ``containers``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from searchgym.diversity.readers import containers as C
from searchgym.diversity.readers import logs as L
from searchgym.diversity.readers.containers import BadRecord as _BadRecord
from searchgym.diversity.readers.containers import Source
from searchgym.diversity.readers.containers import decode_json as _decode
from searchgym.diversity.readers.records import (
    _REACT_ACTION_LINE,
    _STEP_FILE,
    DEFAULT_QUERY_TAGS,
    FORMATS,
    MESSAGE_KEYS,
    REACT_KEYS,
    RESPONSE_KEYS,
    SEQUENCE_KEYS,
    ReadStats,
    _lookup,
)
from searchgym.diversity.readers.transcripts import (
    HEADER_LINE,
    _Opts,
    _text_transcript,
    find_turns,
    transcripts_of,
)
from searchgym.diversity.readers.tree import best, parse_tree, readings
from searchgym.errors import ConfigError, TrajectoryFormatError


def _field_for(fmt: str, obj: dict, opts: _Opts) -> None:
    """For a forced format, pick its text field from a record: the field holding calls, else the first text."""
    if opts.field is not None:
        return
    text = _text_transcript(obj, opts, ())
    if text is not None:
        opts.field = text[1]
        return
    if fmt == "react":
        for k in REACT_KEYS + SEQUENCE_KEYS + RESPONSE_KEYS:
            kk, v = _lookup(obj, (k,))
            if isinstance(v, str):
                opts.field = kk
                return
    if fmt == "search-r1":
        for k in SEQUENCE_KEYS + RESPONSE_KEYS:
            kk, v = _lookup(obj, (k,))
            if isinstance(v, str):
                opts.field = kk
                return


def _looks_like_episode(obj: dict) -> bool:
    keys = {str(k).lower() for k in obj}
    known = {"steps", "input", "output", "traj", "trajectory", "prompt", "response", "sequences_str",
             "completion", "question", "problem"} | set(MESSAGE_KEYS) | set(RESPONSE_KEYS) | set(SEQUENCE_KEYS)
    return bool(keys & known) or find_turns(obj)[1] is not None


def _unwrap(obj: Any) -> list[Any] | None:
    """The records of a whole-file JSON value: an array, one episode object, or an object holding them."""
    if isinstance(obj, list):
        return obj
    if not isinstance(obj, dict):
        return None
    if _looks_like_episode(obj):
        return [obj]
    lists = [v for v in obj.values() if isinstance(v, list) and v and isinstance(v[0], dict)]
    if lists:
        return max(lists, key=len)
    vals = list(obj.values())
    if vals and all(isinstance(v, dict) for v in vals) and _looks_like_episode(vals[0]):
        return vals
    return None


def _skip_or_raise(exc: _BadRecord, where: str, stats: ReadStats, lenient: bool) -> None:
    """Count a bad record as skipped (``lenient``) or raise it as a ``TrajectoryFormatError`` naming ``where``."""
    if not lenient:
        raise TrajectoryFormatError(f"{where}: {exc}") from None
    stats.skipped_lines += 1
    stats.skipped_reasons[exc.reason] += 1
    if not stats.first_problem:
        stats.first_problem = f"{where}: {exc}"


def _records(src: Source, stats: ReadStats, lenient: bool, *,
             unwrap: bool = True) -> Iterator[tuple[int, str, Any]]:
    """(line or record number, 'line'|'record'|'row', value) of a ``Source`` of any record container.
    ``unwrap``: a one-line file whose object holds the list of episodes under some key yields those."""
    container = src.container
    if container == "empty":
        return  # an empty file holds no records
    shown = container + (f" ({src.compression})" if src.compression else "")
    stats.container = shown if stats.container in ("", shown) else "mixed"
    if container == "text":
        raise _NotJSON()
    path = src.path
    if container in ("csv", "tsv", "parquet"):
        for n, row in C.table_rows(src):
            yield n, "row", row
        return
    if container == "json-array":
        for i, r in C.json_array(src):
            yield i, "record", r
        return
    if container == "json-object":
        recs = _object_records(src, stats)
        if recs is not None:
            yield from ((i, "record", r) for i, r in enumerate(recs))
            return
    for lineno, raw in C.jsonl_lines(src):
        try:
            val = _decode(raw)
        except _BadRecord as exc:
            _skip_or_raise(exc, f"{path}, line {lineno}", stats, lenient)
            continue
        if unwrap and lineno == 1 and isinstance(val, dict) and not _looks_like_episode(val):
            recs = _unwrap(val)
            if recs is not None and len(recs) > 1:
                for i, r in enumerate(recs):
                    yield i, "record", r
                continue
        yield lineno, "line", val
    stats.cut_lines.extend(src.cut_lines)  # a cut last line (a dump still being written): skipped, with a warning


def _object_records(src: Source, stats: ReadStats) -> list[Any] | None:
    """The records of a whole-file JSON value; None when it does not decode (read as JSONL lines then)."""
    try:
        val = _decode(src.data.lstrip(b"\xef\xbb\xbf"))
    except _BadRecord:
        stats.container = "jsonl"  # report it as the JSONL line it most likely is
        return None
    recs = _unwrap(val)
    if recs is None:
        raise TrajectoryFormatError(f"{src.path}: a JSON {type(val).__name__} that holds no list of episode records")
    return recs


_NotJSON = C.NotJSON


def _files(p: Path) -> list[tuple[int | None, Path]]:
    if not p.is_dir():
        m = _STEP_FILE.match(p.name)
        return [(int(m.group(1)) if m else None, p)]
    files: list[tuple[int | None, Path]] = []
    for c in p.iterdir():
        m = _STEP_FILE.match(c.name)
        if m and c.is_file():
            files.append((int(m.group(1)), c))
    if files:
        return sorted(files, key=lambda x: (x[0], x[1].name))
    found = [c for c in sorted(p.iterdir()) if c.is_file() and not c.name.startswith(".")]

    def suffix(c: Path) -> str:
        parts = c.name.lower().split(".")
        return parts[-2] if parts[-1] == "gz" and len(parts) > 2 else parts[-1]

    # record files when there are any (a notes.txt beside them is not a run); else plain-text logs
    out = [(None, c) for c in found if suffix(c) in ("jsonl", "json", "csv", "tsv", "parquet")] or \
        [(None, c) for c in found if suffix(c) in ("txt", "log")]
    if not out:
        raise ConfigError(f"run directory {p} has no .jsonl, .json, .csv, .tsv, .parquet, .txt or .log files "
                          "(gzipped or not)")
    return out


def _tried_message(where: Path, keys: list[str] | None) -> str:
    seen = f" (keys: {', '.join(keys[:12])})" if keys else ""
    return (f"cannot tell the format of {where}{seen}: tried searchgym (steps + episode_id), chat (messages), "
            "verl (input + output), react (a trace with 'Action N: Search[...]'), search-r1 (a text field "
            "with <search>, <tool_call>, <|begin_of_query|> or <|begin_search_query|> calls) and react-log "
            "(plain text), and search calls by structure anywhere in a record; run `searchgym analyze FILE "
            "--explain` to see the record's fields and a suggested --map, then pass --map queries=EXPR (JMESPath), "
            "--format NAME (one of " + ", ".join(FORMATS[1:]) + "), --query-tags OPEN CLOSE for other tags, or "
            "--text-field FIELD for any JSON field")


def detect_format(path: str | os.PathLike[str], *, text_field: str | None = None,
                  query_tags: tuple[tuple[str, str], ...] | None = None) -> str:
    """The record format of a run: ``searchgym``, a text log's (``react-log``, ``train-log``), else the kind of
    reading that the generic reader keeps for the first records (``chat``, ``verl``, ``react``, ``search-r1``,
    ``tree``)."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"run {p} does not exist")
    if text_field:
        return "jsonl"
    opts = _Opts(query_tags=_tags(query_tags), text_field=None, step_field=None, question_field=None,
                 reward_field=None, success_threshold=1.0)
    src = C.load(_files(p)[0][1])
    fmt = _detect_file(src, opts)
    if fmt != "tree":
        return fmt
    stats = ReadStats(format="tree")
    for n, _, rec in _records(src, stats, lenient=True):  # the kind of reading that wins the first records
        if isinstance(rec, dict):
            parse_tree(rec, src.path, n, stats, opts, None)
        if any(opts.labels) or n >= 50:
            break
    return next((k for k in opts.labels if k), "tree")


def _detect_file(src: Source, opts: _Opts) -> str:
    f = src.path
    stats = ReadStats(format="auto")
    keys: list[str] | None = None
    seen: list[dict] = []
    try:
        for _, _, rec in _records(src, stats, lenient=True):
            if not isinstance(rec, dict):
                continue
            keys = keys or sorted(str(k) for k in rec)
            if "steps" in rec and "episode_id" in rec:
                return "searchgym"
            if transcripts_of(rec, opts):
                return "tree"  # the generic reader (a transcript by structure: chat turns, a text with calls…)
            seen.append(rec)
            if len(seen) >= 50:
                break
    except _NotJSON:
        return _detect_text(src)
    if keys is None:
        if stats.first_problem:
            raise TrajectoryFormatError(f"no episode records: {stats.first_problem}")
        raise TrajectoryFormatError(f"{f} holds no episode records (empty, or no line is a JSON object)")
    if _tree_finds(seen, opts):
        return "tree"  # no named format, but search calls by structure: the generic reader
    raise TrajectoryFormatError(_tried_message(f, keys))


def _tree_finds(recs: list[Any], opts: _Opts) -> bool:
    return any(isinstance(r, dict) and best(readings(r, opts)[0]) is not None for r in recs)


def _detect_text(src: Source) -> str:
    head = src.data[:1 << 20].decode("utf-8", errors="replace")
    if L.looks_like_training_log(head):
        return "train-log"
    if HEADER_LINE.search(head) and _REACT_ACTION_LINE.search(head):
        return "react-log"
    raise TrajectoryFormatError(_tried_message(src.path, None))


def _tags(query_tags: Any) -> tuple[tuple[str, str], ...]:
    if not query_tags:
        return DEFAULT_QUERY_TAGS
    if isinstance(query_tags, (list, tuple)) and len(query_tags) == 2 and all(isinstance(t, str) for t in query_tags):
        query_tags = [tuple(query_tags)]
    out = []
    for pair in query_tags:
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and all(isinstance(t, str) and t for t in pair)):
            raise ConfigError(f"query tags must be (OPEN, CLOSE) pairs of non-empty strings, got {pair!r}")
        if pair[0] == pair[1]:
            raise ConfigError(f"query tags need distinct OPEN and CLOSE, got {pair[0]!r} twice")
        out.append((pair[0], pair[1]))
    for d in DEFAULT_QUERY_TAGS:
        if d not in out:
            out.append(d)
    return tuple(out)
