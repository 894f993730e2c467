"""Search calls found by structure anywhere in a record tree, and whether each ran.

A call is an object with a tool / action name field whose value is search-like (``"tool_name": "search"``,
``"action": "search"``, ``"type": "web_search"``) and a field holding its query: a string, a list, or a
JSON-encoded string of an object with a query-like key (OpenAI ``arguments``). What follows the call decides
whether it ran: an output / observation / retrieved documents beside it (or in the next item of its list)
that is results counts; one that is a refusal ("Invalid request format", "Error: Tool … not found") does not;
none at all leaves the call pending (taken as issued only when the run holds no output anywhere).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from searchgym.diversity.readers.assembly import _doc_text, doc_titles
from searchgym.diversity.readers.fields import join
from searchgym.diversity.readers.outcomes import is_refusal
from searchgym.diversity.readers.records import _SEARCH_ARG_KEYS, tool_key

NAME_KEYS = ("tool_name", "tool", "name", "function", "action", "action_type", "tool_type", "type", "kind")
ARG_KEYS = ("arguments", "args", "parameters", "params", "input", "action_input", "tool_input", "argument")
OUT_KEYS = ("output", "observation", "result", "results", "retrieved_documents", "retrieved_docs", "documents",
            "docs", "search_results", "retrieved", "evidence", "passages", "contexts", "tool_output", "response",
            "content")
_NAME_SET = frozenset(NAME_KEYS)
_ACTION_KEYS = ("tool_name", "tool", "action", "action_type", "tool_type", "function")
MAX_DEPTH = 64


@dataclass
class Found:
    """One structured call: its path, queries (None: malformed), the output that followed it (None: none)."""

    path: str
    name: str
    name_key: str
    query_key: str
    queries: list[str] | None
    output: Any = None
    has_output: bool = False
    other: bool = False
    evidence: list[str] = field(default_factory=list)
    titles: list[str] = field(default_factory=list)

    @property
    def refused(self) -> bool:
        return self.has_output and not self.other and _is_refused(self.output)


def searchy(name: str, search_tools: frozenset[str]) -> bool:
    low = name.lower()
    return tool_key(low) in search_tools or "search" in low or "retriev" in low


def _name(node: dict) -> tuple[str | None, str | None]:
    """(key, value) of a node's tool / action name; a ``type`` only when no other name key is there."""
    for k in NAME_KEYS:
        v = node.get(k)
        if isinstance(v, dict) and isinstance(v.get("name"), str):
            return f"{k}.name", v["name"]
        if isinstance(v, str) and v.strip() and len(v) < 80:
            return k, v
    return None, None


_BROKEN = object()  # a string that opens like JSON and is not: a malformed call, never a query


def _decode(v: Any) -> Any:
    if isinstance(v, str) and v.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(v)
        except (ValueError, RecursionError):
            return _BROKEN
    return v


def _queries(v: Any) -> list[str] | None:
    """The queries of a query value: a string, a list of strings, or a JSON-encoded one; None if malformed."""
    v = _decode(v)
    if isinstance(v, str):
        return [v.strip()] if v.strip() else None
    if isinstance(v, list) and v and all(isinstance(q, str) and q.strip() for q in v):
        return [q.strip() for q in v]
    return None


def query_of(v: Any) -> tuple[str, list[str] | None] | None:
    """(key path, queries) of an arguments value: a JSON string / object with a query-like key, or a string."""
    v = _decode(v)
    if v is _BROKEN:
        return "", None
    if isinstance(v, dict):
        k = next((k for k in _SEARCH_ARG_KEYS if k in v), None)
        return (k, _queries(v[k])) if k is not None else None
    if isinstance(v, str):
        return "", _queries(v)
    return None


def _query_field(node: dict, name_key: str) -> tuple[str, list[str] | None] | None:
    for k in _SEARCH_ARG_KEYS:
        if k in node and k != name_key:
            return k, _queries(node[k])
    for k in ARG_KEYS:
        if k in node and k != name_key:
            got = query_of(node[k])
            if got is not None:  # a JSON-encoded string is decoded by --map too: its key is the field
                return (join(k, got[0]) if got[0] and not isinstance(node[k], str) else k), got[1]
    return None


def _is_refused(out: Any) -> bool:
    if isinstance(out, str):
        return is_refusal(out.strip())
    if isinstance(out, dict):
        err = out.get("error")
        return bool(err) and not any(out.get(k) for k in ("results", "documents", "docs"))
    return False


def _evidence(out: Any) -> tuple[list[str], list[str]]:
    """(texts, titles) of an output: a string, a document, or a list of documents."""
    if isinstance(out, str):
        return ([out.strip()] if out.strip() else []), doc_titles(out)
    docs = out if isinstance(out, list) else [out]
    pairs = [_doc_text(d) for d in docs]
    return [t for t, _ in pairs if t], [ti for _, ti in pairs if ti]


def _output(node: dict, used: set[str], nxt: Any) -> tuple[bool, Any]:
    for k in OUT_KEYS:
        if k in node and k not in used:
            return True, node[k]
    if isinstance(nxt, dict) and _name(nxt)[0] is None or (isinstance(nxt, dict) and _is_output_item(nxt)):
        for k in OUT_KEYS:
            if k in nxt:
                return True, nxt[k]
    return False, None


def _is_output_item(node: dict) -> bool:
    t = node.get("type", node.get("role", ""))
    t = t.lower() if isinstance(t, str) else ""
    return "output" in t or "result" in t or t in ("tool", "observation", "function")


def call_at(node: dict[str, Any], path: str, nxt: Any, search_tools: frozenset[str]) -> Found | None:
    """The call this node is, if any (``nxt``: the item after it in its list, which may hold its output)."""
    if _NAME_SET.isdisjoint(node):  # (most nodes: one set operation)
        return None
    nk, name = _name(node)
    if nk is None or _is_output_item(node) and not searchy(name, search_tools):
        return None
    is_search = searchy(name, search_tools)
    if not is_search and nk.split(".")[0] not in _ACTION_KEYS and not any(k in node for k in ARG_KEYS):
        return None  # a name beside a "query" key ({"name": "Ada", "query": …}) is no tool call
    q = _query_field(node, nk.split(".")[0])
    if q is None and not is_search:
        return Found(path, name, nk, "", [], other=True)  # browse, open_url, fetch…: a tool call, not a search
    if q is None:
        if not any(k in node for k in ARG_KEYS):
            return None
        q = (next(k for k in ARG_KEYS if k in node), None)  # a search with arguments that hold no query
    used = {nk.split(".")[0], q[0].split(".")[0]}
    has, out = _output(node, used, nxt)
    f = Found(path, name, nk, q[0], q[1] if is_search else [], out, has, other=not is_search)
    if has and is_search:
        f.evidence, f.titles = _evidence(out)
    return f


def walk(obj: Any, search_tools: frozenset[str]) -> Iterator[tuple[str, Any, Found | None]]:
    """(path, node, call) over a tree in document order; a call's own subtree is not walked again."""
    stack: list[tuple[str, Any, Any, int]] = [("", obj, None, 0)]
    while stack:
        path, node, nxt, depth = stack.pop()
        if depth > MAX_DEPTH:
            continue
        if isinstance(node, dict):
            c = call_at(node, path, nxt, search_tools)
            yield path, node, c
            if c is None:
                stack.extend((join(path, k), v, None, depth + 1) for k, v in reversed(node.items()))
        elif isinstance(node, list):
            n = len(node)
            stack.extend((join(path, i), node[i], node[i + 1] if i + 1 < n else None, depth + 1)
                         for i in range(n - 1, -1, -1))
        else:
            yield path, node, None
