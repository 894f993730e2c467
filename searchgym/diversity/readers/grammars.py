"""Grammars: text -> calls, observations and the answer. Every call grammar is recognised here, in one linear
pass (a regex of literal markers plus ReAct's ``Action N:``; forward-only ``str.find``; no backtracking spans).
"""

from __future__ import annotations

import json
import re
from typing import Any

from searchgym.diversity.readers.assembly import (
    _adopt_pending,
    _Assembler,
    _Call,
)
from searchgym.diversity.readers.records import (
    _ANSWER_TOOLS,
    _DECODER,
    _REACT_RE,
    _SEARCH_ARG_KEYS,
    _WORD,
    ANSWER,
    DEFAULT_QUERY_TAGS,
    DEFAULT_SEARCH_TOOLS,
    EOS_TOKENS,
    OBS_TAGS,
    TOOL_CALL,
    TURN_STARTS,
    Episode,
    ReadStats,
    tool_key,
)


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


def _tool_call_queries(body: str, search_tools: frozenset[str] = DEFAULT_SEARCH_TOOLS) -> _Call:
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
                          "tool_call", None, search_tools)


def _function_call(name: Any, args: Any, grammar: str, call_id: str | None,
                   search_tools: frozenset[str] = DEFAULT_SEARCH_TOOLS) -> _Call:
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
    searchy = (not lname) or "search" in lname or "retriev" in lname or "query" in lname or \
        tool_key(lname) in search_tools
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
    sc = _Scan(text, [(m.start(), m.end(), m.group(), m.lastgroup) for m in pat.finditer(text)], asm, kinds,
               grammar_names or {})
    toks, n = sc.toks, len(sc.toks)
    i = 0
    while i < n and not asm.done:
        s, e, lit, grp = toks[i]
        if grp is not None:  # ReAct keyword
            sc.end_react_obs(s)
            if grp == "obs":
                sc.react_obs_start = e
            elif grp == "act":
                i = _react_action(text, e, toks, i, asm, sc.nl, sc.rb)
                continue
            i += 1
            continue
        kind, close = kinds[lit]
        if kind in ("qopen", "topen", "aopen"):
            i = sc.tag(i, kind, close)
        elif kind == "oopen":
            i = sc.observation(i, close)
        elif kind == "eos" and sc.ends_response(s, e):
            break
        else:
            i += 1
    if sc.react_obs_start >= 0 and not asm.done:
        asm.obs(text[sc.react_obs_start:].strip())


class _Scan:
    """The state of one ``scan_text`` pass: its tokens, the open ReAct observation, forward-only caches."""

    __slots__ = ("asm", "kinds", "names", "next_tok", "nl", "rb", "react_obs_start", "text", "toks")

    def __init__(self, text: str, toks: list[Any], asm: _Assembler, kinds: dict[str, tuple[str, Any]],
                 names: dict[str, str]) -> None:
        self.text, self.toks, self.asm, self.kinds, self.names = text, toks, asm, kinds, names
        self.nl, self.rb = _Next(text, "\n"), _Next(text, "]")
        self.react_obs_start = -1
        self.next_tok: dict[str, int] = {}

    def end_react_obs(self, at: int) -> None:
        if self.react_obs_start >= 0:
            self.asm.obs(self.text[self.react_obs_start:at].strip())
            self.react_obs_start = -1

    def tag(self, i: int, kind: str, close: str) -> int:
        """A query / tool-call / answer tag at token ``i``: its content runs to the very next marker, which
        must be its close; return the next token to read."""
        toks, asm = self.toks, self.asm
        s, e, lit, _ = toks[i]
        if i + 1 < len(toks) and toks[i + 1][2] == close:
            body = self.text[e:toks[i + 1][0]]
            self.end_react_obs(s)
            if kind == "qopen":
                q = body.strip()
                asm.call(_Call(self.names.get(lit, lit), [q] if q else None))
            elif kind == "topen":
                asm.call(_tool_call_queries(body, asm.search_tools))
            else:
                asm.finish(body.strip())
            return i + 2
        if kind != "aopen":
            self.end_react_obs(s)
            asm.call(_Call(self.names.get(lit, "tool_call" if kind == "topen" else lit), None))  # unclosed
        return i + 1

    def observation(self, i: int, close: str) -> int:
        """An observation block opened at token ``i``; return the next token to read."""
        toks, n = self.toks, len(self.toks)
        self.end_react_obs(toks[i][0])
        e = toks[i][1]
        # index of the next token that is this close tag; cached per tag, moves only forward
        j = self.next_tok.get(close, i + 1)
        if 0 <= j <= i:
            j = i + 1
        if j >= 0:
            while j < n and toks[j][2] != close:
                j += 1
            self.next_tok[close] = j if j < n else -1
        if 0 <= j < n:
            self.asm.obs(self.text[e:toks[j][0]])
            return j + 1
        # unclosed (truncated) observation: up to the next call or observation marker
        j = i + 1
        kinds = self.kinds
        while j < n and toks[j][3] is None and kinds[toks[j][2]][0] not in ("qopen", "topen", "oopen"):
            j += 1
        self.asm.obs(self.text[e:toks[j][0] if j < n else len(self.text)])
        return j

    def ends_response(self, s: int, e: int) -> bool:
        """An end-of-sequence token not followed by a new turn or an observation: the response ended."""
        text = self.text
        k = e
        while k < len(text) and text[k] in " \t\r\n":
            k += 1
        if not text.startswith(TURN_STARTS, k) and k < len(text) and not _is_obs_open(text, k):
            self.end_react_obs(s)
            self.asm.done = True  # anything later was never generated for real
            return True
        return False


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
        if tool_key(verb) in asm.search_tools:
            asm.call(_Call("react", [arg] if arg else None))
        elif verb in _ANSWER_TOOLS:
            asm.finish(arg)
        else:  # Lookup, Reflect, Calculator…: a tool call, not a search
            asm.call(_Call("react", [], other=True))
        while nxt < len(toks) and toks[nxt][0] < last:
            nxt += 1
        return nxt
    _action_input(text, verb, k, line_end, asm, nl)
    return nxt


def _action_input(text: str, verb: str, k: int, line_end: int, asm: _Assembler, nl: _Next) -> None:
    """LangChain style: "Action: search" then "Action Input: q" on the next line."""
    rest = text[k:line_end].strip()
    searchy = tool_key(verb) in asm.search_tools
    if searchy and verb != "search":
        verb = "search"
    if verb in ("search", "finish") and not rest:
        ai = text.startswith("Action Input:", line_end + 1)
        if ai:
            a_end = nl.at(line_end + 1)
            arg = text[line_end + 1 + len("Action Input:"):a_end if a_end >= 0 else len(text)].strip()
            if verb == "finish":
                asm.finish(arg)
            else:
                asm.call(_Call("react", [arg.strip('"')] if arg else None))
            return
        asm.call(_Call("react", None))
    elif verb == "search":
        asm.call(_Call("react", None))  # "Action: search Colorado": no brackets


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
