"""Offline readers: turn a run on disk into ``Episode`` records, as rollouts occur in the wild.

How a JSON-like record is read (JSON, JSONL, CSV / TSV / Parquet rows): a record of searchgym's own schema
(``steps`` + ``episode_id``) by ``searchgym.trajectory``; any other by one generic reader (``tree``), which
weighs every reading of the record and keeps the one with the most executed queries (a whole transcript wins
ties): a whole transcript found by structure (``transcripts_of``), search calls found by structure anywhere in
the record (a search-like tool / action name beside its query, JSON-encoded ``arguments`` too), and any other
string leaf scanned by the grammars below. The format a run reports (``fmt``) is the kind of reading that won
its first records; the names of today are these kinds, and ``--format NAME`` forces one:

``searchgym``  searchgym trajectory JSONL (``searchgym.trajectory``, schema 1 and 2).
``verl``       a prompt / response pair: string ``input`` (prompt) and ``output`` (response), with ``score``,
               ``step`` and any extra keys (verl ``rollout_data_dir`` dumps; a folder of ``<step>.jsonl`` files).
``search-r1``  a text field holding calls (``sequences_str``, ``output``, ``Output``, ``gen_text_store``…: the
               first string field holding a search call); a full sequence is cut at the assistant header (or
               after the prompt's ``Question:`` line) so that the prompt's examples are not read.
``chat``       a list of role / content (or from / value) turns under any key (``messages``, ``conversations``…);
               assistant turns use any grammar below or OpenAI ``tool_calls``; tool and user turns after the
               first assistant turn are observations.
``react``      a text field whose calls are ReAct actions (``traj``, ``trajectory``…); text before its last
               ``Question:`` line (few-shot examples) is ignored.
``tree``       search calls found by structure, or a text nested deeper in the record.
``react-log``  a plain-text log of many ReAct episodes, each beginning ``Question: …``, possibly grouped in
               trial / attempt blocks (``Trial 1:``, ``----- attempt 2 -----``, ``BEGIN TRIAL 0``); the trial
               number is the episode's ``step`` and ``series``.
``jsonl``      any JSON records with a user-named ``text_field`` (a list = queries; a string is scanned for
               the grammars below; a single line without any call is one query).
``map``        ``field_map`` (``--map FIELD=EXPR``, JMESPath; ``fieldmap``): every mapped field from its expression.

Containers: JSONL, one JSON array of records, one JSON object (or an object holding the list of records under
some key), or plain text (``react-log``). A folder is read file by file.

Call grammars, all recognised in assistant text at once: Search-R1 ``<search>q</search>``; R1-Searcher
``<|begin_of_query|>q<|end_of_query|>``; Search-o1 ``<|begin_search_query|>q<|end_search_query|>``; any
``query_tags=(OPEN, CLOSE)``; Qwen/Hermes ``<tool_call>{"name": "search", "arguments": {"query": …}}</tool_call>``
(also ``query_list``; the first JSON object is decoded, so an extra ``}`` or trailing text is tolerated); ReAct
``Action N: Search[q]`` (``Lookup[…]`` is not a search; ``Finish[a]`` is the answer) and ``Action: search`` +
``Action Input: q``. Observations: ``<information>``, ``<tool_response>``, ``<|begin_of_documents|>``,
``<|begin_search_result|>``, ``<result>`` blocks, ReAct ``Observation N:``, chat tool/user turns.

What counts as a query: a well-formed call in assistant output before the final answer (``<answer>…</answer>``,
``Finish[…]``) and before the end of the response (an end-of-sequence token not followed by a new turn), whose
turn was answered by an observation. Calls of a last turn that no observation follows were never executed
(e.g. a looping response cut at the length limit); they are counted in ``read_stats.unexecuted`` - unless the
whole run holds no observation at all (a file of model outputs only), where every call is taken as issued.
A call whose observation is the tool's refusal (``Invalid action!``, ``Invalid request format``, ``Error: Tool
… not found``; ``outcomes``) did not run: it is counted in ``read_stats.rejected``, never as a query.
A Hermes tool call turn with fewer responses than calls executed only the first ones (verl's
``max_parallel_calls``). An unparseable call counts in ``Episode.malformed``, never as a query.

Every reader is linear in its input: one pass of a regular expression made of literal markers (and ReAct's
``Action N:`` with bounded white space), then ``str.find`` with forward-only caches; no non-greedy spans.
A malformed record (bad JSON, not UTF-8, not an object, wrong field types, nesting too deep) raises
``TrajectoryFormatError`` naming file and line; ``lenient=True`` skips and counts it in ``read_stats``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from searchgym.diversity.gcpause import with_gc_paused
from searchgym.diversity.readers import containers as C
from searchgym.diversity.readers import fieldmap
from searchgym.diversity.readers.assembly import (
    _adopt_pending,
    doc_titles,
    information_blocks,
)
from searchgym.diversity.readers.containers import BadRecord as _BadRecord
from searchgym.diversity.readers.containers import Source
from searchgym.diversity.readers.detection import (
    _detect_file,
    _field_for,
    _files,
    _NotJSON,
    _records,
    _skip_or_raise,
    _tags,
    detect_format,
)
from searchgym.diversity.readers.fields import parse_question
from searchgym.diversity.readers.grammars import (
    episode_from_response,
    scan_text,
    search_spans,
)
from searchgym.diversity.readers.mapped import parse_mapped, parsed_records
from searchgym.diversity.readers.records import (
    ANSWER,
    ANSWER_KEYS,
    DEFAULT_QUERY_TAGS,
    DEFAULT_SEARCH_TOOLS,
    EOS_TOKENS,
    EPISODE_ID_KEYS,
    FORMATS,
    MAX_TITLE,
    MESSAGE_KEYS,
    OBS_TAGS,
    QUESTION_ID_KEYS,
    QUESTION_KEYS,
    REACT_KEYS,
    RECORD_FORMATS,
    RESPONSE_KEYS,
    REWARD_KEYS,
    SEQUENCE_KEYS,
    STEP_KEYS,
    TOOL_CALL,
    TURN_STARTS,
    Episode,
    ReadStats,
    Run,
    tool_key,
)
from searchgym.diversity.readers.textlogs import (
    _react_log_records,
    _train_log_records,
)
from searchgym.diversity.readers.transcripts import (
    _PARSERS,
    ParsedRecord,
    _Opts,
    find_turns,
    split_response,
)
from searchgym.diversity.readers.tree import parse_tree
from searchgym.errors import ConfigError, TrajectoryFormatError


def run_name(path: str | os.PathLike[str]) -> str:
    """The run's name: the file stem (``run.jsonl`` -> ``run``) or the folder name."""
    p = Path(path)
    name = p.name if p.is_dir() else p.name.split(".")[0]
    return name or str(p)


@with_gc_paused
def read_run(path: str | os.PathLike[str], fmt: str = "auto", *, query_tags: Any = None, lenient: bool = False,
             label: str | None = None, text_field: str | None = None, step_field: str | None = None,
             question_field: str | None = None, reward_field: str | None = None, name: str | None = None,
             success_threshold: float = 1.0, search_tools: tuple[str, ...] | list[str] = (),
             field_map: dict[str, str] | None = None, explain: list[Any] | None = None) -> Run:
    """Read one run (file or folder) into a ``Run`` of ``Episode`` records with its ``read_stats``.

    ``query_tags``: an extra (OPEN, CLOSE) tag pair (or a list of pairs) of a custom search grammar.
    ``lenient``: skip malformed records (counted in ``read_stats.skipped_lines`` / ``skipped_reasons``)
    instead of raising ``TrajectoryFormatError``. ``search_tools``: ReAct / function tool names that are
    searches, besides ``DEFAULT_SEARCH_TOOLS``. ``field_map``: FIELD -> JMESPath expression (``--map``; see
    ``fieldmap``). ``explain``: a list that receives what the generic reader found in the first records.
    """
    search_tools = tuple(search_tools)
    compiled = fieldmap.compile_map(field_map) if field_map else None
    fmt = _check_format(fmt, compiled, text_field)
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"run {p} does not exist")
    tags = _tags(query_tags)
    stats = ReadStats(format=fmt)
    parsed: list[ParsedRecord] = []
    formats: list[str] = []
    for default_step, f in _files(p):
        opts = _Opts(query_tags=tags, text_field=text_field, step_field=step_field, question_field=question_field,
                     reward_field=reward_field, success_threshold=success_threshold, search_tools=search_tools)
        opts.fieldmap, opts.explain = compiled, explain
        formats.append(_read_file(f, fmt, opts, stats, lenient, default_step, parsed))
    stats.format = formats[0] if len(set(formats)) == 1 else "+".join(sorted(set(formats)))
    episodes = _settle(parsed, stats)
    if not episodes:
        why = f" ({stats.skipped_lines} malformed lines skipped)" if stats.skipped_lines else ""
        raise TrajectoryFormatError(f"{p} holds no episodes{why}")
    stats.episodes = len(episodes)
    stats.queries = sum(len(e.queries) for e in episodes)
    stats.malformed = sum(e.malformed for e in episodes)
    nm = label or name or run_name(p)
    return Run(name=nm, path=str(p), fmt=stats.format, episodes=episodes, label=nm, read_stats=stats)


def _check_format(fmt: str, compiled: dict[str, Any] | None, text_field: str | None) -> str:
    if compiled is not None:
        if fmt not in ("auto", "map"):
            raise ConfigError(f"--map reads the records itself: leave out --format {fmt}")
        return "map"
    if fmt not in FORMATS:
        raise ConfigError(f"unknown run format {fmt!r}; choose from {', '.join(FORMATS)}")
    if fmt == "jsonl" and not text_field:
        raise ConfigError("format 'jsonl' needs --text-field (the field holding the query text)")
    return "jsonl" if text_field and fmt == "auto" else fmt


def _read_file(f: Path, fmt: str, opts: _Opts, stats: ReadStats, lenient: bool, default_step: int | None,
               parsed: list[ParsedRecord]) -> str:
    """Append the parsed episodes of one file to ``parsed``; return the format it was read in."""
    try:
        src = C.load(f)
    except OSError as exc:
        raise ConfigError(f"cannot read {f}: {exc.strerror or exc}") from None
    ffmt = fmt if fmt != "auto" else _detect_file(src, opts)
    stats.files += 1
    if ffmt == "train-log":
        stats.container = "text (log)"
        parsed.extend(_train_log_records(src, opts, stats, lenient))
    elif ffmt == "react-log":
        stats.container = "text"
        parsed.extend(_react_log_records(src, query_tags=opts.query_tags, stats=stats, lenient=lenient,
                                         search_tools=tuple(opts.search_tools - DEFAULT_SEARCH_TOOLS)))
    else:
        parsed.extend(_read_records(src, ffmt, opts, stats, lenient, default_step))
        if ffmt == "tree":  # named by the first record's winning reading (chat, verl, react, search-r1, tree)
            ffmt = next((k for k in opts.labels if k), "tree")
    return ffmt


def _settle(parsed: list[ParsedRecord], stats: ReadStats) -> list[Episode]:
    """The episodes, with calls that no observation answered adopted (a run without any observation) or
    counted as never executed; the notes that say so."""
    n_obs = sum(n for _, _, n in parsed)
    stats.observations = n_obs
    episodes = []
    for ep, pending, _ in parsed:
        if pending:
            if n_obs == 0:
                _adopt_pending(ep, pending)
                for _, _, g in pending:
                    stats.grammars[g] += 1
            else:
                stats.unexecuted += len(pending)
        episodes.append(ep)
    if n_obs == 0 and any(pending for _, pending, _ in parsed):
        stats.notes.append("the run holds no observation at all: every well-formed call was taken as issued")
    if stats.unexecuted:
        stats.notes.append(f"{stats.unexecuted} well-formed calls were never executed (no observation followed: "
                           "after the response ended or past the turn limit) and are not counted as queries")
    if stats.rejected:
        stats.notes.append(f"{stats.rejected} calls were refused by the tool (an 'Invalid action!', 'Invalid request "
                           "format' or 'not found' reply) and are not counted as queries")
    return episodes


def _read_records(src: Source, fmt: str, opts: _Opts, stats: ReadStats, lenient: bool,
                  default_step: int | None) -> Iterator[ParsedRecord]:
    f = src.path
    parser = _PARSERS.get(fmt) or {"tree": parse_tree, "map": parse_mapped}.get(fmt)
    if parser is None:
        raise ConfigError(f"format {fmt!r} cannot read JSON records; choose from {', '.join(RECORD_FORMATS)}")
    fm = opts.fieldmap
    try:
        records = _records(src, stats, lenient, unwrap=not opts.text_field and not (fm and "episode" in fm))
        for n, kind, rec in (parsed_records(records, fm) if fm else records):
            try:
                if not isinstance(rec, dict) and not (fm and isinstance(rec, list)):
                    raise _BadRecord("not a JSON object", f"expected a JSON object, got {type(rec).__name__}")
                if opts.field is None and fmt in ("react", "search-r1"):
                    _field_for(fmt, rec, opts)
                try:
                    yield parser(rec, f, n, stats, opts, default_step)
                except TrajectoryFormatError as exc:
                    raise _BadRecord("wrong field type or missing field", str(exc)) from None
                except RecursionError:
                    raise _BadRecord("nested too deeply", "JSON nested too deeply") from None
                except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
                    raise _BadRecord("unexpected structure", f"unexpected structure ({exc})") from None
            except _BadRecord as exc:
                _skip_or_raise(exc, f"{f}, {kind} {n}", stats, lenient)
                continue
    except _NotJSON:
        raise TrajectoryFormatError(f"{f} is not JSON; format {fmt!r} reads JSON records (plain-text ReAct logs: "
                                    "--format react-log)") from None


def _reader(fmt: str) -> Callable[..., Iterator[Episode]]:
    def read(path: str | os.PathLike[str], **kw: Any) -> Iterator[Episode]:
        yield from read_run(path, fmt, **kw).episodes
    read.__name__ = f"read_{fmt.replace('-', '_')}"
    read.__doc__ = f"Episodes of a run in the {fmt!r} format (keywords as ``read_run``)."
    return read


read_searchgym = _reader("searchgym")


read_verl = _reader("verl")


read_search_r1 = _reader("search-r1")


read_chat = _reader("chat")


read_react = _reader("react")


read_react_log = _reader("react-log")


read_train_log = _reader("train-log")


def read_generic(path: str | os.PathLike[str], *, text_field: str, **kw: Any) -> Iterator[Episode]:
    """Episodes of any JSON records whose ``text_field`` holds the queries (a list) or an agent's text."""
    yield from read_run(path, "jsonl", text_field=text_field, **kw).episodes


__all__ = [
    "ANSWER",
    "ANSWER_KEYS",
    "DEFAULT_QUERY_TAGS",
    "DEFAULT_SEARCH_TOOLS",
    "EOS_TOKENS",
    "EPISODE_ID_KEYS",
    "FORMATS",
    "MAX_TITLE",
    "MESSAGE_KEYS",
    "OBS_TAGS",
    "QUESTION_ID_KEYS",
    "QUESTION_KEYS",
    "REACT_KEYS",
    "RECORD_FORMATS",
    "RESPONSE_KEYS",
    "REWARD_KEYS",
    "SEQUENCE_KEYS",
    "STEP_KEYS",
    "TOOL_CALL",
    "TURN_STARTS",
    "Episode",
    "ReadStats",
    "Run",
    "detect_format",
    "doc_titles",
    "episode_from_response",
    "find_turns",
    "information_blocks",
    "parse_question",
    "read_chat",
    "read_generic",
    "read_react",
    "read_react_log",
    "read_run",
    "read_search_r1",
    "read_searchgym",
    "read_train_log",
    "read_verl",
    "run_name",
    "scan_text",
    "search_spans",
    "split_response",
    "tool_key",
]
