"""``searchgym serve-ray``: a sharded index on Ray Serve (shard deployments, an ingress, exact merge).

- One deployment per shard (:class:`ShardSearcher`, ``shard-000`` ...), ``--replicas`` replicas each. A BM25
  replica memory-maps its shard (its own split directory, or the sharded index, searching only its shard) and
  answers with searchgym's exact kernel; ``@serve.batch`` gathers concurrent calls into one kernel call. A dense
  replica (a row range of a Flat index, ``index split --shards N``) holds its FAISS shard and the query encoder,
  on its GPU when ``--gpus-per-shard`` gave it one, and encodes each request's queries as one batch.
- One ingress (:class:`SearchIngress`): fans a batch out to every shard through ``DeploymentHandle`` s, checks
  each reply (:func:`~searchgym.retrieval.serve_ray.validate_reply`) and merges exactly. Over HTTP it is the
  unchanged ``searchgym serve`` app (:func:`~searchgym.retrieval.server.create_app`: Search-R1 JSON,
  ``{"query"}``, msgpack, limits, API key) behind Serve's proxy on every node; through a handle
  (``retriever="ray://APP"``) its ``search`` method returns Hits.
- Faults: a call whose replica died (or that timed out) is sent again, up to ``retries`` times with a short
  backoff, and Serve replaces the replica; a shard that stays down is :class:`ShardUnavailableError` naming it
  (HTTP 503), never a partial result unless the caller asks (``search_partial``, ``"allow_partial": true``).

Imports Ray Serve at import time: ``pip install 'searchgym[ray]'``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ray import serve

from searchgym.errors import ConfigError, SearchGymError
from searchgym.retrieval.serve_ray import (
    DEFAULT_APP,
    Reply,
    ShardReplyError,
    ShardSource,
    ShardUnavailableError,
    _sources_of_index,
    _unwrap,
    check_queries,
    check_shard_set,
    merge_replies,
    shard_sources,
    validate_reply,
)

Merged = list[list[Any]] | tuple[list[list[Any]], list[dict[str, Any]]]  # hits, or (hits, missing shards)
DEFAULT_RETRIES = 3
DEFAULT_SHARD_TIMEOUT_S = 30.0
_BACKOFF_S = (0.1, 0.3, 1.0, 2.0)


@serve.deployment(max_ongoing_requests=64, health_check_period_s=2.0, health_check_timeout_s=10.0,
                  graceful_shutdown_timeout_s=1.0)
class ShardSearcher:
    """One shard: a BM25 shard (memory-mapped, searchgym's exact kernel) or a dense one (a Flat FAISS shard and its
    query encoder, on the replica's GPU when it was given one). ``delay_s`` adds a sleep of that many seconds per
    request served (benchmarks: a stand-in for a slow kernel that uses no CPU)."""

    def __init__(self, source: dict[str, Any], verify: bool = True, delay_s: float = 0.0) -> None:
        self.source = ShardSource(**source)
        here = [s for s in _sources_of_index(Path(self.source.path)) if s.local == self.source.local]
        if here != [self.source]:  # another node's copy of the files is not the one the app was checked with
            raise ConfigError(f"{self.source.label}: the index files here describe {here}, not the shard the "
                              "app was started with; give every node the same files")
        self._r = _load_dense(self.source, verify) if self.source.kind == "dense" else _load_bm25(self.source, verify)
        self._delay = float(delay_s)

    def identity(self) -> dict[str, Any]:
        import os

        import ray

        return {"source": self.source.to_dict(), "pid": os.getpid(), "node": ray.get_runtime_context().get_node_id()}

    def _rows(self, queries: list[str], k: int) -> list[list[tuple[int, float]]]:
        if self.source.kind == "dense":
            return self._r.search_rows(queries, k)
        return self._r.search_shard(queries, k, self.source.local)

    def _search_many(self, requests: list[tuple[list[str], int]]) -> list[Reply]:
        if self._delay:
            time.sleep(self._delay * len(requests))
        store, off = self._r.passages, self.source.offset
        if self.source.kind == "dense":  # each request encoded as its own batch: the unsplit index's query vectors
            return [[[(row + off, score, store[row]) for row, score in hits] for hits in self._rows(q, k)]
                    for q, k in requests]
        out: list[Reply | None] = [None] * len(requests)
        for k in {k for _q, k in requests}:  # one kernel call per k
            idx = [i for i, (_q, kk) in enumerate(requests) if kk == k]
            got = self._rows([q for i in idx for q in requests[i][0]], k)
            rows = [[(row + off, score, store[row]) for row, score in hits] for hits in got]
            for i in idx:
                n = len(requests[i][0])
                out[i], rows = rows[:n], rows[n:]
        return out  # type: ignore[return-value]

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.002)
    async def search(self, requests: list[tuple[list[str], int]]) -> list[Reply]:
        return await asyncio.to_thread(self._search_many, requests)


def _load_bm25(source: ShardSource, verify: bool) -> Any:
    from searchgym.retrieval.index import load_index
    from searchgym.retrieval.sharded import ShardedBM25Retriever

    r = load_index(source.path, kind="bm25", verify=verify)
    if not isinstance(r, ShardedBM25Retriever):
        raise ConfigError(f"{source.path} did not load as a sharded BM25 index")
    r.warmup()
    return r


def _load_dense(source: ShardSource, verify: bool) -> Any:
    """The shard's FAISS index (memory-mapped) and its encoder, on ``cuda`` when Ray gave this replica a GPU
    (``--gpus-per-shard``). The FAISS search itself runs where the installed FAISS runs it (faiss-cpu: the CPU)."""
    import ray

    from searchgym.retrieval.dense_scale import FaissRetriever
    from searchgym.retrieval.index import load_index

    device = "cuda" if ray.get_gpu_ids() else "cpu"
    r = load_index(source.path, kind="dense", verify=verify, device=device)
    if not isinstance(r, FaissRetriever):
        raise ConfigError(f"{source.path} did not load as a dense FAISS shard")
    r.search_rows(["warm up"], 1)
    return r


class _Shards:
    """The ingress's fan-out: ask every shard, retry a dead replica's call, validate, merge."""

    def __init__(self, handles: Sequence[Any], sources: Sequence[ShardSource], retries: int, timeout_s: float):
        self.handles, self.sources = list(handles), list(sources)
        self.retries, self.timeout_s = int(retries), float(timeout_s)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="searchgym-fanout")

    def _final(self, si: int, exc: BaseException) -> BaseException:
        """Raise an error that retrying cannot fix (a bad query); return the one to remember otherwise."""
        inner = _unwrap(exc)
        if isinstance(inner, SearchGymError) and not isinstance(inner, (ShardReplyError, ShardUnavailableError)):
            raise inner from None
        return inner

    def _down(self, si: int, last: BaseException | None) -> ShardUnavailableError:
        return ShardUnavailableError(
            f"{self.sources[si].label} did not answer after {self.retries + 1} tries (timeout "
            f"{self.timeout_s:g} s each): {type(last).__name__}: {str(last)[:300]}; the result would be incomplete, "
            "so none is returned — check the shard's replicas (`serve status`) and retry")

    async def ask(self, si: int, queries: list[str], k: int) -> Reply:
        last: BaseException | None = None
        for attempt in range(self.retries + 1):
            if attempt:
                await asyncio.sleep(_BACKOFF_S[min(attempt - 1, len(_BACKOFF_S) - 1)])
            try:
                reply = await asyncio.wait_for(self.handles[si].search.remote((queries, k)), self.timeout_s)
                return validate_reply(reply, self.sources[si], len(queries), k)
            except Exception as exc:  # noqa: BLE001 - a dead replica, a timeout, a bad reply: retried
                last = self._final(si, exc)
        raise self._down(si, last)

    async def search(self, queries: list[str], k: int, allow_partial: bool = False) -> Merged:
        """The exact top ``k`` over every shard, or :class:`ShardUnavailableError` naming the shard that is down.
        ``allow_partial``: ``(hits of the shards that answered, the shards that did not)`` instead of the error
        (still the error when none answered)."""
        if k <= 0 or not queries:
            return ([[] for _ in queries], []) if allow_partial else [[] for _ in queries]
        got = await asyncio.gather(*(self.ask(si, queries, k) for si in range(len(self.handles))),
                                   return_exceptions=allow_partial)
        return self._merged(list(got), k, allow_partial)

    def _merged(self, got: list[Any], k: int, allow_partial: bool) -> Merged:
        """Merge the replies (in shard order; a missing shard leaves the others' order intact); with
        ``allow_partial`` the shards that stayed down are named instead of raised."""
        if not allow_partial:
            return merge_replies(got, k)
        for r in got:  # anything but a shard that stayed down (a bad query, ...) is raised as it would be
            if isinstance(r, BaseException) and not isinstance(r, ShardUnavailableError):
                raise r
        down = [(si, r) for si, r in enumerate(got) if isinstance(r, ShardUnavailableError)]
        if len(down) == len(got):
            raise down[0][1]
        missing = [{"shard": self.sources[si].shard, "of": self.sources[si].of, "error": str(e)} for si, e in down]
        return merge_replies([r for r in got if not isinstance(r, BaseException)], k), missing

    def ask_sync(self, si: int, queries: list[str], k: int, first: Any) -> Reply:
        last: BaseException | None = None
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(_BACKOFF_S[min(attempt - 1, len(_BACKOFF_S) - 1)])
            try:
                resp = first if attempt == 0 else self.handles[si].search.remote((queries, k))
                return validate_reply(resp.result(timeout_s=self.timeout_s), self.sources[si], len(queries), k)
            except Exception as exc:  # noqa: BLE001 - as in ask()
                last = self._final(si, exc)
        raise self._down(si, last)

    def _ask_or_down(self, si: int, queries: list[str], k: int, first: Any) -> Reply | ShardUnavailableError:
        try:
            return self.ask_sync(si, queries, k, first)
        except ShardUnavailableError as exc:
            return exc

    def search_sync(self, queries: list[str], k: int, allow_partial: bool = False) -> Merged:
        """:meth:`search` for the HTTP server's search threads. On an event loop's thread (an inline search) the
        blocking calls move to a helper thread: Ray refuses to block an event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            return self._pool.submit(self.search_sync, queries, k, allow_partial).result()
        if k <= 0 or not queries:
            return ([[] for _ in queries], []) if allow_partial else [[] for _ in queries]
        first = [h.search.remote((queries, k)) for h in self.handles]  # all shards at once
        ask = self._ask_or_down if allow_partial else self.ask_sync
        return self._merged([ask(si, queries, k, first[si]) for si in range(len(self.handles))], k, allow_partial)


class _HttpRetriever:
    """What the ``searchgym serve`` app searches: the ingress's fan-out, called from its search threads.
    ``batch_search_partial`` answers requests that send ``"allow_partial": true``."""

    def __init__(self, shards: _Shards, n: int, kind: str):
        self._shards, self._n, self.kind = shards, n, kind

    def __len__(self) -> int:
        return self._n

    def search(self, query: str, k: int = 3) -> list[Any]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Any]]:
        return self._shards.search_sync(check_queries(queries), int(k))  # type: ignore[return-value]

    def batch_search_partial(self, queries: Sequence[str], k: int = 3) -> tuple[list[list[Any]], list[dict[str, Any]]]:
        return self._shards.search_sync(check_queries(queries), int(k), True)  # type: ignore[return-value]


@serve.deployment(max_ongoing_requests=256, health_check_period_s=2.0, graceful_shutdown_timeout_s=1.0)
@serve.ingress()
class SearchIngress:
    """The app's entry: HTTP ``/retrieve`` (and ``/health``, ``/info``) and the handle methods ``search``,
    ``search_partial``, ``info`` and ``check``."""

    def __init__(self, options: dict[str, Any], *shards: Any) -> None:
        self.sources = check_shard_set([ShardSource(**s) for s in options["sources"]])
        self.options = options
        self.shards = _Shards(shards, self.sources, options.get("retries", DEFAULT_RETRIES),
                              options.get("shard_timeout_s", DEFAULT_SHARD_TIMEOUT_S))
        self._info = {"retriever": "RayServe", "app": options.get("app"), "n_passages": self.sources[0].n_total,
                      "corpus_fingerprint": self.sources[0].fingerprint, "shards": len(self.sources),
                      "replicas": options.get("replicas"), "kind": self.sources[0].kind}

    def __serve_build_asgi_app__(self) -> Any:
        from searchgym.retrieval.server import create_app

        return create_app(_HttpRetriever(self.shards, self.sources[0].n_total, self.sources[0].kind),
                          default_topk=self.options.get("topk", 3), api_key=self.options.get("api_key"),
                          info=self._info, **self.options.get("limits", {}))

    async def search(self, queries: list[str], k: int) -> list[Any]:
        return await self.shards.search(check_queries(queries), int(k))  # type: ignore[return-value]

    async def search_partial(self, queries: list[str], k: int) -> dict[str, Any]:
        """``{"result": hits of the shards that answered, "missing_shards": [{"shard", "of", "error"}]}``."""
        hits, missing = await self.shards.search(check_queries(queries), int(k), allow_partial=True)
        return {"result": hits, "missing_shards": missing}

    async def info(self) -> dict[str, Any]:
        return dict(self._info)

    async def check(self) -> list[dict[str, Any]]:
        """Every shard answers, from the files it was started with (each replica checked them on start)."""
        ids = await asyncio.gather(*(asyncio.wait_for(h.identity.remote(), self.shards.timeout_s)
                                     for h in self.shards.handles))
        for src, got in zip(self.sources, ids):
            if got["source"] != src.to_dict():
                raise ConfigError(f"{src.label} answered as {got['source']}")
        return ids


def build_app(sources: Sequence[ShardSource], *, app: str = DEFAULT_APP, replicas: int = 1,
              gpus_per_shard: float = 0.0, cpus_per_replica: float = 1.0, ingress_replicas: int = 1,
              topk: int = 3, api_key: str | None = None, limits: dict[str, Any] | None = None,
              retries: int = DEFAULT_RETRIES, shard_timeout_s: float = DEFAULT_SHARD_TIMEOUT_S, verify: bool = True,
              delay_s: float = 0.0, shard_options: dict[str, Any] | None = None,
              ingress_actor_options: dict[str, Any] | None = None) -> Any:
    """The Serve application (not yet running) over a checked shard set. ``shard_options`` go to every shard
    deployment's ``.options`` (e.g. ``max_replicas_per_node``), ``ingress_actor_options`` to the ingress's
    ``ray_actor_options`` (e.g. a custom resource that keeps it on the head node)."""
    if replicas < 1 or ingress_replicas < 1:
        raise ConfigError("--replicas and the ingress replicas must be at least 1")
    sources = check_shard_set(sources)
    actor = {"num_cpus": cpus_per_replica, "num_gpus": gpus_per_shard}
    shards = [ShardSearcher.options(name=f"shard-{s.shard:03d}", num_replicas=replicas, ray_actor_options=actor,
                                    **(shard_options or {})).bind(s.to_dict(), verify, delay_s)
              for s in sources]
    options = {"sources": [s.to_dict() for s in sources], "app": app, "replicas": replicas, "topk": topk,
               "api_key": api_key, "limits": {k: v for k, v in (limits or {}).items() if v is not None},
               "retries": retries, "shard_timeout_s": shard_timeout_s}
    return SearchIngress.options(num_replicas=ingress_replicas,
                                 ray_actor_options={"num_cpus": 0, **(ingress_actor_options or {})}).bind(
        options, *shards)


def run(paths: Sequence[str], *, app: str = DEFAULT_APP, route_prefix: str | None = "/", host: str = "127.0.0.1",
        port: int = 8000, proxy_location: str = "EveryNode", **kw: Any) -> Any:
    """Check the shard set, deploy the app on the cluster this process is connected to (``ray.init`` first)
    and wait until every shard answers; returns the ingress handle. A failed start leaves no app behind.

    ``proxy_location``: Serve's HTTP proxy on ``"EveryNode"`` (a cluster) or ``"HeadOnly"`` (several Ray nodes
    on one host, which would otherwise all bind ``port``)."""
    sources = shard_sources(paths)
    serve.start(http_options={"host": host, "port": port}, proxy_location=proxy_location)
    serve.run(build_app(sources, app=app, **kw), name=app, route_prefix=route_prefix)
    handle = serve.get_app_handle(app)
    try:
        handle.check.remote().result(timeout_s=kw.get("shard_timeout_s", DEFAULT_SHARD_TIMEOUT_S) + 30)
    except Exception as exc:  # noqa: BLE001 - any failure: no half-started app is left
        serve.delete(app)
        inner = _unwrap(exc)
        raise inner if isinstance(inner, SearchGymError) else ShardUnavailableError(
            f"the app {app!r} started but a shard did not answer its first check ({inner})") from None
    return handle


class Waiter:
    """Blocks ``serve-ray`` in the foreground until SIGINT (Ctrl-C) or SIGTERM; the app stays up while it waits."""

    def __init__(self) -> None:
        self.stop = threading.Event()

    def wait(self) -> None:
        import signal

        for sig in (signal.SIGINT, signal.SIGTERM):  # also when started in the background, where SIGINT is ignored
            signal.signal(sig, lambda *_: self.stop.set())
        while not self.stop.wait(1.0):
            pass
