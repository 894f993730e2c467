"""A Search-R1-compatible retrieval server (FastAPI + uvicorn) over any :class:`Retriever`.

Contract (DESIGN.md §2, anchors.md §3)::

    POST /retrieve {"queries": [str], "topk": int|null, "return_scores": bool = false}
      -> {"result": [[{"document": {"id", "contents", "title", "text"}, "score": float}, ...], ...]}
         (with return_scores false the inner items are the documents themselves; the reference
          server crashes there, this one does not)
    POST /retrieve {"query": str, "topk": ..., "return_scores": ...}   (SkyRL's one-query form)
      -> {"result": [[...]]}: the answer for a one-query batch
    POST /retrieve <msgpack map>   (GEM's SearchTool: msgpack body, no Content-Type)
      -> msgpack (Content-Type: application/msgpack); {"query": str} gets GEM's flat
         {"result": [{"document": {...}, "score": float|None}, ...]}, {"queries": [...]} the nested shape
    GET /health -> {"status": "ok"}
    GET /info   -> corpus size, backend, parameters, limits

The hot path is kept lean: the body is read and checked by hand (no pydantic round trip), one
``batch_search`` call answers the whole request, and the response is assembled from per-passage
JSON fragments that are encoded once and cached. Every bad input is a 4xx with ``{"detail": ...}``.

Connections are bounded (:class:`ServerGuards`, enforced by :class:`GuardedHttpToolsProtocol`): an idle
connection is closed after the keep-alive timeout, a request whose headers do not arrive in time gets 408,
headers over the size limit 431, too many connections or requests in flight 503. Large requests are
parsed, searched and rendered on the search pool, so /health answers while they run.
"""

from __future__ import annotations

import asyncio
import hmac
import inspect
import json
import logging
import math
import os
import re
import reprlib
import struct
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, MutableMapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from searchgym.errors import ConfigError, QueryError, RetrieverUnavailableError
from searchgym.retrieval.base import Hit, Passage, Retriever

log = logging.getLogger(__name__)

DEFAULT_MAX_QUERIES = 4096        # Search-R1 sends a whole rollout batch (e.g. 512 x n) in one request
DEFAULT_MAX_QUERY_CHARS = 4096
DEFAULT_MAX_TOPK = 100
DEFAULT_MAX_HITS = 65_536         # queries x topk per request: bounds the response size
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
_DRAIN_LIMIT_FACTOR = 16          # an oversized body is read and discarded up to this many x the limit
_INLINE_BUDGET_S = 0.0005        # searches expected to be shorter than this run on the event loop
_INLINE_MAX_HITS = 512            # ... and render on the event loop only when they return at most this many hits
_INLINE_BODY_BYTES = 64 * 1024    # bodies larger than this are parsed on the search pool
_DOC_CACHE_MAX = 100_000          # encoded documents kept; the cache is cleared when full
DEFAULT_MAX_INFLIGHT = 256        # /retrieve requests in progress at once (until answered); more get 503
DEFAULT_MAX_INFLIGHT_HITS = 16 * DEFAULT_MAX_HITS  # hits of all answers not yet written; more get 503
_STREAM_MIN_HITS = 4096           # answers with more hits are rendered piece by piece as the client reads
_STREAM_CHUNK_HITS = 1024         # hits per piece of a streamed answer
_JSON_MANY_CONTAINERS = 4096 + 64  # "{" + "[" bytes above which a JSON body is decoded one at a time
_HEAVY_PARSE_WAIT_S = 10.0        # ... waiting at most this long for its turn (else 503)

ENV_INDEX_DIR = "SEARCHGYM_SERVE_INDEX"
ENV_TOPK = "SEARCHGYM_SERVE_TOPK"
ENV_API_KEY = "SEARCHGYM_API_KEY"
ENV_API_KEY_FILE = "SEARCHGYM_API_KEY_FILE"  # read by app_from_env only
ENV_SEARCH_THREADS = "SEARCHGYM_SERVE_SEARCH_THREADS"
ENV_LIMITS = "SEARCHGYM_SERVE_LIMITS"  # JSON object of create_app limits, for --workers
LIMIT_NAMES = ("max_queries", "max_query_chars", "max_topk", "max_hits", "max_body_bytes", "max_inflight",
               "max_inflight_hits")

try:  # optional: a faster JSON decoder
    import orjson as _orjson  # type: ignore[import-not-found]

    def _loads(body: bytes) -> Any:
        try:
            return _orjson.loads(body)
        except _orjson.JSONDecodeError:
            # orjson refuses lone surrogate escapes ("\ud800"), which are valid JSON: let json decide
            return json.loads(body)
except ImportError:  # pragma: no cover - depends on the environment
    _loads = json.loads


class _BadRequest(Exception):
    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status, self.detail = status, detail


def _document_json(p: Passage) -> str:
    doc = {"id": p.id, "contents": p.contents, "title": p.title, "text": p.text}
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates in the corpus: keep them escaped
        text = json.dumps(doc, separators=(",", ":"))
    return text


class _Renderer:
    """Builds the /retrieve response bytes from hits.

    Each passage's JSON (``{"document": {...},"score":`` for the scored form) is encoded once and cached
    as text; a response is then a join of cached fragments and score reprs, encoded once."""

    def __init__(self, cache_max: int = _DOC_CACHE_MAX):
        self._docs: dict[str, str] = {}
        self._scored: dict[str, str] = {}
        self._mp_docs: dict[str, dict[str, str]] = {}
        self._cache_max = cache_max

    def _miss(self, hit: Hit) -> tuple[str, str]:
        if len(self._docs) >= self._cache_max:
            self._docs.clear()
            self._scored.clear()
        doc = self._docs[hit.id] = _document_json(hit.passage)
        scored = self._scored[hit.id] = '{"document":' + doc + ',"score":'
        return doc, scored

    def render_chunks(self, results: Sequence[Sequence[Hit]], return_scores: bool, shape: str | None,
                      chunk_hits: int = _STREAM_CHUNK_HITS) -> Iterator[bytes]:
        """The answer of :meth:`render` (``shape`` None) or :meth:`render_msgpack`, as consecutive pieces of
        about ``chunk_hits`` hits each, rendered only as they are asked for: a large answer is never held
        whole, so a client that does not read costs its hit lists and one piece."""
        if shape is None:
            yield from self._json_chunks(results, return_scores, chunk_hits)
        else:
            yield from self._msgpack_chunks(results, return_scores, shape, chunk_hits)

    def _json_chunks(self, results: Sequence[Sequence[Hit]], return_scores: bool,
                     chunk_hits: int) -> Iterator[bytes]:
        yield b'{"result":['
        for qi, hits in enumerate(results):
            for start in range(0, max(1, len(hits)), chunk_hits):
                body = self.render([hits[start:start + chunk_hits]], return_scores)[12:-3]  # the bare items
                head = ("," if qi else "") + "[" if start == 0 else ","
                tail = "]" if start + chunk_hits >= len(hits) else ""
                yield head.encode() + body + tail.encode() if body else (head + tail).encode()
        yield b"]}"

    def _msgpack_chunks(self, results: Sequence[Sequence[Hit]], return_scores: bool, shape: str,
                        chunk_hits: int) -> Iterator[bytes]:
        import msgspec

        yield b"\x81\xa6result"
        rows = results[:1] if shape == FLAT else results
        if shape != FLAT:
            yield _msgpack_array_header(len(rows))
        for hits in rows:
            yield _msgpack_array_header(len(hits))
            for start in range(0, len(hits), chunk_hits):
                part = msgspec.msgpack.encode(self._msgpack_row(hits[start:start + chunk_hits], return_scores,
                                                                shape))
                yield part[len(_msgpack_array_header(min(chunk_hits, len(hits) - start))):]  # the bare items

    def render(self, results: Sequence[Sequence[Hit]], return_scores: bool) -> bytes:
        parts = ['{"result":[']
        append = parts.append
        cache = self._scored if return_scores else self._docs
        for qi, hits in enumerate(results):
            append("[" if qi == 0 else ",[")
            for hi, hit in enumerate(hits):
                frag = cache.get(hit.id)
                if frag is None:
                    frag = self._miss(hit)[1 if return_scores else 0]
                if hi:
                    append(",")
                append(frag)
                if return_scores:
                    score = float(hit.score)
                    append(repr(score) if score - score == 0.0 else "null")  # NaN / inf are not JSON
                    append("}")
            append("]")
        append("]}")
        return "".join(parts).encode("utf-8")

    def _msgpack_row(self, hits: Sequence[Hit], return_scores: bool, shape: str) -> list[Any]:
        docs = self._mp_docs
        row: list[Any] = []
        for hit in hits:
            doc = docs.get(hit.id)
            if doc is None:
                if len(docs) >= self._cache_max:
                    docs.clear()
                p = hit.passage
                doc = docs[hit.id] = {k: _clean_query(v) for k, v in
                                      (("id", p.id), ("contents", p.contents), ("title", p.title),
                                       ("text", p.text))}
            if return_scores:
                score = float(hit.score)
                row.append({"document": doc, "score": score if score - score == 0.0 else None})
            elif shape == FLAT:
                row.append({"document": doc, "score": None})
            else:
                row.append(doc)
        return row

    def render_msgpack(self, results: Sequence[Sequence[Hit]], return_scores: bool, shape: str) -> bytes:
        """msgpack answer: ``FLAT`` is GEM's one-query shape (``{"document", "score"}`` items, score
        ``None`` unless asked for), ``NESTED`` the Search-R1 shape. Non-finite scores become ``None``."""
        import msgspec

        rows = [self._msgpack_row(hits, return_scores, shape) for hits in results]
        return msgspec.msgpack.encode({"result": rows[0] if shape == FLAT else rows})


def _msgpack_array_header(n: int) -> bytes:
    if n < 16:
        return bytes((0x90 | n,))
    if n < 1 << 16:
        return b"\xdc" + struct.pack(">H", n)
    return b"\xdd" + struct.pack(">I", n)


def _clean_query(q: str) -> str:
    """Queries are answered whatever their characters; lone surrogates (valid JSON, invalid UTF-8)
    are replaced so no tokenizer downstream chokes on them."""
    if q.isascii():
        return q
    try:
        q.encode("utf-8")
        return q
    except UnicodeEncodeError:
        return q.encode("utf-8", "replace").decode("utf-8")


class _PlainRepr(reprlib.Repr):
    """A short, bounded ``repr`` of decoded request values: plain data is shown (two levels deep, long strings
    cut), anything else only by its type name, so an error body never shows an object's repr or heap address
    and a deeply nested value cannot recurse."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxstring, self.maxother = 2, 40, 40
        self.maxlist = self.maxdict = self.maxtuple = 4

    def repr1(self, x: Any, level: int) -> str:
        if x is None or isinstance(x, (bool, int, float, str, bytes, list, tuple, dict)):
            return super().repr1(x, level)
        return f"<{type(x).__name__}>"

    def repr_int(self, x: int, level: int) -> str:
        return repr(x) if x.bit_length() <= 128 else f"<int of {x.bit_length()} bits>"


_plain_repr = _PlainRepr()


def _describe(value: Any) -> str:
    text = _plain_repr.repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_request(body: bytes, *, default_topk: int, max_queries: int, max_query_chars: int,
                  max_topk: int, max_hits: int) -> tuple[list[str], int, bool, bool]:
    """Check a /retrieve body; returns ``(queries, topk, return_scores, allow_partial)`` or raises
    ``_BadRequest``."""
    if not body:
        raise _BadRequest(400, 'empty body: send JSON {"queries": [str], "topk": int|null, '
                               '"return_scores": bool}')
    try:
        data = _loads(body)
    except (ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError are ValueErrors
        raise _BadRequest(400, f"malformed JSON body: {e}") from None
    if isinstance(data, dict) and _nested_deeper(data, MAX_JSON_DEPTH):
        raise _BadRequest(400, f"JSON body nested more than {MAX_JSON_DEPTH} levels deep")
    return _validate(data, default_topk=default_topk, max_queries=max_queries, max_query_chars=max_query_chars,
                     max_topk=max_topk, max_hits=max_hits)


MAX_JSON_DEPTH = 64  # a request is 3 levels deep; deeper bodies are refused (the decoders' own limits are ~1,000)


def _nested_deeper(data: dict[str, Any], limit: int) -> bool:
    """Whether a value other than ``queries`` nests lists/objects more than ``limit`` deep (``_validate`` refuses
    anything but strings inside ``queries``). Depth-first over iterators: memory grows with the depth, not with
    the number of items, and a normal request (no other containers) costs a few comparisons."""
    for key, value in data.items():
        if key == "queries" or not isinstance(value, (list, dict)):
            continue
        stack = [iter(value.values() if isinstance(value, dict) else value)]
        while stack:
            if len(stack) + 1 > limit:
                return True
            for item in stack[-1]:
                if isinstance(item, (list, dict)):
                    stack.append(iter(item.values() if isinstance(item, dict) else item))
                    break
            else:
                stack.pop()
    return False


_MSGPACK_TYPES = frozenset((b"application/msgpack", b"application/x-msgpack", b"application/vnd.msgpack"))
_MSGPACK_MAP_FIRST = frozenset([*range(0x80, 0x90), 0xDE, 0xDF])  # fixmap, map16, map32
_MSGPACK_HEADERS = [(b"content-type", b"application/msgpack")]
FLAT, NESTED = "flat", "nested"  # the two msgpack answer shapes


def is_msgpack(body: bytes, content_type: bytes | None) -> bool:
    """A msgpack map (JSON bodies start with ``{`` or whitespace) or a msgpack Content-Type."""
    if content_type is not None and content_type.split(b";", 1)[0].strip().lower() in _MSGPACK_TYPES:
        return True
    return bool(body) and body[0] in _MSGPACK_MAP_FIRST


_MAX_REQUEST_KEYS = 64  # a request has four meaningful keys; more is refused before any value is decoded
# What each known key may decode to: scalars only (plus a bounded list of scalars for "queries"), so a body
# of millions of empty maps or arrays is refused at its first item instead of being built in memory (an
# 8 MB msgpack body of empty maps decoded untyped takes ~590 MB).
_WRONG = {"query": '"query" must be a string, got {what}',
          "queries": '"queries" must be a list of strings, got {what}',
          "topk": '"topk" must be a positive integer or null, got {what}',
          "return_scores": '"return_scores" must be true or false, got {what}',
          "allow_partial": '"allow_partial" must be true or false, got {what}'}
_typed: dict[int, dict[str, Any]] = {}


def _field_types(max_queries: int) -> dict[str, Any]:
    types = _typed.get(max_queries)
    if types is None:
        import msgspec

        scalar = str | int | float | bool | None
        queries = Annotated[list[scalar], msgspec.Meta(max_length=max_queries)] | scalar  # type: ignore[valid-type]
        types = _typed[max_queries] = {"query": scalar, "topk": scalar, "return_scores": scalar, "allow_partial": scalar,
                                       "queries": queries,
                                       "": Annotated[dict[Any, msgspec.Raw], msgspec.Meta(max_length=_MAX_REQUEST_KEYS)]}
    return types


def _msgpack_kind(raw: bytes) -> str:
    """The msgpack type of an encoded value, from its first byte (for error messages)."""
    b = raw[0] if raw else 0xC1
    if b <= 0x7F or b >= 0xE0 or 0xCC <= b <= 0xD3:
        return "a msgpack integer"
    if 0x80 <= b <= 0x8F or b in (0xDE, 0xDF):
        return "a msgpack map"
    if 0x90 <= b <= 0x9F or b in (0xDC, 0xDD):
        return "a msgpack array"
    if 0xC4 <= b <= 0xC6:
        return "a msgpack bin (bytes)"
    if 0xC7 <= b <= 0xC9 or 0xD4 <= b <= 0xD8:
        return "a msgpack extension type"
    return "a msgpack value"


def _json_kind(raw: bytes) -> str:
    b = raw.lstrip()[:1]
    return {b"{": "an object", b"[": "an array", b'"': "a string"}.get(b, "a number, boolean or null")


def _decode_typed(body: bytes, decode: Any, kind: Any, fmt: str, max_queries: int) -> dict[Any, Any]:
    """The request map, decoded in two typed steps (``decode`` is ``msgspec.msgpack.decode`` or
    ``msgspec.json.decode``): the top map with its values left encoded (``msgspec.Raw``, at most 64 keys), then
    only the four known keys, each into scalars (or a list of at most ``max_queries`` scalars). Unknown keys
    are never decoded, and no value can expand into millions of objects. Raises ``_BadRequest``; a body
    ``decode`` cannot parse raises ``msgspec.DecodeError``."""
    import msgspec

    types = _field_types(max_queries)
    try:
        top = decode(body, type=types[""])
    except msgspec.ValidationError as e:
        if "length <=" in str(e):
            raise _BadRequest(413, f"the {fmt} request map has more than {_MAX_REQUEST_KEYS} keys") from None
        raise _BadRequest(422, f'the body must be a {fmt} map {{"query": str}} or {{"queries": [str]}}, got '
                               f"{kind(body)}") from None
    data: dict[Any, Any] = {}
    for key, raw in top.items():
        if key not in _WRONG:
            data[key] = None  # present, never decoded (only its presence could matter)
            continue
        try:
            data[key] = decode(raw, type=types[key])
        except msgspec.ValidationError as e:
            if key == "queries" and "length <=" in str(e):
                raise _BadRequest(413, f"more than {max_queries} queries in one request; the limit is "
                                       f"{max_queries} (split the batch, or raise --max-queries)") from None
            what = kind(bytes(raw))
            if key == "queries" and what.endswith("array"):
                raise _BadRequest(422, f'"queries" must be a list of strings; an item is a {fmt} map, array or '
                                       "other non-string value") from None
            raise _BadRequest(422, _WRONG[key].format(what=what)) from None
    return data


def parse_msgpack_request(body: bytes, *, default_topk: int, max_queries: int, max_query_chars: int,
                          max_topk: int, max_hits: int) -> tuple[list[str], int, bool, str, bool]:
    """Like :func:`parse_request` for a msgpack body (GEM's SearchTool); also returns the answer shape:
    ``FLAT`` for the one-query ``{"query": str}`` form (GEM's own server answers it flat), else ``NESTED``.
    Decoded typed (:func:`_decode_typed`): unknown keys are never decoded."""
    if not body:
        raise _BadRequest(400, 'empty body: send a msgpack map {"query": str, "topk": int|null, '
                               '"return_scores": bool}')
    try:
        import msgspec
    except ImportError:
        raise _BadRequest(415, "msgpack bodies need msgspec on the server: pip install msgspec "
                               "(or send JSON)") from None
    try:
        data = _decode_typed(body, msgspec.msgpack.decode, _msgpack_kind, "msgpack", max_queries)
    except (msgspec.MsgspecError, ValueError, TypeError, RecursionError) as e:  # TypeError: a map as a key
        raise _BadRequest(400, f"malformed msgpack body: {e}") from None
    queries, topk, return_scores, partial = _validate(data, default_topk=default_topk, max_queries=max_queries,
                                                      max_query_chars=max_query_chars, max_topk=max_topk,
                                                      max_hits=max_hits)
    flat = data.get("query") is not None
    return queries, topk, return_scores, FLAT if flat else NESTED, partial


def parse_json_request_typed(body: bytes, *, default_topk: int, max_queries: int, max_query_chars: int,
                             max_topk: int, max_hits: int) -> tuple[list[str], int, bool, bool] | None:
    """:func:`parse_request` for a JSON body of many objects, decoded typed like msgpack (a body of millions
    of ``{}`` is refused at its first item, in microseconds, without building them). None when msgspec is
    missing or cannot decode the body (it refuses lone surrogate escapes, which are valid JSON): the caller
    then decodes it in full."""
    if body.lstrip()[:1] != b"{":
        return None  # not an object: the full decoder words the error (as for any JSON body)
    try:
        import msgspec
    except ImportError:
        return None
    try:
        data = _decode_typed(body, msgspec.json.decode, _json_kind, "JSON", max_queries)
    except (msgspec.MsgspecError, ValueError, TypeError, RecursionError):
        return None
    return _validate(data, default_topk=default_topk, max_queries=max_queries, max_query_chars=max_query_chars,
                     max_topk=max_topk, max_hits=max_hits)


def _validate(data: Any, *, default_topk: int, max_queries: int, max_query_chars: int,
              max_topk: int, max_hits: int) -> tuple[list[str], int, bool, bool]:
    if not isinstance(data, dict):
        raise _BadRequest(422, f'the body must be a JSON object {{"queries": [...]}}, got {type(data).__name__}')
    queries = data.get("queries")
    query = data.get("query")
    if query is not None:  # SkyRL's / GEM's search tools post one query string
        if queries is not None:
            raise _BadRequest(422, 'send either "queries" (a list of strings) or "query" (one string), not both')
        if not isinstance(query, str):
            raise _BadRequest(422, f'"query" must be a string, got {type(query).__name__} {_describe(query)}')
        queries = [query]
    if queries is None:
        raise _BadRequest(422, '"queries" is required: a list of strings (or "query": one string)')
    if not isinstance(queries, list):
        raise _BadRequest(422, f'"queries" must be a list of strings, got {type(queries).__name__} '
                               f"{_describe(queries)}")
    if not queries:
        raise _BadRequest(422, '"queries" is empty: send at least one query')
    if len(queries) > max_queries:
        raise _BadRequest(413, f'{len(queries)} queries in one request; the limit is {max_queries} '
                               "(split the batch, or raise --max-queries)")
    for i, q in enumerate(queries):
        if not isinstance(q, str):
            raise _BadRequest(422, f"queries[{i}] must be a string, got {type(q).__name__} {_describe(q)}")
        if len(q) > max_query_chars:
            raise _BadRequest(422, f"queries[{i}] has {len(q):,} characters; the limit is "
                                   f"{max_query_chars:,}")
    queries = [_clean_query(q) for q in queries]

    topk = _topk(data.get("topk"), default_topk, max_topk)
    if len(queries) * topk > max_hits:
        raise _BadRequest(413, f"{len(queries)} queries x topk {topk} = {len(queries) * topk:,} results; "
                               f"the limit is {max_hits:,} per request (send fewer queries)")

    return queries, topk, _flag(data, "return_scores"), _flag(data, "allow_partial")


def _topk(topk: Any, default_topk: int, max_topk: int) -> int:
    if topk is None:
        return default_topk
    if isinstance(topk, bool) or not isinstance(topk, int):
        raise _BadRequest(422, f'"topk" must be a positive integer or null, got {_describe(topk)}')
    if topk <= 0 or topk > max_topk:
        raise _BadRequest(422, f'"topk" must be between 1 and {max_topk}, got {topk}')
    return topk


def _flag(data: dict[str, Any], key: str) -> bool:
    """A true/false field (absent or null: false). ``allow_partial``: a sharded server (``serve-ray``) answers
    with the shards that are up and names the others in ``missing_shards`` instead of a 503."""
    value = data.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _BadRequest(422, f'"{key}" must be true or false, got {_describe(value)}')
    return value


def retriever_info(retriever: Any, index_dir: str | Path | None = None) -> dict[str, Any]:
    """What /info reports: corpus size, backend and parameters, from the index dir when known."""
    meta: dict[str, Any] = {}
    if index_dir is not None:
        try:
            from searchgym.retrieval.index import index_info

            meta = dict(index_info(index_dir))
        except Exception:  # noqa: BLE001 - /info is best effort; the server still answers /retrieve
            meta = {}
    size = None
    passages = getattr(retriever, "passages", None)
    if passages is not None:
        try:
            size = len(passages)
        except TypeError:
            size = None
    if size is None and isinstance(meta.get("n_passages"), int):
        size = meta["n_passages"]
    parts = meta.get("backends") if isinstance(meta.get("backends"), dict) else {}
    backend = getattr(retriever, "backend", None)
    if not isinstance(backend, str):
        backend = "+".join(sorted(parts)) or type(retriever).__name__
    params = getattr(retriever, "params", None)
    if not isinstance(params, dict):
        params = parts
    return {"corpus_size": size, "backend": backend, "retriever": type(retriever).__name__,
            "parameters": params, "index_dir": None if index_dir is None else str(index_dir),
            "index": {k: meta[k] for k in ("format_version", "created", "corpus_fingerprint", "backends")
                      if k in meta}}


_JSON_HEADERS = [(b"content-type", b"application/json")]
_UNAUTHORIZED = (401, json.dumps({"detail": "missing or wrong bearer token: send 'Authorization: Bearer <key>'"})
                 .encode(), [(b"www-authenticate", b"Bearer")])


class _Disconnected(Exception):
    """The client went away before its body arrived."""


class _RetrieveHandler:
    """POST /retrieve, independent of the web framework: headers + body chunks in, (status, body, headers) out."""

    def __init__(self, retriever: Retriever, *, default_topk: int, api_key: str | None, max_queries: int,
                 max_query_chars: int, max_topk: int, max_hits: int, max_body_bytes: int, threadpool: bool,
                 max_inflight: int = DEFAULT_MAX_INFLIGHT, max_inflight_hits: int = DEFAULT_MAX_INFLIGHT_HITS):
        self.retriever = retriever
        self.limits = {"default_topk": default_topk, "max_queries": max_queries,
                       "max_query_chars": max_query_chars, "max_topk": max_topk, "max_hits": max_hits}
        self.max_body_bytes = max_body_bytes
        self.max_inflight = max_inflight
        self.inflight = 0  # /retrieve requests between their headers and their answer (event-loop thread only)
        self.expected = f"Bearer {api_key}".encode() if api_key else None
        self.max_inflight_hits = max_inflight_hits
        self.inflight_hits = 0  # hits of the streamed answers not yet fully sent (any thread, under the lock)
        self._hits_lock = threading.Lock()
        self._container_heavy = threading.Semaphore(1)
        self.renderer = _Renderer()
        # Searches run on a small pool (one request per core at a time) so a long batch never blocks the
        # event loop; a search expected to take less than _INLINE_BUDGET_S runs inline, which saves two
        # thread switches (measured ~20-30% less server CPU per single-query request on BM25). Large
        # requests are also parsed and rendered there: one maximal request rendered on the loop held
        # /health for 0.9 s.
        self.pool = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2),
                                       thread_name_prefix="searchgym-search") if threadpool else None
        self.per_query_s = math.inf  # seconds per query, learned from the searches served
        self._recent: deque[float] = deque(maxlen=9)
        self._recent_lock = threading.Lock()

    def _timed_search(self, queries: list[str], topk: int, allow_partial: bool = False
                      ) -> tuple[list[list[Hit]], list[Any] | None]:
        """The hits, and (when the request allows a partial answer) the shards missing from them: none for a
        retriever that cannot answer partially (it answers in full or not at all)."""
        t = time.perf_counter()
        partial = getattr(self.retriever, "batch_search_partial", None) if allow_partial else None
        if partial is not None:
            results, missing = partial(queries, topk)
        else:
            results, missing = self.retriever.batch_search(queries, topk), []
        # the median of recent searches: robust to one slow call (a JIT compile, a GC pause)
        with self._recent_lock:  # pool threads and the event loop both get here
            recent = self._recent
            recent.append((time.perf_counter() - t) / len(queries))
            self.per_query_s = sorted(recent)[len(recent) // 2]
        return results, (missing if allow_partial else None)

    def _answer(self, queries: list[str], topk: int, return_scores: bool, shape: str | None,
                allow_partial: bool = False) -> Answer:
        """Search, then render a small answer now; a large one is claimed against ``max_inflight_hits`` and
        returned as a :class:`_Streamed` answer, rendered piece by piece as it is sent."""
        n_hits = len(queries) * topk
        if n_hits <= _STREAM_MIN_HITS:
            results, missing = self._timed_search(queries, topk, allow_partial)
            if shape is None:
                return _with_missing(self.renderer.render(results, return_scores), missing, shape)
            return _with_missing(self.renderer.render_msgpack(results, return_scores, shape), missing, shape)
        with self._hits_lock:
            if self.inflight_hits + n_hits > self.max_inflight_hits:
                raise _BadRequest(503, f"server busy: answers of {self.inflight_hits:,} results are being "
                                       f"sent, the limit is {self.max_inflight_hits:,}; retry after a moment")
            self.inflight_hits += n_hits
        streamed = _Streamed(self, n_hits)
        try:
            results, missing = self._timed_search(queries, topk, allow_partial)
        except BaseException:
            streamed.close()
            raise
        streamed.chunks = _chunks_with_missing(self.renderer.render_chunks(results, return_scores, shape), missing,
                                               shape)
        return streamed

    def _release_hits(self, n_hits: int) -> None:
        with self._hits_lock:
            self.inflight_hits -= n_hits

    def _parse(self, body: bytes, msgpack: bool) -> tuple[list[str], int, bool, str | None, bool]:
        """``(queries, topk, return_scores, shape, allow_partial)``."""
        if msgpack:
            return parse_msgpack_request(body, **self.limits)
        if len(body) > _INLINE_BODY_BYTES and body.count(b"{") + body.count(b"[") > _JSON_MANY_CONTAINERS:
            # A JSON body of millions of empty objects decodes to ~30x its size (8 MB: ~250 MB, and ~0.5 s with
            # the GIL held). A normal request holds a handful of containers; bodies with many are decoded
            # typed (refused at their first wrong item), or, where that decoder cannot, one at a time, so
            # several at once cost one decode's memory, not their sum.
            typed = parse_json_request_typed(body, **self.limits)
            if typed is not None:
                return _with_shape(typed, None)
            if not self._container_heavy.acquire(timeout=_HEAVY_PARSE_WAIT_S):
                raise _BadRequest(503, "server busy decoding another JSON body of many objects; retry after a "
                                       "moment")
            try:
                try:
                    return _with_shape(parse_request(body, **self.limits), None)
                except _BadRequest as e:
                    failure = (e.status, e.detail)
                # leaving the except clause dropped the traceback, and with it the decoded body: freed before
                # the next heavy body may start
                raise _BadRequest(*failure)
            finally:
                self._container_heavy.release()
        return _with_shape(parse_request(body, **self.limits), None)

    def _parse_and_answer(self, body: bytes, msgpack: bool = False) -> Answer:
        return self._answer(*self._parse(body, msgpack))

    def authorized(self, authorization: bytes | None) -> bool:
        return self.expected is None or hmac.compare_digest(authorization or b"", self.expected)

    async def read_body(self, content_length: bytes | None, chunks: AsyncIterator[bytes]) -> bytes:
        """The body, at most ``max_body_bytes``: refused by Content-Length, else while streaming.

        An oversized body is still read (and dropped) up to a bound, so the client gets the 413
        instead of a reset connection."""
        limit = self.max_body_bytes
        too_big = False
        if content_length is not None:
            try:
                too_big = int(content_length) > limit
            except ValueError:
                raise _BadRequest(400, f"bad Content-Length header {content_length!r}") from None
        parts: list[bytes] = []
        size = 0
        async for chunk in chunks:
            size += len(chunk)
            if too_big or size > limit:
                too_big = True
                parts.clear()
                if size > _DRAIN_LIMIT_FACTOR * limit:
                    break
            else:
                parts.append(chunk)
        if too_big:
            sent = content_length.decode() if content_length else "more than that"
            raise _BadRequest(413, f"request body over the {limit:,}-byte limit ({sent} bytes sent)")
        return b"".join(parts)

    async def _in_pool(self, gone: Callable[[], Awaitable[Any]] | None, fn: Callable[..., Answer], *args: Any
                       ) -> Answer:
        """``fn(*args)`` on the search pool. When ``gone`` (which returns once the client has disconnected)
        returns first, a search still waiting for a thread is dropped and never runs, and :class:`_Disconnected`
        is raised: a client that timed out and retried leaves no abandoned search queued ahead of its retry. A
        search already running finishes and its answer is released."""
        assert self.pool is not None
        cf = self.pool.submit(fn, *args)
        fut = asyncio.wrap_future(cf)
        if gone is None:
            return await fut
        watcher = asyncio.ensure_future(gone())
        try:
            await asyncio.wait((fut, watcher), return_when=asyncio.FIRST_COMPLETED)
        finally:
            watcher.cancel()
        if fut.done():
            return fut.result()
        if not cf.cancel():  # running: drop its answer when it comes
            fut.add_done_callback(_discard_answer)
        raise _Disconnected

    async def __call__(self, authorization: bytes | None, content_length: bytes | None,
                       chunks: AsyncIterator[bytes], content_type: bytes | None = None,
                       gone: Callable[[], Awaitable[Any]] | None = None,
                       ) -> tuple[int, Answer, list[tuple[bytes, bytes]]]:
        """(status, body, extra headers); a msgpack answer's headers start with its Content-Type.

        A large answer comes back as a :class:`_Streamed` body: the request stays counted in ``max_inflight``
        (and its hits in ``max_inflight_hits``) until the caller has sent it and closed it. ``gone``, when
        given, returns once the client has disconnected (see :meth:`_in_pool`)."""
        if not self.authorized(authorization):
            return _UNAUTHORIZED
        if self.inflight >= self.max_inflight:
            return (503, _detail(f"server busy: {self.inflight} requests in flight, the limit is "
                                 f"{self.max_inflight}; retry after a moment"), [(b"retry-after", b"1")])
        self.inflight += 1
        answer: Answer = b""
        try:
            body = await self.read_body(content_length, chunks)
            # JSON bodies start with "{": one slice and compare, then the JSON path as before
            msgpack = (body[:1] != b"{" or (content_type is not None and content_type != b"application/json")) \
                and is_msgpack(body, content_type)
            ok = _MSGPACK_HEADERS if msgpack else []
            pool = self.pool
            if pool is not None and len(body) > _INLINE_BODY_BYTES:  # parsing a large body takes a while too
                answer = await self._in_pool(gone, self._parse_and_answer, body, msgpack)
                return 200, answer, ok
            queries, topk, return_scores, shape, partial = self._parse(body, msgpack)
            if pool is None or (self.per_query_s * len(queries) <= _INLINE_BUDGET_S
                                and len(queries) * topk <= _INLINE_MAX_HITS):
                answer = self._answer(queries, topk, return_scores, shape, partial)
            else:
                answer = await self._in_pool(gone, self._answer, queries, topk, return_scores, shape, partial)
            return 200, answer, ok
        except _BadRequest as e:
            return e.status, _detail(e.detail), [(b"retry-after", b"1")] if e.status == 503 else []
        except QueryError as e:
            return 422, _detail(str(e)), []
        except RetrieverUnavailableError as e:  # a shard is down (serve-ray): say which, the client may retry
            return 503, _detail(str(e)), [(b"retry-after", b"1")]
        finally:
            if isinstance(answer, _Streamed):
                answer.release_inflight = self._release_inflight  # the sender releases it once sent
            else:
                self.inflight -= 1

    def _release_inflight(self) -> None:
        self.inflight -= 1


def _with_shape(parsed: tuple[list[str], int, bool, bool], shape: str | None
                ) -> tuple[list[str], int, bool, str | None, bool]:
    queries, topk, return_scores, partial = parsed
    return queries, topk, return_scores, shape, partial


_MISSING_KEY = "missing_shards"


def _missing_tail(missing: list[Any], shape: str | None) -> bytes:
    """The ``missing_shards`` entry appended to an answer's top-level map (JSON text or msgpack key + value)."""
    if shape is None:
        return b',"' + _MISSING_KEY.encode() + b'":' + json.dumps(missing, separators=(",", ":")).encode() + b"}"
    import msgspec

    return msgspec.msgpack.encode(_MISSING_KEY) + msgspec.msgpack.encode(missing)


def _with_missing(body: bytes, missing: list[Any] | None, shape: str | None) -> bytes:
    """``body`` (``{"result": ...}``) with ``"missing_shards": missing`` added when the request allowed a partial
    answer (``missing`` not None); else unchanged."""
    if missing is None:
        return body
    if shape is None:
        return body[:-1] + _missing_tail(missing, shape)
    return b"\x82" + body[1:] + _missing_tail(missing, shape)  # the map {"result"} (fixmap of 1) gets a 2nd key


def _chunks_with_missing(chunks: Iterator[bytes], missing: list[Any] | None, shape: str | None) -> Iterator[bytes]:
    """:func:`_with_missing` for a streamed answer: its first piece opens the map, its last closes it."""
    if missing is None:
        yield from chunks
        return
    prev: bytes | None = None
    for i, chunk in enumerate(chunks):
        if i == 0 and shape is not None:
            chunk = b"\x82" + chunk[1:]
        if prev is not None:
            yield prev
        prev = chunk
    last = prev or b""
    yield last[:-1] + _missing_tail(missing, shape) if shape is None else last + _missing_tail(missing, shape)


class _Streamed:
    """A large /retrieve answer: an iterator of rendered pieces, holding its request's place in the in-flight
    limits until :meth:`close` (the sender calls it when the answer is sent, or the client is gone)."""

    def __init__(self, handler: _RetrieveHandler, n_hits: int):
        self.handler, self.n_hits = handler, n_hits
        self.chunks: Iterator[bytes] = iter(())
        self.release_inflight: Any = None
        self._closed = False

    def __iter__(self) -> Iterator[bytes]:
        return self.chunks

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.chunks = iter(())
        self.handler._release_hits(self.n_hits)
        if self.release_inflight is not None:
            self.release_inflight()


Answer = bytes | _Streamed


def _discard_answer(fut: asyncio.Future[Answer]) -> None:
    """The answer of a search whose client left while it ran: release what it holds."""
    if not fut.cancelled() and fut.exception() is None and isinstance(fut.result(), _Streamed):
        fut.result().close()


def _detail(text: str) -> bytes:
    return json.dumps({"detail": text}).encode()


def _internal_error(exc: BaseException) -> bytes:
    """A 500's body: the exception's type only (its text may hold reprs or paths; it goes to the log)."""
    return _detail(f"internal error ({type(exc).__name__}); the server log has the details")


class RetrievalApp(FastAPI):
    """FastAPI, with ``POST /retrieve`` answered straight from the ASGI call (no middleware, routing or
    dependency resolution on the hot path). Every other request goes through FastAPI as usual."""

    retrieve_handler: _RetrieveHandler

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] == "/retrieve":
            await self._retrieve(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)

    async def _retrieve(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        authorization = content_length = content_type = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value
            elif name == b"content-length":
                content_length = value
            elif name == b"content-type":
                content_type = value

        async def chunks() -> AsyncIterator[bytes]:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise _Disconnected
                yield message.get("body", b"")
                if not message.get("more_body", False):
                    return

        async def gone() -> None:  # returns once the client has disconnected (the body has been read by then)
            while (await receive())["type"] != "http.disconnect":
                pass

        try:
            status, body, headers = await self.retrieve_handler(authorization, content_length, chunks(),
                                                                content_type, gone)
        except _Disconnected:
            return
        except Exception as exc:
            log.exception("POST /retrieve failed")
            status, body, headers = 500, _internal_error(exc), []
        typed = _JSON_HEADERS if not headers or headers[0][0] != b"content-type" else ()
        if isinstance(body, _Streamed):
            # chunked: each piece is rendered only once the previous one has drained (uvicorn's send waits
            # while the transport is over its high-water mark; the write timeout closes a client that stops)
            try:
                await send({"type": "http.response.start", "status": status, "headers": [*typed, *headers]})
                for piece in body:
                    await send({"type": "http.response.body", "body": piece, "more_body": True})
                await send({"type": "http.response.body", "body": b""})
            finally:
                body.close()
            return
        await send({"type": "http.response.start", "status": status,
                    "headers": [*typed, (b"content-length", str(len(body)).encode()), *headers]})
        await send({"type": "http.response.body", "body": body})


def create_app(retriever: Retriever, *, default_topk: int = 3, api_key: str | None = None,
               max_queries: int = DEFAULT_MAX_QUERIES, max_query_chars: int = DEFAULT_MAX_QUERY_CHARS,
               max_topk: int = DEFAULT_MAX_TOPK, max_hits: int = DEFAULT_MAX_HITS,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, info: dict[str, Any] | None = None,
               threadpool: bool = True, max_inflight: int = DEFAULT_MAX_INFLIGHT,
               max_inflight_hits: int = DEFAULT_MAX_INFLIGHT_HITS) -> FastAPI:
    """The FastAPI app serving ``retriever``.

    ``threadpool``: run ``batch_search`` on a small thread pool (keeps the event loop and /health
    answering during a long batch), except searches expected to take under 0.5 ms, which run inline;
    ``False`` runs every search on the event loop. ``api_key``: require
    ``Authorization: Bearer <key>`` on /retrieve and /info (/health stays open for probes).
    ``max_inflight``: /retrieve requests in progress at once, counted until their answer is written; one more
    is answered 503 with Retry-After. ``max_inflight_hits``: results of the large answers (over 4,096 hits,
    streamed piece by piece) being sent at once; a large request over it is answered 503 likewise.
    """
    if not 1 <= default_topk <= max_topk:
        raise ValueError(f"default_topk must be between 1 and max_topk={max_topk}, got {default_topk}")
    handler = _RetrieveHandler(retriever, default_topk=default_topk, api_key=api_key, max_queries=max_queries,
                               max_query_chars=max_query_chars, max_topk=max_topk, max_hits=max_hits,
                               max_body_bytes=max_body_bytes, threadpool=threadpool, max_inflight=max_inflight,
                               max_inflight_hits=max_inflight_hits)
    limits = {k: v for k, v in handler.limits.items() if k != "default_topk"}
    info_body = {**(info if info is not None else retriever_info(retriever)),
                 "default_topk": default_topk,
                 "limits": {**limits, "max_body_bytes": max_body_bytes, "max_inflight": max_inflight,
                            "max_inflight_hits": max_inflight_hits},
                 "auth": api_key is not None}

    kwargs: dict[str, Any] = {}
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters:  # newer FastAPI: no tracing overhead
        kwargs["telemetry"] = {"tracing": False, "metrics": False, "logs": False, "operation_spans": False}
    app = RetrievalApp(title="searchgym retrieval server", docs_url=None, redoc_url=None, openapi_url=None,
                       **kwargs)
    app.retrieve_handler = handler

    def respond(status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> Response:
        return Response(body, status_code=status, media_type="application/json",
                        headers={k.decode(): v.decode() for k, v in headers})

    @app.post("/retrieve")
    async def retrieve(request: Request) -> Response:
        # Reached only when the app is wrapped or mounted (the fast path above answers otherwise).
        h = request.headers
        try:
            status, body, headers = await handler(h.get("authorization", "").encode("latin-1") or None,
                                          (h.get("content-length") or "").encode() or None, request.stream(),
                                          h.get("content-type", "").encode("latin-1") or None)
            if isinstance(body, _Streamed):  # mounted apps answer whole (FastAPI's Response)
                streamed = body
                try:
                    body = b"".join(streamed)
                finally:
                    streamed.close()
            return respond(status, body, headers)
        except _Disconnected:
            return respond(400, _detail("client disconnected"), [])

    @app.get("/health")
    async def health() -> Response:
        return JSONResponse({"status": "ok"})

    @app.get("/info")
    async def info_route(request: Request) -> Response:
        if not handler.authorized(request.headers.get("authorization", "").encode("latin-1") or None):
            return respond(*_UNAUTHORIZED)
        return JSONResponse(info_body)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> Response:
        return respond(500, _internal_error(exc), [])

    return app


def _warm_up(retriever: Retriever) -> None:
    """One search before serving, so a JIT backend (numba) compiles before the first client waits."""
    warmup = getattr(retriever, "warmup", None)
    if callable(warmup):
        warmup()
    retriever.batch_search(["warm up the index"], 1)


def load_app(index_dir: str | Path, *, topk: int = 3, api_key: str | None = None, search_threads: int = 1,
             **limits: Any) -> FastAPI:
    """Load the index in ``index_dir``, warm it up, and return the app.

    ``search_threads``: threads one ``batch_search`` may use (BM25's numba kernel). 1 is the default: the
    server gets its parallelism from concurrent requests on its search pool, and on a small machine a
    parallel kernel competes with the event loop (measured several times slower on 2 busy cores)."""
    from searchgym.retrieval.index import load_index

    retriever = load_index(index_dir)
    if search_threads and isinstance(getattr(retriever, "n_threads", None), int):
        retriever.n_threads = search_threads
    _warm_up(retriever)
    return create_app(retriever, default_topk=topk, api_key=api_key,
                      info=retriever_info(retriever, index_dir), **limits)


def app_from_env() -> FastAPI:
    """uvicorn factory for running under uvicorn's own CLI (``uvicorn --factory ...:app_from_env``): the index
    and limits come from the environment; the key from ``SEARCHGYM_API_KEY_FILE`` (a path) or
    ``SEARCHGYM_API_KEY``. ``serve(workers=N)`` does not use this: it hands workers an :class:`AppFactory`."""
    index_dir = os.environ.get(ENV_INDEX_DIR)
    if not index_dir:
        raise RuntimeError(f"{ENV_INDEX_DIR} is not set; start the server with `searchgym serve INDEX_DIR`")
    key_file = os.environ.get(ENV_API_KEY_FILE)
    api_key = read_api_key_file(key_file) if key_file else os.environ.get(ENV_API_KEY) or None
    warning = api_key_file_warning(key_file) if key_file else None
    if warning:
        log.warning(warning)
    return load_app(index_dir, topk=int(os.environ.get(ENV_TOPK, "3")), api_key=api_key,
                    search_threads=int(os.environ.get(ENV_SEARCH_THREADS, "1")),
                    **json.loads(os.environ.get(ENV_LIMITS) or "{}"))


def read_api_key_file(path: str | Path) -> str:
    """The key in ``path`` (surrounding whitespace dropped); ``ConfigError`` when unreadable or empty."""
    try:
        key = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read the API key file {path}: {e}") from None
    if not key:
        raise ConfigError(f"the API key file {path} is empty")
    return key


def api_key_file_warning(path: str | Path) -> str | None:
    """A warning when the key file is readable or writable by other users (mode ``& 0o077``), else None."""
    try:
        mode = Path(path).stat().st_mode & 0o777
    except OSError:
        return None
    if mode & 0o077:
        return (f"the API key file {path} has permissions {mode:04o}: other local users can read it; "
                f"chmod 600 {path}")
    return None


class AppFactory:
    """What each ``--workers`` process calls to build its app. uvicorn pickles it into the worker through
    the multiprocessing spawn pipe, so the key reaches workers without touching their environment or argv."""

    def __init__(self, index_dir: str, topk: int, api_key: str | None, search_threads: int,
                 limits: dict[str, int]):
        self.index_dir, self.topk, self.search_threads, self.limits = index_dir, topk, search_threads, limits
        self._api_key = api_key

    def __call__(self) -> FastAPI:
        return load_app(self.index_dir, topk=self.topk, api_key=self._api_key,
                        search_threads=self.search_threads, **self.limits)

    def __repr__(self) -> str:  # never show the key in a log line
        return f"AppFactory({self.index_dir!r}, auth={self._api_key is not None})"


# --- connection guards -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ServerGuards:
    """Bounds on connections, enforced by :class:`GuardedHttpToolsProtocol`.

    ``keep_alive_s``: an idle connection (new, or between requests) is closed after this long;
    ``header_s``: the request line and headers must arrive within this long of their first byte (else 408);
    ``body_s``: the body within this long of the headers (else 408); ``max_header_bytes``: larger heads are
    answered 431; ``max_connections``: a request arriving while more connections are open is answered 503;
    ``write_s``: a client that reads none of its answer for this long (the server's send buffer stays full) is
    disconnected, and the answer's memory and in-flight place are freed."""

    keep_alive_s: float = 5.0
    header_s: float = 10.0
    body_s: float = 30.0
    max_header_bytes: int = 64 * 1024
    max_connections: int = 1000
    write_s: float = 30.0

    def __post_init__(self) -> None:
        bad = {k: v for k, v in asdict(self).items() if not (isinstance(v, (int, float)) and v > 0)}
        if bad:
            raise ConfigError(f"server guards must be positive numbers, got {bad}")


_REASONS = {408: "Request Timeout", 431: "Request Header Fields Too Large", 503: "Service Unavailable"}


def _raw_response(status: int, detail: str) -> bytes:
    body = _detail(detail)
    return (f"HTTP/1.1 {status} {_REASONS[status]}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode() + body


# ``curl --http2`` offers HTTP/2 with "Connection: Upgrade, HTTP2-Settings" + "Upgrade: h2c". The HTTP parser
# then treats everything after the head as the new protocol, so a POST body was lost (the app saw an empty
# body). The server does not speak h2c; RFC 9110 lets it ignore the offer and answer in HTTP/1.1, which needs
# the parser not to see the Upgrade header: it is renamed before parsing.
_H2C_UPGRADE = re.compile(rb"\r\nupgrade:([ \t]*h2c[ \t]*)(?=\r\n)", re.IGNORECASE)


class _HeadTooLarge(Exception):
    """Raised from a parser callback to stop parsing a refused head."""


try:
    import httptools
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _HttpToolsProtocol
except ImportError:  # pragma: no cover - httptools missing: uvicorn's h11 protocol, with fewer guards
    _HttpToolsProtocol = None  # type: ignore[assignment,misc]

if _HttpToolsProtocol is not None:
    class GuardedHttpToolsProtocol(_HttpToolsProtocol):  # type: ignore[misc,valid-type]
        """uvicorn's httptools protocol plus the bounds it lacks.

        uvicorn arms its keep-alive timer only after a response, and disarms it on any byte: a connection
        that never sends a request, or sends half of one, stays open forever, and httptools buffers a header
        of any size. One timer per connection follows the request through its phases: ``idle`` (keep-alive
        timeout), ``head`` (header timeout, from the request's first byte), ``body`` (body timeout), ``app``
        (no timer: the app is answering)."""

        def __init__(self, config: Any, server_state: Any, app_state: Any, _loop: Any = None) -> None:
            super().__init__(config, server_state, app_state, _loop)
            self.guards: ServerGuards = getattr(config, "searchgym_guards", None) or ServerGuards()
            self._timer: asyncio.TimerHandle | None = None
            self._phase = "idle"
            self._head_bytes = 0

        def _arm(self, phase: str, seconds: float | None) -> None:
            if self._timer is not None:
                self._timer.cancel()
            self._phase = phase
            self._timer = None if seconds is None else self.loop.call_later(seconds, self._expired)

        def _reject(self, status: int, detail: str) -> None:
            """Answer ``status`` on the raw transport and close the connection."""
            self._arm("closed", None)
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete:
                if cycle.response_started:  # cannot answer twice: just close
                    self.transport.close()
                    return
                cycle.disconnected = True  # the app sees http.disconnect and writes nothing more
                cycle.message_event.set()
            self.transport.write(_raw_response(status, detail))
            self.transport.close()

        def _expired(self) -> None:
            self._timer = None
            if self.transport.is_closing():
                return
            g = self.guards
            if self._phase == "head":
                self._reject(408, f"request headers not received within {g.header_s:g} s")
            elif self._phase == "body" and self.cycle is not None and not self.cycle.response_complete:
                self._reject(408, f"request body not received within {g.body_s:g} s")
            else:  # idle, or the rest of a body already answered
                self._arm("closed", None)
                self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._write_timer: asyncio.TimerHandle | None = None
            self._arm("idle", self.guards.keep_alive_s)

        def connection_lost(self, exc: Exception | None) -> None:
            self._arm("closed", None)
            self._disarm_write()
            super().connection_lost(exc)

        # write timeout: the transport calls pause_writing when its buffer passes the high-water mark and
        # resume_writing when the client has read it down; a client that stays paused for write_s is dropped
        def pause_writing(self) -> None:
            super().pause_writing()
            if getattr(self, "_write_timer", None) is None:
                self._write_timer = self.loop.call_later(self.guards.write_s, self._write_expired)

        def resume_writing(self) -> None:
            super().resume_writing()
            self._disarm_write()

        def _disarm_write(self) -> None:
            timer = getattr(self, "_write_timer", None)
            if timer is not None:
                timer.cancel()
                self._write_timer = None

        def _write_expired(self) -> None:
            self._write_timer = None
            if not self.transport.is_closing() or self.transport.get_write_buffer_size():
                self.logger.info("closing a connection that read none of its answer for %g s",
                                 self.guards.write_s)
                self._arm("closed", None)
                self.transport.abort()  # drops the buffered answer; connection_lost ends the response

        def data_received(self, data: bytes) -> None:
            # uvicorn's data_received, except that a head refused by on_headers_complete (431) is not
            # also answered 400, and an h2c upgrade offer is ignored (see _H2C_UPGRADE)
            if self._phase in ("idle", "head") and b"h2c" in data:
                data = _H2C_UPGRADE.sub(rb"\r\nx-ignored-upgrade:\1", data)
            self._unset_keepalive_if_required()
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserError:
                if self._phase != "closed":
                    self.logger.warning("Invalid HTTP request received.")
                    self.send_400_response("Invalid HTTP request received.")
                return
            except httptools.HttpParserUpgrade:
                if self._should_upgrade():
                    self._arm("closed", None)  # the WebSocket protocol owns the connection now, with its own pings
                    self._disarm_write()
                    self.handle_websocket_upgrade()
                else:
                    self._unsupported_upgrade_warning()
                return
            if self._phase == "head" and not self.transport.is_closing():
                # counts the whole chunk the request began in; bounds what httptools buffers
                self._head_bytes += len(data)
                if self._head_bytes > self.guards.max_header_bytes:
                    self._reject(431, f"request line and headers over the {self.guards.max_header_bytes:,}"
                                      "-byte limit")

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._head_bytes = 0
            self._arm("head", self.guards.header_s)

        def on_headers_complete(self) -> None:
            size = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
            if size > self.guards.max_header_bytes:  # a head that arrived within one read
                self._reject(431, f"request line and headers over the {self.guards.max_header_bytes:,}-byte limit")
                raise _HeadTooLarge  # stops the parser; data_received knows the answer is sent
            super().on_headers_complete()
            if self.pipeline:  # queued behind a running request, reading paused: the server is the slow one
                self._arm("app", None)
            else:
                self._arm("body", self.guards.body_s)

        def on_message_complete(self) -> None:
            super().on_message_complete()
            if self.cycle is not None and self.cycle.response_complete:  # answered early (401, 413, 503)
                self._arm("idle", self.guards.keep_alive_s)
            else:
                self._arm("app", None)

        def on_response_complete(self) -> None:
            pipelined = bool(self.pipeline)
            super().on_response_complete()
            if self.transport.is_closing() or self._phase in ("head", "body", "closed"):
                return  # the next request's head, or the rest of this body, keeps its own timer
            if pipelined:
                self._arm("app", None)
            else:
                self._arm("idle", self.guards.keep_alive_s)
else:  # pragma: no cover
    GuardedHttpToolsProtocol = None  # type: ignore[assignment,misc]


def server_config(app: Any, *, host: str = "127.0.0.1", port: int = 8000, guards: ServerGuards | None = None,
                  **uvicorn_kwargs: Any) -> Any:
    """A ``uvicorn.Config`` for ``app`` with the connection guards on (the httptools protocol subclass; with
    only h11 installed, uvicorn's own keep-alive timeout and h11's header-size limit)."""
    import uvicorn

    guards = guards or ServerGuards()
    kwargs: dict[str, Any] = {"timeout_keep_alive": max(1, math.ceil(guards.keep_alive_s)),
                              "limit_concurrency": guards.max_connections,
                              "h11_max_incomplete_event_size": guards.max_header_bytes, **uvicorn_kwargs}
    if GuardedHttpToolsProtocol is not None:
        kwargs.setdefault("http", GuardedHttpToolsProtocol)
    config = uvicorn.Config(app, host=host, port=port, **kwargs)
    config.searchgym_guards = guards  # read by GuardedHttpToolsProtocol
    return config


def _raise_fd_limit(wanted: int) -> None:
    """Raise the soft open-file limit towards ``wanted`` (within the hard limit), so ``max_connections``
    sockets fit; the default soft limit (1024) is below uvicorn's default backlog."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ImportError, ValueError, OSError):  # pragma: no cover - not POSIX, or not permitted
        pass


def serve(index_dir: str | Path, host: str = "127.0.0.1", port: int = 8000, topk: int = 3, workers: int = 1,
          api_key: str | None = None, *, search_threads: int = 1, limits: dict[str, int] | None = None,
          access_log: bool = False, log_level: str = "info", guards: ServerGuards | None = None) -> None:
    """Serve ``index_dir`` until interrupted. ``workers > 1`` starts that many uvicorn processes,
    each loading the index itself (memory grows with the count). ``limits``: any of ``LIMIT_NAMES``.
    ``guards``: connection timeouts and limits (:class:`ServerGuards`).

    The key never enters a worker's environment or argv: ``SEARCHGYM_API_KEY`` is removed from this
    process's environment before workers start, and the key travels pickled in the spawn pipe."""
    import uvicorn

    limits = {k: v for k, v in (limits or {}).items() if v is not None}
    unknown = set(limits) - set(LIMIT_NAMES)
    if unknown:
        raise ValueError(f"unknown limits {sorted(unknown)}; choose from {LIMIT_NAMES}")
    bad = {k: v for k, v in limits.items() if not isinstance(v, int) or v < 1}
    if bad:
        raise ValueError(f"limits must be positive integers, got {bad}")
    max_topk = limits.get("max_topk", DEFAULT_MAX_TOPK)
    if not 1 <= topk <= max_topk:  # checked before the index loads
        raise ValueError(f"default_topk (--topk) must be between 1 and max_topk={max_topk}, got {topk}")
    guards = guards or ServerGuards()
    _raise_fd_limit(guards.max_connections + 256)
    index_dir = Path(index_dir)
    common = {"host": host, "port": port, "guards": guards, "access_log": access_log, "log_level": log_level}
    if workers > 1:
        from uvicorn.supervisors import Multiprocess

        from searchgym.retrieval.index import read_manifest

        read_manifest(index_dir)  # fail here, clearly, rather than in every worker
        os.environ.pop(ENV_API_KEY, None)  # spawned workers copy this environment
        factory = AppFactory(str(index_dir.resolve()), topk, api_key, search_threads, limits)
        config = server_config(factory, factory=True, workers=workers, **common)
        sock = config.bind_socket()
        try:
            Multiprocess(config, sockets=[sock]).run()
        except KeyboardInterrupt:  # pragma: no cover - as uvicorn.run
            pass
        finally:
            sock.close()
    else:
        app = load_app(index_dir, topk=topk, api_key=api_key, search_threads=search_threads, **limits)
        server = uvicorn.Server(server_config(app, **common))
        try:
            server.run()
        except KeyboardInterrupt:  # pragma: no cover - as uvicorn.run
            return
        if not server.started:
            raise ConfigError(f"the server did not start on {host}:{port} (see the log above: port in use?)")
