"""A Search-R1-compatible retrieval server (FastAPI + uvicorn) over any :class:`Retriever`.

Contract (DESIGN.md §2, anchors.md §3)::

    POST /retrieve {"queries": [str], "topk": int|null, "return_scores": bool = false}
      -> {"result": [[{"document": {"id", "contents", "title", "text"}, "score": float}, ...], ...]}
         (with return_scores false the inner items are the documents themselves; the reference
          server crashes there, this one does not)
    GET /health -> {"status": "ok"}
    GET /info   -> corpus size, backend, parameters, limits

The hot path is kept lean: the body is read and checked by hand (no pydantic round trip), one
``batch_search`` call answers the whole request, and the response is assembled from per-passage
JSON fragments that are encoded once and cached. Every bad input is a 4xx with ``{"detail": ...}``.
"""

from __future__ import annotations

import hmac
import json
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from searchgym.errors import QueryError
from searchgym.retrieval.base import Hit, Passage, Retriever

DEFAULT_MAX_QUERIES = 4096        # Search-R1 sends a whole rollout batch (e.g. 512 x n) in one request
DEFAULT_MAX_QUERY_CHARS = 4096
DEFAULT_MAX_TOPK = 100
DEFAULT_MAX_HITS = 65_536         # queries x topk per request: bounds the response size
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
_DRAIN_LIMIT_FACTOR = 16          # an oversized body is read and discarded up to this many x the limit
_DOC_CACHE_MAX = 100_000          # encoded documents kept; the cache is cleared when full

ENV_INDEX_DIR = "SEARCHGYM_SERVE_INDEX"
ENV_TOPK = "SEARCHGYM_SERVE_TOPK"
ENV_API_KEY = "SEARCHGYM_API_KEY"

try:  # optional: a faster JSON decoder
    import orjson as _orjson  # type: ignore[import-not-found]

    _loads: Callable[[bytes], Any] = _orjson.loads
except ImportError:  # pragma: no cover - depends on the environment
    _loads = json.loads


class _BadRequest(Exception):
    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status, self.detail = status, detail


def _document_json(p: Passage) -> bytes:
    doc = {"id": p.id, "contents": p.contents, "title": p.title, "text": p.text}
    try:
        return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates in the corpus: escape them instead
        return json.dumps(doc, separators=(",", ":")).encode("ascii")


def _score_json(score: float) -> bytes:
    s = float(score)
    return repr(s).encode("ascii") if math.isfinite(s) else b"null"


class _Renderer:
    """Builds the /retrieve response bytes from hits, caching each passage's encoded document."""

    def __init__(self, cache_max: int = _DOC_CACHE_MAX):
        self._cache: dict[str, bytes] = {}
        self._cache_max = cache_max

    def doc(self, hit: Hit) -> bytes:
        b = self._cache.get(hit.id)
        if b is None:
            if len(self._cache) >= self._cache_max:
                self._cache.clear()
            b = self._cache[hit.id] = _document_json(hit.passage)
        return b

    def render(self, results: Sequence[Sequence[Hit]], return_scores: bool) -> bytes:
        doc = self.doc
        if return_scores:
            lists = [
                b"[" + b",".join([b'{"document":' + doc(h) + b',"score":' + _score_json(h.score) + b"}"
                                  for h in hits]) + b"]"
                for hits in results
            ]
        else:
            lists = [b"[" + b",".join([doc(h) for h in hits]) + b"]" for hits in results]
        return b'{"result":[' + b",".join(lists) + b"]}"


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


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_request(body: bytes, *, default_topk: int, max_queries: int, max_query_chars: int,
                  max_topk: int, max_hits: int) -> tuple[list[str], int, bool]:
    """Check a /retrieve body; returns ``(queries, topk, return_scores)`` or raises ``_BadRequest``."""
    if not body:
        raise _BadRequest(400, 'empty body: send JSON {"queries": [str], "topk": int|null, '
                               '"return_scores": bool}')
    try:
        data = _loads(body)
    except (ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError are ValueErrors
        raise _BadRequest(400, f"malformed JSON body: {e}") from None
    if not isinstance(data, dict):
        raise _BadRequest(422, f'the body must be a JSON object {{"queries": [...]}}, got {type(data).__name__}')
    queries = data.get("queries")
    if queries is None:
        raise _BadRequest(422, '"queries" is required: a list of strings')
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

    topk = data.get("topk")
    if topk is None:
        topk = default_topk
    elif isinstance(topk, bool) or not isinstance(topk, int):
        raise _BadRequest(422, f'"topk" must be a positive integer or null, got {_describe(topk)}')
    elif topk <= 0 or topk > max_topk:
        raise _BadRequest(422, f'"topk" must be between 1 and {max_topk}, got {topk}')
    if len(queries) * topk > max_hits:
        raise _BadRequest(413, f"{len(queries)} queries x topk {topk} = {len(queries) * topk:,} results; "
                               f"the limit is {max_hits:,} per request (send fewer queries)")

    return_scores = data.get("return_scores", False)
    if return_scores is None:
        return_scores = False
    if not isinstance(return_scores, bool):
        raise _BadRequest(422, f'"return_scores" must be true or false, got {_describe(return_scores)}')
    return queries, topk, return_scores


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


def create_app(retriever: Retriever, *, default_topk: int = 3, api_key: str | None = None,
               max_queries: int = DEFAULT_MAX_QUERIES, max_query_chars: int = DEFAULT_MAX_QUERY_CHARS,
               max_topk: int = DEFAULT_MAX_TOPK, max_hits: int = DEFAULT_MAX_HITS,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, info: dict[str, Any] | None = None,
               threadpool: bool = True) -> FastAPI:
    """The FastAPI app serving ``retriever``.

    ``threadpool``: run ``batch_search`` in a worker thread (keeps /health answering during a long
    batch) instead of on the event loop. ``api_key``: require ``Authorization: Bearer <key>`` on
    /retrieve and /info (/health stays open for probes).
    """
    if not 1 <= default_topk <= max_topk:
        raise ValueError(f"default_topk must be between 1 and max_topk={max_topk}, got {default_topk}")
    renderer = _Renderer()
    limits = {"max_queries": max_queries, "max_query_chars": max_query_chars, "max_topk": max_topk,
              "max_hits": max_hits, "max_body_bytes": max_body_bytes}
    info_body = {**(info if info is not None else retriever_info(retriever)),
                 "default_topk": default_topk, "limits": limits, "auth": api_key is not None}
    expected = f"Bearer {api_key}".encode() if api_key else None

    app = FastAPI(title="searchgym retrieval server", docs_url=None, redoc_url=None, openapi_url=None)

    def error(status: int, detail: str, headers: dict[str, str] | None = None) -> Response:
        return JSONResponse({"detail": detail}, status_code=status, headers=headers)

    def unauthorized(request: Request) -> Response | None:
        if expected is None:
            return None
        got = request.headers.get("authorization", "").encode("latin-1", "replace")
        if hmac.compare_digest(got, expected):
            return None
        return error(401, "missing or wrong bearer token: send 'Authorization: Bearer <key>'",
                     {"WWW-Authenticate": "Bearer"})

    async def read_body(request: Request) -> bytes:
        """The body, at most ``max_body_bytes``: refused by Content-Length, else while streaming.

        An oversized body is still read (and dropped) up to a bound, so the client gets the 413
        instead of a reset connection."""
        declared = request.headers.get("content-length")
        too_big = False
        if declared is not None:
            try:
                too_big = int(declared) > max_body_bytes
            except ValueError:
                raise _BadRequest(400, f"bad Content-Length header {declared!r}") from None
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if too_big or size > max_body_bytes:
                too_big = True
                chunks.clear()
                if size > _DRAIN_LIMIT_FACTOR * max_body_bytes:
                    break
            else:
                chunks.append(chunk)
        if too_big:
            raise _BadRequest(413, f"request body over the {max_body_bytes:,}-byte limit "
                                   f"({declared or 'more than that'} bytes sent)")
        return b"".join(chunks)

    @app.post("/retrieve")
    async def retrieve(request: Request) -> Response:
        denied = unauthorized(request)
        if denied is not None:
            return denied
        try:
            body = await read_body(request)
            queries, topk, return_scores = parse_request(
                body, default_topk=default_topk, max_queries=max_queries, max_query_chars=max_query_chars,
                max_topk=max_topk, max_hits=max_hits)
        except _BadRequest as e:
            return error(e.status, e.detail)
        try:
            if threadpool:
                results = await run_in_threadpool(retriever.batch_search, queries, topk)
            else:
                results = retriever.batch_search(queries, topk)
        except QueryError as e:
            return error(422, str(e))
        return Response(renderer.render(results, return_scores), media_type="application/json")

    @app.get("/health")
    async def health() -> Response:
        return JSONResponse({"status": "ok"})

    @app.get("/info")
    async def info_route(request: Request) -> Response:
        denied = unauthorized(request)
        return denied if denied is not None else JSONResponse(info_body)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> Response:
        return error(500, f"internal error: {type(exc).__name__}: {exc}")

    return app


def _warm_up(retriever: Retriever) -> None:
    """One search before serving, so a JIT backend (numba) compiles before the first client waits."""
    warmup = getattr(retriever, "warmup", None)
    if callable(warmup):
        warmup()
    retriever.batch_search(["warm up the index"], 1)


def load_app(index_dir: str | Path, *, topk: int = 3, api_key: str | None = None, **limits: Any) -> FastAPI:
    """Load the index in ``index_dir``, warm it up, and return the app."""
    from searchgym.retrieval.index import load_index

    retriever = load_index(index_dir)
    _warm_up(retriever)
    return create_app(retriever, default_topk=topk, api_key=api_key,
                      info=retriever_info(retriever, index_dir), **limits)


def app_from_env() -> FastAPI:
    """uvicorn factory for ``--workers N``: each worker process loads the index named in the env."""
    index_dir = os.environ.get(ENV_INDEX_DIR)
    if not index_dir:
        raise RuntimeError(f"{ENV_INDEX_DIR} is not set; start the server with `searchgym serve INDEX_DIR`")
    return load_app(index_dir, topk=int(os.environ.get(ENV_TOPK, "3")),
                    api_key=os.environ.get(ENV_API_KEY) or None)


def serve(index_dir: str | Path, host: str = "127.0.0.1", port: int = 8000, topk: int = 3, workers: int = 1,
          api_key: str | None = None, *, access_log: bool = False, log_level: str = "info") -> None:
    """Serve ``index_dir`` until interrupted. ``workers > 1`` starts that many uvicorn processes,
    each loading the index itself (memory grows with the count)."""
    import uvicorn

    index_dir = Path(index_dir)
    if workers > 1:
        os.environ[ENV_INDEX_DIR] = str(index_dir.resolve())
        os.environ[ENV_TOPK] = str(topk)
        if api_key:
            os.environ[ENV_API_KEY] = api_key
        uvicorn.run("searchgym.retrieval.server:app_from_env", factory=True, host=host, port=port,
                    workers=workers, access_log=access_log, log_level=log_level)
    else:
        app = load_app(index_dir, topk=topk, api_key=api_key)
        uvicorn.run(app, host=host, port=port, access_log=access_log, log_level=log_level)
