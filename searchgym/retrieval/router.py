"""Past one machine: shard servers behind a router that merges exactly (issue 23 §4).

The engine is searchgym's own ``/retrieve`` server over HTTP, not Ray Serve: a shard server is the unchanged
``searchgym serve SHARD_DIR`` (any host, any process manager), the router is a :class:`ShardRouter` — a
Retriever that asks every shard server in parallel (:class:`~searchgym.retrieval.remote.RemoteRetriever`, with
its timeouts, retries and response caps) and merges. Ray would add a cluster runtime for what is one HTTP
fan-out, and the /retrieve contract is what Search-R1 / verl clients already speak.

1. ``searchgym.retrieval.split.split_sharded_index(DIR, OUT)`` (CLI ``searchgym index split DIR --out OUT``) turns a sharded index into
   one index directory per shard, ``OUT/shard-000`` ...: the shard's arrays (hard links where the filesystem
   allows), the global vocabulary and the shard's own passages. Each scores with the global statistics.
2. ``searchgym serve OUT/shard-000 --port 8001`` ... one server per shard.
3. ``write_router_index(ROUTER_DIR, [url, ...])`` (CLI ``searchgym index router URL... --out ROUTER_DIR``)
   writes an index directory whose one backend, ``bm25_router``, is the list of shard URLs in shard order;
   ``load_index(ROUTER_DIR)`` gives a ShardRouter and ``searchgym serve ROUTER_DIR`` serves it with the same
   ``/retrieve`` contract.

Exactness: each shard server answers its top k by (score descending, row ascending); shards hold contiguous
row ranges in order, so merging by (score descending, shard number, position in the shard's list) is the
single index's order by (score, global row), and scores travel as exact float reprs. The merged top k is
identical to the unsharded index's, ties included.

Partial failure: a shard that does not answer (after its retries, within ``timeout``/``deadline``) makes
``batch_search`` raise :class:`ShardUnavailableError` (a RetrieverUnavailableError; the server answers 503)
naming the shard and its URL — never fewer hits in silence. A caller that prefers partial results asks for them
explicitly with :meth:`ShardRouter.batch_search_partial`, which returns the hits of the shards that answered
together with the list of missing shards.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchgym.errors import ConfigError, IndexCorruptError, RetrieverUnavailableError
from searchgym.retrieval.base import Hit
from searchgym.retrieval.index import (
    LoadContext,
    atomic_dir,
    register_backend,
    write_manifest,
)

NAME = "bm25_router"


class ShardUnavailableError(RetrieverUnavailableError):
    """One or more shard servers did not answer; the message names each shard and its URL."""


@dataclass(frozen=True)
class PartialResult:
    """Hits from the shards that answered, and the shards that did not (as ``"shard i (url): why"``)."""

    hits: list[list[Hit]]
    missing: list[str]

    @property
    def complete(self) -> bool:
        return not self.missing


class ShardRouter:
    """A Retriever over shard servers, merging their answers exactly (see the module docstring).

    ``urls``: the shard servers in shard order (shard 0 first). ``timeout`` / ``max_retries`` / ``deadline``
    bound each shard's call (passed to RemoteRetriever); the shards are asked in parallel.
    """

    kind = "bm25"

    def __init__(self, urls: Sequence[str], *, timeout: float = 10.0, max_retries: int = 1,
                 deadline: float | None = None, n_passages: int | None = None, api_key: str | None = None) -> None:
        from searchgym.retrieval.remote import RemoteRetriever

        if not urls:
            raise ConfigError("a shard router needs at least one shard URL")
        self.urls = list(urls)
        self._shards = [RemoteRetriever(u, timeout=timeout, max_retries=max_retries, deadline=deadline,
                                        api_key=api_key, batch_size=1024) for u in self.urls]
        self._pool = ThreadPoolExecutor(max_workers=min(32, len(self._shards)))
        self._n = n_passages

    def __len__(self) -> int:
        return self._n if self._n is not None else 0

    def __repr__(self) -> str:
        return f"ShardRouter({len(self.urls)} shards: {self.urls[0]} ...)"

    @property
    def params(self) -> dict[str, Any]:
        return {"shards": self.urls}

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        for s in self._shards:
            s.close()

    def search(self, query: str, k: int = 3) -> list[Hit]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Hit]]:
        """Exact top ``k`` over all shards; ShardUnavailableError if any shard does not answer."""
        res = self.batch_search_partial(queries, k)
        if res.missing:
            raise ShardUnavailableError(f"{len(res.missing)} of {len(self.urls)} shard(s) did not answer, so the "
                                        f"result would be incomplete: {'; '.join(res.missing)}")
        return res.hits

    def batch_search_partial(self, queries: Sequence[str], k: int = 3) -> PartialResult:
        """Like batch_search, but a missing shard is reported in ``missing`` instead of raised."""
        if isinstance(queries, str):
            raise TypeError("batch_search takes a list of queries; use search() for one")
        queries = list(queries)
        if k <= 0 or not queries:
            return PartialResult([[] for _ in queries], [])
        futures = [self._pool.submit(s.batch_search, queries, k) for s in self._shards]
        answers: list[list[list[Hit]] | None] = []
        missing: list[str] = []
        for i, f in enumerate(futures):
            try:
                answers.append(f.result())
            except RetrieverUnavailableError as exc:  # includes protocol errors: an unusable shard
                answers.append(None)
                missing.append(f"shard {i} ({self.urls[i]}): {str(exc)[:300]}")
        merged = []
        for qi in range(len(queries)):
            cands = [(-h.score, si, pos, h) for si, a in enumerate(answers) if a is not None
                     for pos, h in enumerate(a[qi])]
            cands.sort(key=lambda c: c[:3])
            merged.append([c[3] for c in cands[:k]])
        return PartialResult(merged, missing)


# -- router index directories -------------------------------------------------------------------------
def write_router_index(out: str | Path, urls: Sequence[str], *, timeout: float = 10.0, max_retries: int = 1,
                       n_passages: int | None = None, fingerprint: str = "", overwrite: bool = False) -> Path:
    """Write an index directory that ``load_index`` / ``searchgym serve`` open as a :class:`ShardRouter`."""
    if not urls or not all(isinstance(u, str) and u.startswith(("http://", "https://")) for u in urls):
        raise ConfigError(f"shard URLs must be http(s) URLs, got {list(urls)!r}")
    with atomic_dir(out, overwrite=overwrite) as tmp:
        write_manifest(tmp, n_passages=n_passages or 0, fingerprint=fingerprint,
                       backends={NAME: {"shards": list(urls), "timeout": timeout, "max_retries": max_retries}},
                       build_seconds=0.0, passages={"passages_remote": True})
    return Path(out)


def _load_backend(ctx: LoadContext) -> ShardRouter:
    e = ctx.entry
    urls = e.get("shards")
    if not isinstance(urls, list) or not urls or not all(isinstance(u, str) for u in urls):
        raise IndexCorruptError(f"{ctx.root / 'manifest.json'}: {NAME} needs a list of shard URLs")
    return ShardRouter(urls, timeout=float(e.get("timeout", 10.0)), max_retries=int(e.get("max_retries", 1)),
                       n_passages=ctx.options.get("n_passages"))


register_backend(NAME, provides="bm25", load=_load_backend)
