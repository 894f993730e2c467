"""Parsing agent actions: Search-R1 tags, tool-call JSON, and structured action objects.

Grammar (Search-R1 compatible)::

    <think> ... </think> <search> query </search>     -> a search
    <answer> final answer </answer>                   -> the answer, ends the episode
    <tool_call>{"name": "search", "arguments": {"query": "q"}}</tool_call>
    <tool_call>{"name": "search", "arguments": {"query_list": ["q1", "q2"]}}</tool_call>
    <tool_call>{"name": "answer", "arguments": {"answer": "a"}}</tool_call>

The **first complete tag wins**: among ``<search>``, ``<answer>`` and ``<tool_call>``, the one whose closing
tag comes first in the text (what a generator with these closing tags as stop strings produces). Its content
runs from the last matching opening tag before that close, so ``<search><search>q</search>`` searches
``q``. Text before the opening tag is the agent's thinking. Anything else is an invalid action and carries
an ``error`` saying what was wrong; parsing never raises, whatever the input.

Parsing is linear in the length of the text (``str.find``/``rfind`` only, no backtracking regex), so a
1 MB action costs about a millisecond.
"""

from __future__ import annotations

import json
import reprlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SEARCH, ANSWER, INVALID = "search", "answer", "invalid"

# Limits that keep a hostile action cheap; over-limit actions are invalid (with a message), not truncated.
MAX_QUERY_CHARS = 2000
MAX_QUERIES_PER_STEP = 8
MAX_ANSWER_CHARS = 10_000


@dataclass(frozen=True, slots=True)
class SearchAction:
    """A search for programmatic agents: one ``query`` or several ``queries`` (a parallel search)."""

    query: str | None = None
    queries: Sequence[str] | None = None

    def to_text(self, style: str = "search_r1") -> str:
        qs = [self.query] if self.query is not None else list(self.queries or [])
        if style == "tool_call":
            args: dict[str, Any] = {"query": qs[0]} if len(qs) == 1 else {"query_list": qs}
            return "<tool_call>" + json.dumps({"name": "search", "arguments": args}, ensure_ascii=False) + \
                "</tool_call>"
        if len(qs) == 1:
            return f"<search> {qs[0]} </search>"
        args = {"query_list": qs}
        return "<tool_call>" + json.dumps({"name": "search", "arguments": args}, ensure_ascii=False) + \
            "</tool_call>"


@dataclass(frozen=True, slots=True)
class AnswerAction:
    """The final answer, for programmatic agents."""

    answer: str

    def to_text(self, style: str = "search_r1") -> str:
        if style == "tool_call":
            return "<tool_call>" + json.dumps({"name": "answer", "arguments": {"answer": self.answer}},
                                              ensure_ascii=False) + "</tool_call>"
        return f"<answer> {self.answer} </answer>"


class ParsedAction:
    """The result of parsing one action. ``kind`` is ``search``, ``answer`` or ``invalid``."""

    __slots__ = ("answer", "error", "fmt", "kind", "queries", "raw", "thinking")

    def __init__(self, kind: str, queries: tuple[str, ...] = (), answer: str | None = None,
                 thinking: str = "", error: str | None = None, raw: str = "", fmt: str = "tag"):
        self.kind = kind
        self.queries = queries
        self.answer = answer
        self.thinking = thinking
        self.error = error
        self.raw = raw
        self.fmt = fmt  # "tag", "tool_call" or "object": how the agent expressed it

    @property
    def query(self) -> str | None:
        return self.queries[0] if self.queries else None

    def __repr__(self) -> str:
        return (f"ParsedAction(kind={self.kind!r}, queries={self.queries!r}, answer={self.answer!r}, "
                f"error={self.error!r}, fmt={self.fmt!r})")


_TAGS = (("search", "<search>", "</search>"), ("answer", "<answer>", "</answer>"),
         ("tool_call", "<tool_call>", "</tool_call>"))


def _invalid(error: str, raw: str, thinking: str = "", fmt: str = "tag") -> ParsedAction:
    return ParsedAction(INVALID, error=error, raw=raw, thinking=thinking, fmt=fmt)


def _check_queries(qs: Any, raw: str, thinking: str, fmt: str) -> ParsedAction:
    if isinstance(qs, str):
        qs = [qs]
    if not isinstance(qs, (list, tuple)) or not qs:
        return _invalid("the search needs a non-empty query (a string) or query_list (a list of strings)",
                        raw, thinking, fmt)
    if len(qs) > MAX_QUERIES_PER_STEP:
        return _invalid(f"too many queries in one step ({len(qs)}; at most {MAX_QUERIES_PER_STEP})",
                        raw, thinking, fmt)
    out = []
    for q in qs:
        if not isinstance(q, str):
            return _invalid(f"every query must be a string, got {type(q).__name__}", raw, thinking, fmt)
        q = q.strip()
        if not q:
            return _invalid("the search query is empty", raw, thinking, fmt)
        if len(q) > MAX_QUERY_CHARS:
            return _invalid(f"the search query is too long ({len(q)} characters; at most {MAX_QUERY_CHARS})",
                            raw, thinking, fmt)
        out.append(q)
    return ParsedAction(SEARCH, queries=tuple(out), raw=raw, thinking=thinking, fmt=fmt)


def _check_answer(ans: Any, raw: str, thinking: str, fmt: str) -> ParsedAction:
    if isinstance(ans, (int, float)) and not isinstance(ans, bool):
        ans = str(ans)
    if not isinstance(ans, str):
        return _invalid(f"the answer must be a string, got {type(ans).__name__}", raw, thinking, fmt)
    ans = ans.strip()
    if len(ans) > MAX_ANSWER_CHARS:
        return _invalid(f"the answer is too long ({len(ans)} characters; at most {MAX_ANSWER_CHARS})",
                        raw, thinking, fmt)
    return ParsedAction(ANSWER, answer=ans, raw=raw, thinking=thinking, fmt=fmt)


def _parse_call(call: Any, raw: str, thinking: str, fmt: str) -> ParsedAction:
    """A tool call as a dict: ``{"name": ..., "arguments": {...}}`` (arguments may be a JSON string)."""
    if not isinstance(call, Mapping):
        return _invalid("a tool call must be a JSON object with 'name' and 'arguments'", raw, thinking, fmt)
    name = call.get("name")
    args = call.get("arguments", call.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except (ValueError, RecursionError):
            return _invalid("the tool call's 'arguments' string is not valid JSON", raw, thinking, fmt)
    if not isinstance(args, Mapping):
        return _invalid("the tool call's 'arguments' must be a JSON object", raw, thinking, fmt)
    if name == "search":
        if "query_list" in args:
            return _check_queries(args["query_list"], raw, thinking, fmt)
        if "queries" in args:
            return _check_queries(args["queries"], raw, thinking, fmt)
        if "query" in args:
            q = args["query"]
            return _check_queries(q if isinstance(q, (str, list)) else [q], raw, thinking, fmt)
        return _invalid("the search call needs 'query' or 'query_list' in its arguments", raw, thinking, fmt)
    if name == "answer":
        if "answer" not in args:
            return _invalid("the answer call needs 'answer' in its arguments", raw, thinking, fmt)
        return _check_answer(args["answer"], raw, thinking, fmt)
    return _invalid(f"unknown tool {str(name)[:80]!r}; the tools are 'search' and 'answer'", raw, thinking, fmt)


def parse_text(text: str) -> ParsedAction:
    """Parse raw agent text. Never raises."""
    best_end, best = -1, None
    for name, open_t, close_t in _TAGS:
        i = text.find(open_t)
        if i < 0:
            continue
        j = text.find(close_t, i + len(open_t))
        if j < 0:
            continue
        if best is None or j < best_end:
            best_end, best = j, (name, text.rfind(open_t, i, j), open_t)
    if best is None:
        return _invalid("no complete <search>, <answer> or <tool_call> tag", text)
    name, start, open_t = best
    content = text[start + len(open_t):best_end]
    thinking = text[:start]
    if name == "search":
        return _check_queries(content, text, thinking, "tag")
    if name == "answer":
        return _check_answer(content, text, thinking, "tag")
    try:
        call = json.loads(content)
    except (ValueError, RecursionError):
        return _invalid("the tool call is not valid JSON", text, thinking, "tool_call")
    return _parse_call(call, text, thinking, "tool_call")


class _ShortRepr(reprlib.Repr):
    """``repr`` that stops early: a few items of each container, two levels deep, long strings cut. The plain
    ``repr`` of a list holding one large string many times is that many copies of it."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxstring, self.maxother, self.maxlong = 3, 200, 200, 60
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = self.maxfrozenset = 10


_short_repr = _ShortRepr()


def _safe_repr(obj: Any, limit: int = 1000) -> str:
    try:
        return str(_short_repr.repr(obj))[:limit]
    except Exception:  # noqa: BLE001 - a hostile __repr__ must not crash a rollout
        return f"<{type(obj).__name__}>"


MAX_ACTION_OBJECT_CHARS = 1 << 22  # text in a structured action (dict, SearchAction, ...): 4M characters
_MAX_ACTION_DEPTH = 32


def _too_large(obj: Any, limit: int = MAX_ACTION_OBJECT_CHARS) -> str | None:
    """Why a structured action is too large to serialise, or None. Walks it without building anything and
    stops as soon as the text in it (strings, keys, ~20 characters per other value) passes ``limit`` or it
    nests deeper than 32, so an action holding one large string many times is refused after a few items."""
    total = 0
    stack: list[tuple[Any, int]] = [(obj, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (str, bytes, bytearray)):
            total += len(value)
        elif isinstance(value, Mapping):
            if depth >= _MAX_ACTION_DEPTH:
                return f"nested more than {_MAX_ACTION_DEPTH} levels deep"
            total += 2 * len(value)
            for k, v in value.items():
                stack.append((k, depth + 1))
                stack.append((v, depth + 1))
                if len(stack) > limit:
                    break
        elif isinstance(value, (list, tuple)):
            if depth >= _MAX_ACTION_DEPTH:
                return f"nested more than {_MAX_ACTION_DEPTH} levels deep"
            total += len(value)
            stack.extend((v, depth + 1) for v in value[:limit])
        else:
            total += 20
        if total > limit:
            return f"over {limit:,} characters of text"
    return None


def _refuse_large(action: Any, why: str) -> ParsedAction:
    return _invalid(f"the action is too large ({why}); send one query of at most {MAX_QUERY_CHARS} characters "
                    f"or an answer of at most {MAX_ANSWER_CHARS:,}", f"<{type(action).__name__}: {why}>",
                    fmt="object")


def parse_action(action: Any) -> ParsedAction:
    """Parse any action the environment accepts: text, a Search/AnswerAction, or a tool-call dict.

    Never raises: an object whose ``__repr__``, ``__str__``, ``__eq__``, ``get`` or iteration raises is an
    invalid action naming the exception.
    """
    try:
        return _parse_action(action)
    except Exception as exc:  # noqa: BLE001 - hostile objects (raising __eq__/__iter__/get) stay invalid actions
        return _invalid(f"the action could not be read ({type(exc).__name__} while parsing a "
                        f"{type(action).__name__})", f"<{type(action).__name__}>", fmt="object")


def _parse_action(action: Any) -> ParsedAction:
    if isinstance(action, str):
        return parse_text(action)
    if isinstance(action, (SearchAction, AnswerAction, Mapping)):  # sized before anything is serialised
        why = _too_large(action if isinstance(action, Mapping) else
                         [getattr(action, "query", None), getattr(action, "queries", None),
                          getattr(action, "answer", None)])
        if why is not None:
            return _refuse_large(action, why)
    if isinstance(action, SearchAction):
        qs = [action.query] if action.query is not None else action.queries
        return _check_queries(list(qs) if isinstance(qs, (list, tuple)) else qs, action.to_text(), "",
                              "object")
    if isinstance(action, AnswerAction):
        return _check_answer(action.answer, action.to_text(), "", "object")
    if isinstance(action, Mapping):
        try:
            raw = json.dumps(action, ensure_ascii=False, default=_safe_repr)
        except Exception:  # noqa: BLE001 - unserialisable keys, cycles, hostile objects
            raw = _safe_repr(action)
        return _parse_call(action, raw, "", "object")
    if isinstance(action, (bytes, bytearray)):
        if len(action) > 4 * MAX_ACTION_OBJECT_CHARS:
            return _refuse_large(action, f"{len(action):,} bytes")
        return parse_text(bytes(action).decode("utf-8", errors="replace"))
    raw = _safe_repr(action)
    return _invalid(f"an action must be text or a SearchAction/AnswerAction, got {type(action).__name__}",
                    raw, fmt="object")
