"""Offline readers: turn a run on disk into ``Episode`` records, as rollouts occur in the wild.

Record formats (``fmt``; ``auto`` detects them, ``--format NAME`` forces one):

``searchgym``  searchgym trajectory JSONL (``searchgym.trajectory``, schema 1 and 2).
``verl``       verl ``rollout_data_dir`` / ``validation_data_dir`` dumps: ``input`` (prompt), ``output``
               (response), ``score``, ``step`` and any extra keys; a folder of ``<step>.jsonl`` files.
``search-r1``  a record with one decoded text (``sequences_str``, ``output``, ``Output``, ``gen_text_store``…:
               the first string field holding a search call); a full sequence is cut at the assistant header
               (or after the prompt's ``Question:`` line) so that the prompt's examples are not read.
``chat``       a ``messages`` list (OpenAI fine-tuning format; ``conversations`` too); assistant turns use any
               grammar below or OpenAI ``tool_calls``; tool and user turns after the first assistant turn are
               observations.
``react``      a record whose text field (``traj``, ``trajectory``…) is a ReAct trace; text before its last
               ``Question:`` line (few-shot examples) is ignored.
``react-log``  a plain-text log of many ReAct episodes, each beginning ``Question: …``, possibly grouped in
               trial / attempt blocks (``Trial 1:``, ``----- attempt 2 -----``, ``BEGIN TRIAL 0``); the trial
               number is the episode's ``step`` and ``series``.
``jsonl``      any JSON records with a user-named ``text_field`` (a list = queries; a string is scanned for
               the grammars below; a single line without any call is one query).

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
A Hermes tool call turn with fewer responses than calls executed only the first ones (verl's
``max_parallel_calls``). An unparseable call counts in ``Episode.malformed``, never as a query.

Every reader is linear in its input: one pass of a regular expression made of literal markers (and ReAct's
``Action N:`` with bounded white space), then ``str.find`` with forward-only caches; no non-greedy spans.
A malformed record (bad JSON, not UTF-8, not an object, wrong field types, nesting too deep) raises
``TrajectoryFormatError`` naming file and line; ``lenient=True`` skips and counts it in ``read_stats``.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchgym.diversity.gcpause import with_gc_paused
from searchgym.errors import ConfigError, TrajectoryFormatError

FORMATS = ("auto", "searchgym", "verl", "search-r1", "chat", "react", "react-log", "jsonl")
RECORD_FORMATS = ("searchgym", "verl", "search-r1", "chat", "react", "jsonl")

# text fields that hold a whole decoded sequence (prompt + response) vs. only the model's response
SEQUENCE_KEYS = ("sequences_str", "sequence", "full_text", "text", "full_output", "trajectory_text")
RESPONSE_KEYS = ("output", "response", "completion", "generation", "gen_text_store", "generated_text",
                 "model_output", "pred_text", "responses", "outputs")
REACT_KEYS = ("traj", "trajectory", "scratchpad", "react", "react_trace", "log")
QUESTION_KEYS = ("question", "problem", "question_text", "original_question", "query", "user_question")
ANSWER_KEYS = ("prediction", "pred", "pred_answer", "predicted_answer", "final_answer", "model_answer",
               "pred_ans")
REWARD_KEYS = ("reward", "score", "acc", "em", "correct", "is_correct")
STEP_KEYS = ("step", "global_step", "policy_step", "iteration", "epoch")
EPISODE_ID_KEYS = ("episode_id", "id", "uid", "request_id", "traj_id", "sample_id")
QUESTION_ID_KEYS = ("question_id", "qid", "question_idx")
_PROMPT_KEYS = frozenset({"prompt", "input", "instruction", "system", "system_prompt", "question", "problem",
                          "query", "context", "template", "prompt_text"})
MESSAGE_KEYS = ("messages", "conversations", "conversation", "dialog", "chat")

DEFAULT_QUERY_TAGS: tuple[tuple[str, str], ...] = (
    ("<search>", "</search>"), ("<|begin_of_query|>", "<|end_of_query|>"),
    ("<|begin_search_query|>", "<|end_search_query|>"))
OBS_TAGS: tuple[tuple[str, str], ...] = (
    ("<information>", "</information>"), ("<tool_response>", "</tool_response>"),
    ("<|begin_of_documents|>", "<|end_of_documents|>"), ("<|begin_search_result|>", "<|end_search_result|>"),
    ("<result>", "</result>"))
TOOL_CALL = ("<tool_call>", "</tool_call>")
ANSWER = ("<answer>", "</answer>")
EOS_TOKENS = ("<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "<|im_end|>", "</s>")
TURN_STARTS = ("<|im_start|>", "<|start_header_id|>")
_SEARCH_ARG_KEYS = ("query", "queries", "query_list", "q", "search_query", "search_queries", "keywords",
                    "keyword", "entity", "question")
_ANSWER_TOOLS = ("finish", "answer", "submit_answer", "final_answer", "submit")

MAX_TITLE = 400
_DECODER = json.JSONDecoder()
_STEP_FILE = re.compile(r"^(\d+)\.jsonl$")
# ReAct keywords count only at a line start (a retrieved text may say "action:")
_REACT_RE = (r"(?<![^\n])[ \t]*(?:(?P<act>[Aa]ction)|(?P<obs>[Oo]bservation)|(?P<th>[Tt]hought))"
             r"(?:[ \t]*\d+)?[ \t]*:")
_WORD = re.compile(r"[A-Za-z_]\w*")
_DOC_TITLE = re.compile(r"Doc \d+[ \t]*\([ \t]*Title:[ \t]*")
_JSON_TITLE = re.compile(r'"title"[ \t]*:[ \t]*"')
_ASSISTANT = re.compile(r"<\|im_start\|>assistant|<\|start_header_id\|>assistant<\|end_header_id\|>|\[/INST\]")
_QUESTION_LINE = re.compile(r"[ \t]*Question(?:[ \t]*\d+)?[ \t]*:[ \t]*")
_TRIAL = re.compile(r"\b(trial|attempt|round|iteration)\b[ \t#:=\-]*(\d+)", re.IGNORECASE)
_QWORD = re.compile(r"question[ \t]*:", re.IGNORECASE)
_REACT_ACTION_LINE = re.compile(r"(?<![^\n])[ \t]*Action(?:[ \t]*\d+)?[ \t]*:[ \t]*[A-Za-z_]+\[")


# ---------------------------------------------------------------------------------------------------
# records


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
class ReadStats:
    """What a reader read: shown in the report so that a wrong reading can be seen."""

    format: str
    episodes: int = 0
    queries: int = 0
    malformed: int = 0                 # unparseable search calls
    skipped_lines: int = 0             # records skipped with ``lenient``
    skipped_reasons: Counter[str] = field(default_factory=Counter)
    unexecuted: int = 0                # well-formed calls never answered by an observation (not queries)
    other_calls: int = 0               # tool calls / actions that are not searches (Lookup, browse, …)
    observations: int = 0
    container: str = ""                # jsonl | json-array | json-object | text | mixed
    files: int = 0
    grammars: Counter[str] = field(default_factory=Counter)  # call grammar -> queries read with it
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"format": self.format, "container": self.container, "files": self.files,
                "episodes": self.episodes, "queries": self.queries, "malformed": self.malformed,
                "unexecuted": self.unexecuted, "other_calls": self.other_calls,
                "observations": self.observations, "skipped_lines": self.skipped_lines,
                "skipped_reasons": dict(self.skipped_reasons), "grammars": dict(self.grammars),
                "notes": list(self.notes)}


@dataclass
class Run:
    name: str
    path: str
    fmt: str
    episodes: list[Episode]
    label: str = ""
    read_stats: ReadStats | None = None

    def __post_init__(self) -> None:
        if not self.label:
            self.label = self.name
        if self.read_stats is None:
            self.read_stats = ReadStats(format=self.fmt, episodes=len(self.episodes),
                                        queries=sum(len(e.queries) for e in self.episodes),
                                        malformed=sum(e.malformed for e in self.episodes))

    @property
    def has_steps(self) -> bool:
        return any(e.step is not None for e in self.episodes)


# ---------------------------------------------------------------------------------------------------
# linear-time scanning


class _Next:
    """Next occurrence of ``needle`` at or after a position, for positions that only move forward:
    every character is scanned at most once over all calls."""

    __slots__ = ("needle", "pos", "text")

    def __init__(self, text: str, needle: str):
        self.text, self.needle, self.pos = text, needle, -2  # -2: not searched yet; -1: none left

    def at(self, start: int) -> int:
        if self.pos == -1 or (self.pos >= start):
            return self.pos
        self.pos = self.text.find(self.needle, start)
        return self.pos


_SCANNERS: dict[tuple, tuple[re.Pattern, re.Pattern, dict[str, tuple[str, Any]]]] = {}
_REACT_HINTS = ("ction", "bservation", "hought")


def _scanner(query_tags: tuple[tuple[str, str], ...]) -> tuple[re.Pattern, re.Pattern, dict[str, tuple[str, Any]]]:
    """Two regexes of literal markers (longest first), the second with ReAct's keywords too, and
    marker -> (kind, data). Markers that share a first character are grouped under it, so that the regex
    engine skips to that character (most texts are scanned at C speed)."""
    key = query_tags
    if key in _SCANNERS:
        return _SCANNERS[key]
    kinds: dict[str, tuple[str, Any]] = {}
    for o, c in query_tags:
        kinds[o] = ("qopen", c)
        kinds.setdefault(c, ("close", None))
    for o, c in OBS_TAGS:
        kinds.setdefault(o, ("oopen", c))
        kinds.setdefault(c, ("close", None))
    kinds[TOOL_CALL[0]] = ("topen", TOOL_CALL[1])
    kinds[TOOL_CALL[1]] = ("close", None)
    kinds[ANSWER[0]] = ("aopen", ANSWER[1])
    kinds[ANSWER[1]] = ("close", None)
    for t in EOS_TOKENS:
        kinds.setdefault(t, ("eos", None))
    by_first: dict[str, list[str]] = {}
    for m in sorted(kinds, key=len, reverse=True):
        by_first.setdefault(m[0], []).append(m)
    lit = "|".join(re.escape(c) + "(?:" + "|".join(re.escape(m[1:]) for m in ms) + ")"
                   for c, ms in by_first.items())
    pats = (re.compile(lit), re.compile(lit + "|" + _REACT_RE))
    _SCANNERS[key] = (pats[0], pats[1], kinds)
    return pats[0], pats[1], kinds


@dataclass
class _Call:
    grammar: str
    queries: list[str] | None      # None: malformed
    call_id: str | None = None
    other: bool = False            # a non-search tool/action
    issued: bool = False           # known to be issued without an observation (a user-named query field)


@dataclass
class _Turn:
    calls: list[_Call] = field(default_factory=list)
    obs: list[tuple[str, str | None]] = field(default_factory=list)


class _Assembler:
    """Collects calls, observations and the answer of one episode, turn by turn."""

    def __init__(self) -> None:
        self.turns: list[_Turn] = [_Turn()]
        self.answer: str | None = None
        self.done = False
        self.n_obs = 0

    def call(self, c: _Call) -> None:
        if self.done:
            return
        if self.turns[-1].obs:
            self.turns.append(_Turn())
        self.turns[-1].calls.append(c)

    def obs(self, text: str, call_id: str | None = None) -> None:
        if self.done:
            return
        self.n_obs += 1
        self.turns[-1].obs.append((_obs_text(text), call_id))

    def finish(self, answer: str | None) -> None:
        if not self.done:
            self.answer = answer
            self.done = True

    def build(self, stats: ReadStats, **kw: Any) -> tuple[Episode, list[tuple[str, int, str]]]:
        """The episode, and the calls never executed as (query, turn, grammar) for the no-observation case."""
        ep = Episode(queries=[], answer=self.answer, **kw)
        pending: list[tuple[str, int, str]] = []
        for ti, turn in enumerate(self.turns):
            good = []
            for c in turn.calls:
                if c.other:
                    stats.other_calls += 1
                elif c.queries is None:
                    ep.malformed += 1
                else:
                    good.append(c)
            if not good:
                continue
            if not turn.obs:
                for c in good:
                    if c.issued:
                        for q in c.queries:
                            ep.queries.append(q)
                            ep.turns.append(ti)
                            ep.evidence.append([])
                            ep.titles.append([])
                            stats.grammars[c.grammar] += 1
                    else:
                        pending.extend((q, ti, c.grammar) for q in c.queries)
                continue
            ids = {i for _, i in turn.obs if i is not None}
            run = [c for c in good if c.call_id in ids] if ids else []
            if run:  # results matched to their calls by id (OpenAI tool_call_id)
                by_id = {i: t for t, i in turn.obs if i is not None}
                blocks = [[by_id[c.call_id]] for c in run]
            else:
                if all(c.grammar == "tool_call" for c in good) and len(turn.obs) < len(good):
                    run = good[:len(turn.obs)]  # verl executes only the first max_parallel_calls
                else:
                    run = good
                texts = [t for t, _ in turn.obs]
                if len(texts) >= len(run):
                    blocks = [[t] for t in texts[:len(run)]]
                    blocks[-1].extend(texts[len(run):])
                elif len(texts) == 1:
                    parts = _split_block(texts[0], len(run))
                    blocks = [[p] for p in parts] if parts else [texts[:] for _ in run]
                else:
                    blocks = [[t] for t in texts] + [[] for _ in range(len(run) - len(texts))]
            ran = {id(c) for c in run}
            stats.unexecuted += sum(len(c.queries) for c in good if id(c) not in ran)
            for c, blk in zip(run, blocks):
                per_q: list[list[str]]
                if len(c.queries) > 1 and len(blk) == 1 and (parts := _split_block(blk[0], len(c.queries))):
                    per_q = [[p] for p in parts]
                else:
                    per_q = [blk for _ in c.queries]
                for q, ev in zip(c.queries, per_q):
                    ep.queries.append(q)
                    ep.turns.append(ti)
                    ep.evidence.append(list(ev))
                    ep.titles.append([t for b in ev for t in doc_titles(b)])
                    stats.grammars[c.grammar] += 1
        return ep, pending


def _split_block(text: str, n: int) -> list[str] | None:
    """verl's search tool joins the results of a query list with ``\\n---\\n``."""
    parts = text.split("\n---\n")
    return parts if len(parts) == n and n > 1 else None


def _obs_text(block: str) -> str:
    """The text of an observation: a JSON ``{"result": …}`` tool response is unwrapped."""
    s = block.strip()
    for o, c in OBS_TAGS:
        if s.startswith(o):
            s = s[len(o):]
            s = (s.removesuffix(c)).strip()
            break
    if s[:1] == "{" and '"result"' in s[:20]:
        try:
            obj = json.loads(s)
        except (ValueError, RecursionError):
            return s
        if isinstance(obj, dict) and isinstance(obj.get("result"), str):
            return obj["result"].strip()
    return s


def _tool_call_queries(body: str) -> _Call:
    """A Hermes/Qwen ``<tool_call>`` body: decode its first JSON object (tolerating trailing text such as an
    extra ``}``); a search tool's query (or ``query_list``) are its queries."""
    s = body.strip()
    i = s.find("{")
    if i < 0:
        return _Call("tool_call", None)
    try:
        obj, _ = _DECODER.raw_decode(s, i)
    except (ValueError, RecursionError):
        return _Call("tool_call", None)
    return _function_call(obj.get("name") if isinstance(obj, dict) else None,
                          (obj.get("arguments", obj.get("parameters")) if isinstance(obj, dict) else None),
                          "tool_call", None)


def _function_call(name: Any, args: Any, grammar: str, call_id: str | None) -> _Call:
    if isinstance(args, str):  # OpenAI: arguments is a JSON string
        try:
            args, _ = _DECODER.raw_decode(args.strip() or "null")
        except (ValueError, RecursionError):
            return _Call(grammar, None, call_id)
    lname = name.lower() if isinstance(name, str) else ""
    if any(a == lname for a in _ANSWER_TOOLS):
        return _Call(grammar, [], call_id, other=True)
    if not isinstance(args, dict):
        return _Call(grammar, None, call_id)
    key = next((k for k in _SEARCH_ARG_KEYS if k in args), None)
    searchy = (not lname) or "search" in lname or "retriev" in lname or "query" in lname
    if key is None:
        return _Call(grammar, None if searchy else [], call_id, other=not searchy)
    if not searchy:
        return _Call(grammar, [], call_id, other=True)
    v = args[key]
    qs = [v] if isinstance(v, str) else v
    if not isinstance(qs, list) or not qs or not all(isinstance(q, str) and q.strip() for q in qs):
        return _Call(grammar, None, call_id)
    return _Call(grammar, [q.strip() for q in qs], call_id)


def _answer_of(lname: str, args: Any) -> str | None:
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except (ValueError, RecursionError):
            return args
    if isinstance(args, dict):
        for v in args.values():
            if isinstance(v, str):
                return v.strip()
    return None


def scan_text(text: str, asm: _Assembler, *, query_tags: tuple[tuple[str, str], ...] = DEFAULT_QUERY_TAGS,
              grammar_names: dict[str, str] | None = None) -> None:
    """Feed the calls, observations and answer of an assistant text into ``asm`` (one linear pass)."""
    if not text or asm.done:
        return
    lit_pat, full_pat, kinds = _scanner(query_tags)
    pat = full_pat if any(h in text for h in _REACT_HINTS) else lit_pat
    toks = [(m.start(), m.end(), m.group(), m.lastgroup) for m in pat.finditer(text)]
    nl = _Next(text, "\n")
    rb = _Next(text, "]")
    n = len(toks)
    i = 0
    react_obs_start = -1
    names = grammar_names or {}
    next_tok: dict[str, int] = {}

    def end_react_obs(at: int) -> None:
        nonlocal react_obs_start
        if react_obs_start >= 0:
            asm.obs(text[react_obs_start:at].strip())
            react_obs_start = -1

    while i < n and not asm.done:
        s, e, lit, grp = toks[i]
        if grp is not None:  # ReAct keyword
            end_react_obs(s)
            if grp == "obs":
                react_obs_start = e
            elif grp == "act":
                i = _react_action(text, e, toks, i, asm, nl, rb)
                continue
            i += 1
            continue
        kind, close = kinds[lit]
        if kind in ("qopen", "topen", "aopen"):
            # the content runs to the very next marker, which must be this tag's close
            if i + 1 < n and toks[i + 1][2] == close:
                body = text[e:toks[i + 1][0]]
                end_react_obs(s)
                if kind == "qopen":
                    q = body.strip()
                    asm.call(_Call(names.get(lit, lit), [q] if q else None))
                elif kind == "topen":
                    asm.call(_tool_call_queries(body))
                else:
                    asm.finish(body.strip())
                i += 2
                continue
            if kind == "aopen":
                i += 1
                continue
            end_react_obs(s)
            asm.call(_Call(names.get(lit, "tool_call" if kind == "topen" else lit), None))  # unclosed
            i += 1
            continue
        if kind == "oopen":
            end_react_obs(s)
            # index of the next token that is this close tag; cached per tag, moves only forward
            j = next_tok.get(close, i + 1)
            if 0 <= j <= i:
                j = i + 1
            if j >= 0:
                while j < n and toks[j][2] != close:
                    j += 1
                next_tok[close] = j if j < n else -1
            if 0 <= j < n:
                asm.obs(text[e:toks[j][0]])
                i = j + 1
                continue
            # unclosed (truncated) observation: up to the next call or observation marker
            j = i + 1
            while j < n and toks[j][3] is None and kinds[toks[j][2]][0] not in ("qopen", "topen", "oopen"):
                j += 1
            asm.obs(text[e:toks[j][0] if j < n else len(text)])
            i = j
            continue
        if kind == "eos":
            k = e
            while k < len(text) and text[k] in " \t\r\n":
                k += 1
            if not text.startswith(TURN_STARTS, k) and k < len(text) and not _is_obs_open(text, k):
                end_react_obs(s)
                asm.done = True  # the response ended here; anything later was never generated for real
                break
        i += 1
    if react_obs_start >= 0 and not asm.done:
        asm.obs(text[react_obs_start:].strip())


def _is_obs_open(text: str, k: int) -> bool:
    return any(text.startswith(o, k) for o, _ in OBS_TAGS)


def _react_action(text: str, e: int, toks: list, i: int, asm: _Assembler, nl: _Next, rb: _Next) -> int:
    """Parse the action after ``Action N:`` at ``e``; return the index of the next token to read."""
    line_end = nl.at(e)
    if line_end < 0:
        line_end = len(text)
    k = e
    while k < line_end and text[k] in " \t":
        k += 1
    m = _WORD.match(text, k, line_end)
    nxt = i + 1
    if m is None:
        return nxt
    verb = m.group().lower()
    k = m.end()
    if k < line_end and text[k] == "[":
        close = rb.at(k)
        if close < 0 or close > line_end:
            asm.call(_Call("react", None))
            return nxt
        # the argument runs to the last "]" of the line ("Search[A [b] c]")
        last = close
        while True:
            c2 = rb.at(last + 1)
            if c2 < 0 or c2 > line_end:
                break
            last = c2
        arg = text[k + 1:last].strip()
        if verb == "search":
            asm.call(_Call("react", [arg] if arg else None))
        elif verb == "finish":
            asm.finish(arg)
        elif verb == "lookup":
            asm.call(_Call("react", [], other=True))
        else:
            asm.call(_Call("react", None))
        while nxt < len(toks) and toks[nxt][0] < last:
            nxt += 1
        return nxt
    # LangChain style: "Action: search" then "Action Input: q"
    rest = text[k:line_end].strip()
    if verb in ("search", "finish") and not rest:
        ai = text.startswith("Action Input:", line_end + 1)
        if ai:
            a_end = nl.at(line_end + 1)
            arg = text[line_end + 1 + len("Action Input:"):a_end if a_end >= 0 else len(text)].strip()
            if verb == "finish":
                asm.finish(arg)
            else:
                asm.call(_Call("react", [arg.strip('"')] if arg else None))
            return nxt
        asm.call(_Call("react", None))
    elif verb == "search":
        asm.call(_Call("react", None))  # "Action: search Colorado": no brackets
    return nxt


# ---------------------------------------------------------------------------------------------------
# text helpers (public; all linear)


def search_spans(text: str) -> list[str]:
    """The stripped contents of the ``<search>…</search>`` blocks of a text, in order (empty ones dropped)."""
    return _tag_spans(text or "", "<search>", "</search>")


def _tag_spans(text: str, open_: str, close: str) -> list[str]:
    out = []
    pos = 0
    while True:
        a = text.find(open_, pos)
        if a < 0:
            break
        b = text.find(close, a + len(open_))
        if b < 0:
            break
        nxt = text.find(open_, a + len(open_), b)
        if nxt >= 0:  # an unclosed open before this close: restart at the inner open
            pos = nxt
            continue
        q = text[a + len(open_):b].strip()
        if q:
            out.append(q)
        pos = b + len(close)
    return out


def information_blocks(text: str) -> list[str]:
    out = []
    pos = 0
    text = text or ""
    while True:
        a = text.find("<information>", pos)
        if a < 0:
            return out
        b = text.find("</information>", a)
        out.append(text[a + 13:b if b >= 0 else len(text)].strip())
        if b < 0:
            return out
        pos = b + 14


def doc_titles(block: str) -> list[str]:
    """Titles of an observation: Search-R1 ``Doc 1(Title: "X") text``, verl ``Doc 1 (Title: X)\\ntext``,
    and JSON ``"title": "X"`` fields."""
    out: list[str] = []
    if not block:
        return out
    if "Title:" in block:
        starts = [m.end() for m in _DOC_TITLE.finditer(block)]
        size = len(block)
        for idx, s in enumerate(starts):
            # a title ends at ")" + white space, within its line, at most MAX_TITLE characters long
            limit = min(size, s + MAX_TITLE, starts[idx + 1] if idx + 1 < len(starts) else size)
            nl = block.find("\n", s, limit)
            if nl >= 0:
                limit = nl
            end = limit
            k = block.find(")", s, limit)
            while k >= 0:
                if k + 1 >= limit or block[k + 1] in " \t\r\n":
                    end = k
                    break
                k = block.find(")", k + 1, limit)
            t = block[s:end].strip().strip('"').strip()
            if t:
                out.append(t)
    if not out and '"title"' in block:
        for m in _JSON_TITLE.finditer(block):
            k = block.find('"', m.end())
            if k > m.end():
                out.append(block[m.end():k])
    return out


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


def split_response(sequence: str) -> tuple[str, str]:
    """(prompt, response) of a full decoded sequence, split at the first assistant header if any."""
    m = _ASSISTANT.search(sequence)
    if not m:
        return "", sequence
    return sequence[:m.start()], sequence[m.end():]


def episode_from_response(response: str, *, query_tags: tuple[tuple[str, str], ...] = DEFAULT_QUERY_TAGS,
                          **kw: Any) -> Episode:
    """Queries, turns and evidence of one response text (every grammar; see the module docstring). Calls
    that no observation answered are kept only when the text holds no observation at all."""
    asm = _Assembler()
    scan_text(response or "", asm, query_tags=query_tags)
    stats = ReadStats(format="text")
    ep, pending = asm.build(stats, **kw)
    if asm.n_obs == 0:
        _adopt_pending(ep, pending)
    return ep


def _adopt_pending(ep: Episode, pending: list[tuple[str, int, str]]) -> None:
    for q, t, _ in pending:
        ep.queries.append(q)
        ep.turns.append(t)
        ep.evidence.append([])
        ep.titles.append([])


# ---------------------------------------------------------------------------------------------------
# field access


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


_LOWER: list[Any] = [None, None]


def _lookup(obj: dict, keys: tuple[str, ...]) -> tuple[str | None, Any]:
    """The first present key (case-insensitive) and its value."""
    for k in keys:
        if k in obj:
            return k, obj[k]
    if _LOWER[0] is obj:  # one record is looked up many times: keep its lower-case key map
        lower = _LOWER[1]
    else:
        lower = {str(k).lower(): k for k in obj}
        _LOWER[0], _LOWER[1] = obj, lower
    for k in keys:
        if k in lower:
            return lower[k], obj[lower[k]]
    return None, None


def _number(v: Any, what: str, *, strict: bool = False) -> float | None:
    """A reward-like number; ``strict`` refuses numeric strings (searchgym's own schema)."""
    if v is None:
        return None
    if isinstance(v, dict):  # e.g. verl {"score": .., "acc": ..}
        _, v = _lookup(v, ("score", "reward", "acc", "em"))
        if v is None:
            return None
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)) and math.isfinite(v):
        return float(v)
    if isinstance(v, str) and not strict:
        try:
            f = float(v)
        except ValueError:
            f = math.nan
        if math.isfinite(f):
            return f
    raise TrajectoryFormatError(f"{what} must be a number, got {v!r:.40}")


def _step(v: Any, what: str) -> int | None:
    if v is None:
        return None
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and v.strip().isdigit():  # "300": a step written as text
        return int(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise TrajectoryFormatError(f"{what} must be an integer, got {v!r:.40}")
    return v


def _str_or_none(v: Any) -> str | None:
    if isinstance(v, str):
        return v.strip() or None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return str(v)
    return None


def _question(obj: dict, question_field: str | None, fallback: str | None) -> str | None:
    if question_field:
        v = _get(obj, question_field)
        return _str_or_none(v) if not isinstance(v, (int, float)) else str(v)
    _, v = _lookup(obj, QUESTION_KEYS)
    if v is None:
        v = _get(obj, "extra_info.question")
    if isinstance(v, str) and v.strip():
        if len(v) > 300 and ("Question:" in v or "question:" in v):
            return parse_question(v)
        return v.strip()
    _, p = _lookup(obj, ("prompt", "input", "instruction"))
    if isinstance(p, list):
        return _chat_question(p)
    if isinstance(p, str) and p.strip():
        q = parse_question(p)
        if q:
            return q
        if "\n" not in p.strip() and len(p) < 500:
            return p.strip()
    return fallback


def _chat_question(msgs: list) -> str | None:
    for m in msgs:
        if isinstance(m, dict) and _role(m) == "user":
            c = _content(m)
            return parse_question(c) or (c.strip() or None)
    return None


def _record_meta(obj: dict, path: Path, lineno: int, *, step_field: str | None, reward_field: str | None,
                 default_step: int | None) -> dict[str, Any]:
    if step_field:
        step = _step(_get(obj, step_field), f"step field {step_field!r}")
    else:
        k, v = _lookup(obj, STEP_KEYS)
        step = _step(v, f"{k!r}") if k else None
    if step is None:
        step = default_step
    if reward_field:
        reward = _number(_get(obj, reward_field), f"reward field {reward_field!r}")
    else:
        k, v = _lookup(obj, REWARD_KEYS)
        reward = _number(v, f"{k!r}") if k else None
    _, eid = _lookup(obj, EPISODE_ID_KEYS)
    _, qid = _lookup(obj, QUESTION_ID_KEYS)
    if qid is None:
        qid = _get(obj, "extra_info.index")
    return {"step": step, "reward": reward, "episode_id": _str_or_none(eid) or f"{path.name}:{lineno}",
            "question_id": _str_or_none(qid), "source_line": lineno}


# ---------------------------------------------------------------------------------------------------
# per-record parsers: each returns (Episode, pending calls, number of observations)

_Parsed = tuple[Episode, list[tuple[str, int, str]], int]


class _Opts:
    def __init__(self, *, query_tags: tuple[tuple[str, str], ...], text_field: str | None,
                 step_field: str | None, question_field: str | None, reward_field: str | None,
                 success_threshold: float):
        self.query_tags = query_tags
        self.text_field = text_field
        self.step_field = step_field
        self.question_field = question_field
        self.reward_field = reward_field
        self.success_threshold = success_threshold
        self.field: str | None = None  # the text field a detected record format reads
        names = {o: _grammar_name(o) for o, _ in query_tags}
        self.names = names


def _grammar_name(open_tag: str) -> str:
    return {"<search>": "search_tag", "<|begin_of_query|>": "r1_searcher",
            "<|begin_search_query|>": "search_o1"}.get(open_tag, f"tags {open_tag}")


def _finish(asm: _Assembler, stats: ReadStats, meta: dict[str, Any], question: str | None,
            opts: _Opts, answer_field: str | None = None, success: bool | None = None) -> _Parsed:
    ep, pending = asm.build(stats, question=question, **meta)
    if ep.question_id is None:
        ep.question_id = question
    if ep.answer is None and answer_field:
        ep.answer = answer_field
    if success is None and ep.reward is not None:
        success = ep.reward >= opts.success_threshold
    ep.success = success
    return ep, pending, asm.n_obs


def _parse_verl(obj: dict, path: Path, lineno: int, stats: ReadStats, opts: _Opts,
                default_step: int | None) -> _Parsed:
    inp, out = obj.get("input"), obj.get("output")
    if not isinstance(out, str):
        raise TrajectoryFormatError(f"verl rollout line needs a string 'output' (keys: {sorted(obj)[:12]})")
    if inp is not None and not isinstance(inp, str):
        raise TrajectoryFormatError(f"verl 'input' must be a string, got {type(inp).__name__}")
    meta = _record_meta(obj, path, lineno, step_field=opts.step_field, reward_field=opts.reward_field,
                        default_step=default_step)
    _, prompt_q = None, parse_question(inp or "")
    question = _question(_without(obj, ("input",)), opts.question_field, prompt_q)
    asm = _Assembler()
    response = split_response(out)[1] if _ASSISTANT.search(out) and not inp else out
    scan_text(response, asm, query_tags=opts.query_tags, grammar_names=opts.names)
    _, ans = _lookup(obj, ANSWER_KEYS)
    return _finish(asm, stats, meta, question, opts, _str_or_none(ans))


def _without(obj: dict, keys: tuple[str, ...]) -> dict:
    return {k: v for k, v in obj.items() if k not in keys}


def _parse_sequence(obj: dict, path: Path, lineno: int, stats: ReadStats, opts: _Opts,
                    default_step: int | None) -> _Parsed:
    key = opts.field
    val = obj.get(key) if key else None
    if key and val is None:
        _, val = _lookup(obj, (key,))
    if not isinstance(val, str):
        raise TrajectoryFormatError(f"text field {key!r} is missing or not a string (keys: {sorted(obj)[:12]})")
    meta = _record_meta(obj, path, lineno, step_field=opts.step_field, reward_field=opts.reward_field,
                        default_step=default_step)
    _, p = _lookup(obj, ("prompt", "input"))
    prompt, response = "", val
    if _ASSISTANT.search(val):
        prompt, response = split_response(val)
    elif key.lower() not in RESPONSE_KEYS and not isinstance(p, str):
        # a full sequence without a chat template: the prompt ends with the question line
        k = val.rfind("Question:")
        if k >= 0:
            j = val.find("\n", k)
            prompt, response = val[:j if j >= 0 else len(val)], val[j + 1:] if j >= 0 else ""
    question = _question(obj, opts.question_field, parse_question(prompt))
    asm = _Assembler()
    scan_text(response, asm, query_tags=opts.query_tags, grammar_names=opts.names)
    _, ans = _lookup(obj, ANSWER_KEYS)
    return _finish(asm, stats, meta, question, opts, _str_or_none(ans))


def _parse_react(obj: dict, path: Path, lineno: int, stats: ReadStats, opts: _Opts,
                 default_step: int | None) -> _Parsed:
    key = opts.field or "traj"
    _, val = _lookup(obj, (key,))
    if not isinstance(val, str):
        raise TrajectoryFormatError(f"ReAct field {key!r} is missing or not a string (keys: {sorted(obj)[:12]})")
    meta = _record_meta(obj, path, lineno, step_field=opts.step_field, reward_field=opts.reward_field,
                        default_step=default_step)
    text, q_in_text = _react_episode_text(val)
    question = _question(obj, opts.question_field, q_in_text)
    asm = _Assembler()
    scan_text(text, asm, query_tags=opts.query_tags, grammar_names=opts.names)
    _, ans = _lookup(obj, ("answer",) + ANSWER_KEYS)
    return _finish(asm, stats, meta, question, opts, _str_or_none(ans))


def _react_episode_text(val: str) -> tuple[str, str | None]:
    """The part of a ReAct trace after its last ``Question:`` line start (few-shot examples come before)."""
    k = -1
    pos = len(val)
    while True:
        j = val.rfind("Question", 0, pos)
        if j < 0:
            break
        if (j == 0 or val[j - 1] == "\n") and _QUESTION_LINE.match(val, j):
            k = j
            break
        pos = j
    if k < 0:
        return val, None
    m = _QUESTION_LINE.match(val, k)
    e = val.find("\n", m.end())
    e = len(val) if e < 0 else e
    return val[e:], val[m.end():e].strip() or None


def _role(m: dict) -> str:
    r = m.get("role", m.get("from", ""))
    r = r.lower() if isinstance(r, str) else ""
    return {"human": "user", "gpt": "assistant", "function": "tool", "observation": "tool",
            "ipython": "tool", "model": "assistant"}.get(r, r)


def _content(m: dict) -> str:
    c = m.get("content", m.get("value", ""))
    if isinstance(c, str):
        return c
    if isinstance(c, list):  # [{"type": "text", "text": ...}]
        return "\n".join(p.get("text", "") if isinstance(p, dict) and isinstance(p.get("text"), str)
                         else (p if isinstance(p, str) else "") for p in c)
    if c is None:
        return ""
    raise TrajectoryFormatError(f"message content must be a string or a list of parts, got {type(c).__name__}")


def _parse_chat(obj: dict, path: Path, lineno: int, stats: ReadStats, opts: _Opts,
                default_step: int | None) -> _Parsed:
    _, msgs = _lookup(obj, MESSAGE_KEYS)
    if not isinstance(msgs, list):
        raise TrajectoryFormatError(f"chat record needs a 'messages' list (keys: {sorted(obj)[:12]})")
    meta = _record_meta(obj, path, lineno, step_field=opts.step_field, reward_field=opts.reward_field,
                        default_step=default_step)
    asm = _Assembler()
    question = None
    seen_assistant = False
    for m in msgs:
        if not isinstance(m, dict):
            raise TrajectoryFormatError(f"a message must be an object, got {type(m).__name__}")
        role = _role(m)
        if role == "assistant":
            seen_assistant = True
            scan_text(_content(m), asm, query_tags=opts.query_tags, grammar_names=opts.names)
            tcs = m.get("tool_calls") or []
            if not isinstance(tcs, list):
                raise TrajectoryFormatError("'tool_calls' must be a list")
            for tc in tcs:
                fn = tc.get("function", tc) if isinstance(tc, dict) else None
                if not isinstance(fn, dict):
                    asm.call(_Call("openai_tools", None))
                    continue
                name, args = fn.get("name"), fn.get("arguments", fn.get("parameters"))
                lname = name.lower() if isinstance(name, str) else ""
                if lname in _ANSWER_TOOLS:
                    asm.finish(_answer_of(lname, args))
                    break
                cid = tc.get("id") if isinstance(tc.get("id"), str) else None
                asm.call(_function_call(name, args, "openai_tools", cid))
            if asm.done:
                break
        elif role == "function_call":  # ShareGPT/glaive: the call as JSON in its own turn
            seen_assistant = True
            c = _tool_call_queries(_content(m))
            c.grammar = "function_call"
            asm.call(c)
        elif role in ("tool", "user"):
            if role == "user" and not seen_assistant:
                if question is None:
                    c = _content(m)
                    question = parse_question(c) or (c.strip() or None)
                continue
            if seen_assistant:
                cid = m.get("tool_call_id")
                asm.obs(_content(m), cid if isinstance(cid, str) else None)
    question = _question(_without(obj, MESSAGE_KEYS), opts.question_field, question)
    _, ans = _lookup(obj, ANSWER_KEYS)
    if asm.answer is None and not asm.done:
        # the last assistant message without calls is the final answer
        for m in reversed(msgs):
            if isinstance(m, dict) and _role(m) == "assistant":
                if not m.get("tool_calls"):
                    c = _content(m).strip()
                    asm.answer = c[-500:] if c else None
                break
    return _finish(asm, stats, meta, question, opts, _str_or_none(ans))


def _parse_generic(obj: dict, path: Path, lineno: int, stats: ReadStats, opts: _Opts,
                   default_step: int | None) -> _Parsed:
    tf = opts.text_field or ""
    val = _get(obj, tf)
    if val is None:
        raise TrajectoryFormatError(f"text field {tf!r} is missing (keys: {sorted(obj)[:12]})")
    meta = _record_meta(obj, path, lineno, step_field=opts.step_field, reward_field=opts.reward_field,
                        default_step=default_step)
    question = _question(obj, opts.question_field, None)
    asm = _Assembler()
    if isinstance(val, list):
        if not all(isinstance(q, str) for q in val):
            raise TrajectoryFormatError(f"text field {tf!r} must be a list of strings")
        for q in val:
            asm.call(_Call("list", [q.strip()] if q.strip() else None, issued=True))
    elif isinstance(val, str):
        scan_text(val, asm, query_tags=opts.query_tags, grammar_names=opts.names)
        if not any(t.calls for t in asm.turns) and not asm.n_obs:
            s = val.strip()
            if s and "\n" not in s:
                asm.call(_Call("field", [s], issued=True))
            elif s:
                stats.skipped_reasons["text field without any search call"] += 1
    else:
        raise TrajectoryFormatError(f"text field {tf!r} must be a string or a list, got {type(val).__name__}")
    return _finish(asm, stats, meta, question, opts)


def _parse_searchgym(obj: dict, path: Path, lineno: int, stats: ReadStats, opts: _Opts,
                     default_step: int | None) -> _Parsed:
    from searchgym.trajectory import Trajectory

    # checked here as well as by Trajectory.from_dict, so that older schema code cannot let them through
    _step(obj.get("policy_step"), "'policy_step'")
    for k in ("reward", "em", "f1"):
        _number(obj.get(k), f"{k!r}", strict=True)
    tr = Trajectory.from_dict(obj)
    ep = Episode(queries=[], step=tr.policy_step, question=tr.question, question_id=tr.question_id,
                 reward=float(tr.reward), success=bool(tr.em), episode_id=str(tr.episode_id),
                 answer=tr.prediction, source_line=lineno)
    te = tr.extra.get("token_entropy")
    ep.token_entropy = float(te) if isinstance(te, (int, float)) and not isinstance(te, bool) else None
    turn = 0
    for s in tr.steps:
        if s.kind == "invalid":
            ep.malformed += 1
            continue
        if s.kind != "search":
            continue
        qs = getattr(s, "queries", None) or s.extra.get("queries") or ([s.query] if s.query is not None else [])
        if not isinstance(qs, list) or not all(isinstance(q, str) for q in qs):
            raise TrajectoryFormatError("a search step's queries must be strings")
        titles = getattr(s, "titles", None) or s.extra.get("titles") or s.extra.get("retrieved_titles") or []
        if not isinstance(titles, list):
            raise TrajectoryFormatError("a step's titles must be a list")
        evid: list[str] = [str(t) for t in titles if not isinstance(t, list)]
        for k in ("observation", "information", "evidence"):
            v = s.extra.get(k)
            if isinstance(v, str) and v:
                evid.append(v)
            elif isinstance(v, list):
                evid.extend(str(x) for x in v)
        per_query_titles = len(titles) == len(qs) and len(qs) > 1 and all(isinstance(t, list) for t in titles)
        for qi, q in enumerate(qs):
            ep.queries.append(q)
            ep.turns.append(turn)
            ts = [str(t) for t in titles[qi]] if per_query_titles else [str(t) for t in titles
                                                                        if not isinstance(t, list)]
            ep.titles.append(ts)
            ep.evidence.append(list(evid))
            ep.doc_ids.append(list(s.doc_ids))
            stats.grammars["searchgym"] += 1
        turn += 1
    return ep, [], 1


_PARSERS = {"verl": _parse_verl, "search-r1": _parse_sequence, "react": _parse_react, "chat": _parse_chat,
            "jsonl": _parse_generic, "searchgym": _parse_searchgym}


# ---------------------------------------------------------------------------------------------------
# containers and detection


def _has_call_marker(s: str, query_tags: tuple[tuple[str, str], ...]) -> bool:
    if any(o in s for o, _ in query_tags) or TOOL_CALL[0] in s:
        return True
    return "Action" in s and _REACT_ACTION_LINE.search(s) is not None


def _detect_record(obj: dict, opts: _Opts) -> str | None:
    """The record format of one JSON object, or None; sets ``opts.field`` for text-field formats."""
    if opts.text_field:
        return "jsonl"
    if "steps" in obj and "episode_id" in obj:
        return "searchgym"
    k, msgs = _lookup(obj, MESSAGE_KEYS)
    if isinstance(msgs, list) and msgs and all(isinstance(m, dict) for m in msgs[:3]) and \
            any(("role" in m or "from" in m) for m in msgs[:3]):
        return "chat"
    if isinstance(obj.get("input"), str) and isinstance(obj.get("output"), str):
        return "verl"
    for k in REACT_KEYS:
        kk, v = _lookup(obj, (k,))
        if isinstance(v, str) and "Action" in v and _REACT_ACTION_LINE.search(v):
            opts.field = kk
            return "react"
    keys = [k for k in SEQUENCE_KEYS + RESPONSE_KEYS]
    for k in keys:
        kk, v = _lookup(obj, (k,))
        if isinstance(v, str) and _has_call_marker(v, opts.query_tags):
            opts.field = kk
            return "react" if (TOOL_CALL[0] not in v and not any(o in v for o, _ in opts.query_tags)) \
                else "search-r1"
    for kk, v in obj.items():
        if str(kk).lower() in _PROMPT_KEYS:
            continue  # an instruction's "<search> query </search>" example is no call
        if isinstance(v, str) and len(v) > 20 and _has_call_marker(v, opts.query_tags):
            opts.field = kk
            return "react" if (TOOL_CALL[0] not in v and not any(o in v for o, _ in opts.query_tags)) \
                else "search-r1"
    return None


def _field_for(fmt: str, obj: dict, opts: _Opts) -> None:
    """For a forced format, pick its text field from a record."""
    if opts.field is not None:
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
    return bool(keys & known)


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


class _BadRecord(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason


def _skip_or_raise(exc: _BadRecord, where: str, stats: ReadStats, lenient: bool) -> None:
    """Count a bad record as skipped (``lenient``) or raise it as a ``TrajectoryFormatError`` naming ``where``."""
    if not lenient:
        raise TrajectoryFormatError(f"{where}: {exc}") from None
    stats.skipped_lines += 1
    stats.skipped_reasons[exc.reason] += 1


def _decode(raw: bytes) -> Any:
    try:
        text = raw.decode("utf-8-sig")  # a byte-order mark is not JSON
    except UnicodeDecodeError as exc:
        raise _BadRecord("not UTF-8", f"not valid UTF-8 (byte {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _BadRecord("not valid JSON", f"not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise _BadRecord("nested too deeply", "JSON nested too deeply") from None


def _records(path: Path, stats: ReadStats, lenient: bool, *, unwrap: bool = True) -> Iterator[tuple[int, str, Any]]:
    """(line or record number, 'line'|'record', value) of a JSON file of any container. ``unwrap``: a one-line
    file whose object holds the list of episodes under some key yields those."""
    with path.open("rb") as fh:
        head = fh.read(1 << 16)
    first = head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if first == b"[":
        container = "json-array"
    elif first == b"{":
        nl = head.find(b"\n")
        line1 = head[:nl] if nl >= 0 else head
        container = "jsonl"
        try:
            json.loads(line1.decode("utf-8-sig"))
        except (ValueError, UnicodeDecodeError, RecursionError):
            container = "json-object"  # a pretty-printed object (or a broken first line: reported below)
    elif not first:
        return  # an empty file holds no records
    else:
        container = "text"
    stats.container = container if stats.container in ("", container) else "mixed"
    if container == "text":
        raise _NotJSON()
    if container in ("json-array", "json-object"):
        raw = path.read_bytes().lstrip(b"\xef\xbb\xbf")
        try:
            val = _decode(raw)
        except _BadRecord as exc:
            if container == "json-object":
                container = "jsonl"  # report it as the JSONL line it most likely is
                stats.container = "jsonl"
            else:
                raise TrajectoryFormatError(f"{path}: {exc}") from None
        else:
            recs = _unwrap(val)
            if recs is None:
                raise TrajectoryFormatError(f"{path}: a JSON {type(val).__name__} that holds no list of episode "
                                            "records")
            for i, r in enumerate(recs):
                yield i, "record", r
            return
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
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


class _NotJSON(Exception):
    pass


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
    # JSON files when there are any (a notes.txt beside them is not a run); else plain-text logs
    out = [(None, c) for c in found if c.suffix.lower() in (".jsonl", ".json")] or \
        [(None, c) for c in found if c.suffix.lower() in (".txt", ".log")]
    if not out:
        raise ConfigError(f"run directory {p} has no .jsonl, .json, .txt or .log files")
    return out


def _tried_message(where: Path, keys: list[str] | None) -> str:
    seen = f" (keys: {', '.join(keys[:12])})" if keys else ""
    return (f"cannot tell the format of {where}{seen}: tried searchgym (steps + episode_id), chat (messages), "
            "verl (input + output), react (a trace with 'Action N: Search[...]'), search-r1 (a text field "
            "with <search>, <tool_call>, <|begin_of_query|> or <|begin_search_query|> calls) and react-log "
            "(plain text); pass --format NAME (one of " + ", ".join(FORMATS[1:]) + "), --query-tags OPEN CLOSE "
            "for other tags, or --text-field FIELD for any JSON field")


def _react_log_records(path: str | os.PathLike, *, query_tags: tuple[tuple[str, str], ...] = DEFAULT_QUERY_TAGS,
                       stats: ReadStats | None = None, lenient: bool = False) -> Iterator[_Parsed]:
    """Parsed episodes of a plain-text ReAct log (see the module docstring)."""
    p = Path(path)
    stats = stats if stats is not None else ReadStats(format="react-log")
    raw = p.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        if not lenient:
            raise TrajectoryFormatError(f"{p}, line {line}: not valid UTF-8 (byte {exc.start})") from None
        stats.skipped_reasons["not UTF-8"] += 1
        text = raw.decode("utf-8", errors="replace")
    opts = _Opts(query_tags=query_tags, text_field=None, step_field=None, question_field=None,
                 reward_field=None, success_threshold=1.0)
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
            asm = _Assembler()
            scan_text("\n".join(cur), asm, query_tags=query_tags, grammar_names=opts.names)
            meta = {"step": trial, "reward": None if success is None else float(success),
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


def detect_format(path: str | os.PathLike[str], *, text_field: str | None = None,
                  query_tags: tuple[tuple[str, str], ...] | None = None) -> str:
    """Guess the record format of a run (see the module docstring)."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"run {p} does not exist")
    if text_field:
        return "jsonl"
    opts = _Opts(query_tags=_tags(query_tags), text_field=None, step_field=None, question_field=None,
                 reward_field=None, success_threshold=1.0)
    return _detect_file(_files(p)[0][1], opts)


def _detect_file(f: Path, opts: _Opts) -> str:
    stats = ReadStats(format="auto")
    keys: list[str] | None = None
    try:
        seen = 0
        for _, _, rec in _records(f, stats, lenient=True):
            if not isinstance(rec, dict):
                continue
            keys = keys or sorted(str(k) for k in rec)
            fmt = _detect_record(rec, opts)
            if fmt:
                return fmt
            seen += 1
            if seen >= 50:
                break
    except _NotJSON:
        with f.open("rb") as fh:
            head = fh.read(1 << 20).decode("utf-8", errors="replace")
        if _QUESTION_LINE.search(head) and _REACT_ACTION_LINE.search(head):
            return "react-log"
        raise TrajectoryFormatError(_tried_message(f, None)) from None
    if keys is None:
        raise TrajectoryFormatError(f"{f} holds no episode records (empty, or no line is a JSON object)")
    raise TrajectoryFormatError(_tried_message(f, keys))


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


def run_name(path: str | os.PathLike[str]) -> str:
    """The run's name: the file stem (``run.jsonl`` -> ``run``) or the folder name."""
    p = Path(path)
    name = p.name if p.is_dir() else p.name.split(".")[0]
    return name or str(p)


@with_gc_paused
def read_run(path: str | os.PathLike[str], fmt: str = "auto", *, query_tags: Any = None, lenient: bool = False,
             label: str | None = None, text_field: str | None = None, step_field: str | None = None,
             question_field: str | None = None, reward_field: str | None = None, name: str | None = None,
             success_threshold: float = 1.0) -> Run:
    """Read one run (file or folder) into a ``Run`` of ``Episode`` records with its ``read_stats``.

    ``query_tags``: an extra (OPEN, CLOSE) tag pair (or a list of pairs) of a custom search grammar.
    ``lenient``: skip malformed records (counted in ``read_stats.skipped_lines`` / ``skipped_reasons``)
    instead of raising ``TrajectoryFormatError``.
    """
    if fmt not in FORMATS:
        raise ConfigError(f"unknown run format {fmt!r}; choose from {', '.join(FORMATS)}")
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"run {p} does not exist")
    tags = _tags(query_tags)
    if fmt == "jsonl" and not text_field:
        raise ConfigError("format 'jsonl' needs --text-field (the field holding the query text)")
    if text_field and fmt == "auto":
        fmt = "jsonl"
    files = _files(p)
    stats = ReadStats(format=fmt)
    parsed: list[_Parsed] = []
    formats: list[str] = []
    for default_step, f in files:
        opts = _Opts(query_tags=tags, text_field=text_field, step_field=step_field, question_field=question_field,
                     reward_field=reward_field, success_threshold=success_threshold)
        ffmt = fmt if fmt != "auto" else _detect_file(f, opts)
        formats.append(ffmt)
        stats.files += 1
        try:
            if ffmt == "react-log":
                stats.container = "text"
                parsed.extend(_react_log_records(f, query_tags=tags, stats=stats, lenient=lenient))
            else:
                parsed.extend(_read_records(f, ffmt, opts, stats, lenient, default_step))
        except OSError as exc:
            raise ConfigError(f"cannot read {f}: {exc.strerror or exc}") from None
    stats.format = formats[0] if len(set(formats)) == 1 else "+".join(sorted(set(formats)))
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
    if not episodes:
        why = f" ({stats.skipped_lines} malformed lines skipped)" if stats.skipped_lines else ""
        raise TrajectoryFormatError(f"{p} holds no episodes{why}")
    stats.episodes = len(episodes)
    stats.queries = sum(len(e.queries) for e in episodes)
    stats.malformed = sum(e.malformed for e in episodes)
    nm = label or name or run_name(p)
    return Run(name=nm, path=str(p), fmt=stats.format, episodes=episodes, label=nm, read_stats=stats)


def _read_records(f: Path, fmt: str, opts: _Opts, stats: ReadStats, lenient: bool,
                  default_step: int | None) -> Iterator[_Parsed]:
    parser = _PARSERS.get(fmt)
    if parser is None:
        raise ConfigError(f"format {fmt!r} cannot read JSON records; choose from {', '.join(RECORD_FORMATS)}")
    try:
        for n, kind, rec in _records(f, stats, lenient, unwrap=not opts.text_field):
            try:
                if not isinstance(rec, dict):
                    raise _BadRecord("not a JSON object", f"expected a JSON object, got {type(rec).__name__}")
                if opts.field is None and fmt in ("react", "search-r1") and _detect_record(rec, opts) is None:
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


# public per-format readers ------------------------------------------------------------------------


def _reader(fmt: str):
    def read(path: str | os.PathLike, **kw: Any) -> Iterator[Episode]:
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


def read_generic(path: str | os.PathLike[str], *, text_field: str, **kw: Any) -> Iterator[Episode]:
    """Episodes of any JSON records whose ``text_field`` holds the queries (a list) or an agent's text."""
    yield from read_run(path, "jsonl", text_field=text_field, **kw).episodes
