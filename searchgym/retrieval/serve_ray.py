"""Retrieval past one machine on Ray Serve: the parts that need no Ray (shard sets, replies, merge, client).

``searchgym serve-ray INDEX`` (:mod:`.serve_ray_app`) deploys one Serve deployment per shard of a sharded BM25
index (or of a split Flat dense index) and an ingress that fans each batch out to them and merges. This module
holds what both sides share:

- :func:`shard_sources` / :func:`check_shard_set`: which shards an INDEX argument names (a sharded index, the
  output of ``searchgym index split``, or shard directories listed one by one), checked before anything is
  deployed: one corpus fingerprint, one kind (BM25 or dense), shard i of N exactly once each, contiguous rows
  whose counts add up to the corpus. A shard listed twice or shards of two builds are refused, never merged.
- :func:`validate_reply`: a shard's answer is checked before the merge (rows in the shard's range, finite
  scores, at most k hits in (score desc, row asc) order, no duplicate rows or ids).
- :func:`merge_replies`: the exact top k across shards. Each shard answers its own top k by (score descending,
  row ascending) and shards hold contiguous row ranges in order, so merging by (score descending, shard,
  position) is the single index's order by (score, global row): identical top k, ties included.
- :class:`RayServeRetriever`: the retriever spec ``ray://APP`` (``gym.make(..., retriever="ray://APP")``), a
  client of a running app with a sync ``batch_search`` and an awaitable ``abatch_search``; every rollout worker
  on every node shares the one deployment instead of loading the index. A shard that stays down is
  :class:`ShardUnavailableError`; a partial answer (the live shards' exact merge, the missing shards named) only
  when asked (``allow_partial=True``, :meth:`RayServeRetriever.batch_search_partial`).
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from searchgym.errors import ConfigError, QueryError, RetrieverUnavailableError, SearchGymError
from searchgym.retrieval.base import Hit, Passage

log = logging.getLogger(__name__)

SPEC_PREFIX = "ray://"
DEFAULT_APP = "searchgym"


class ShardUnavailableError(RetrieverUnavailableError):
    """A shard did not answer (no live replica, or its replicas kept dying past the retries); the message
    names the shard. Over HTTP it is a 503."""


class ShardReplyError(RetrieverUnavailableError):
    """A shard answered something that cannot be merged (a row out of its range, a non-finite score, ...)."""


@dataclass(frozen=True)
class ShardSource:
    """Where shard ``shard`` of ``of`` lives: index directory ``path``, searched with its own shard ``local``;
    its rows are ``start .. start + n - 1`` of the corpus of ``n_total`` passages with ``fingerprint``; rows of
    ``path``'s index are global rows minus ``offset``. ``kind``: ``bm25`` or ``dense``."""

    path: str
    local: int
    shard: int
    of: int
    start: int
    n: int
    offset: int
    n_total: int
    fingerprint: str
    kind: str = "bm25"  # or "dense": a Flat FAISS shard with its query encoder

    @property
    def label(self) -> str:
        return f"shard {self.shard} of {self.of} ({self.path})"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _manifest(path: Path) -> dict[str, Any]:
    from searchgym.retrieval.index import read_manifest

    return read_manifest(path)


def _split_source(path: Path, m: dict[str, Any], split: Any, kind: str) -> list[ShardSource]:
    try:
        return [ShardSource(str(path), 0, int(split["shard"]), int(split["of"]), int(split["start"]),
                            int(m["n_passages"]), int(split["start"]), int(split["n_passages"]),
                            str(split["corpus_fingerprint"]), kind)]
    except (KeyError, TypeError, ValueError):
        raise ConfigError(f"{path}/manifest.json: its split_from record is damaged; split again") from None


def _sources_of_index(path: Path) -> list[ShardSource]:
    """The shards of one index directory: every shard of a sharded BM25 index, or the one shard of a split one
    (BM25, or dense: a row range of a Flat index, see :func:`~searchgym.retrieval.split.split_dense_index`)."""
    from searchgym.retrieval.dense_scale import NAME as DENSE
    from searchgym.retrieval.sharded import NAME

    m = _manifest(path)
    entry = m["backends"].get(NAME)
    if entry is None:
        dense = m["backends"].get(DENSE) or {}
        if isinstance(dense.get("split_from"), dict):
            return _split_source(path, m, dense["split_from"], "dense")
        raise ConfigError(f"{path} is not a sharded BM25 index, nor a dense shard (backends: "
                          f"{sorted(m['backends'])}); build it with `searchgym index build CORPUS --shards N` (and "
                          "optionally `searchgym index split`), or split a Flat dense index with `searchgym index "
                          "split DIR --out OUT --shards N`")
    if isinstance(entry.get("split_from"), dict):
        return _split_source(path, m, entry["split_from"], "bm25")
    specs = entry["shards"]
    return [ShardSource(str(path), i, i, len(specs), int(s["start"]), int(s["n"]), 0, int(m["n_passages"]),
                        str(m["corpus_fingerprint"])) for i, s in enumerate(specs)]


def shard_sources(paths: Sequence[str | os.PathLike[str]]) -> list[ShardSource]:
    """The shards that ``paths`` name, checked as one set (:func:`check_shard_set`), in shard order.

    One path: a sharded index (every shard of it), or a directory of ``searchgym index split`` output (its
    ``shard-NNN`` directories). Several paths: split shard directories, one each."""
    if not paths:
        raise ConfigError("name a sharded index, a `searchgym index split` output directory or its shard "
                          "directories")
    dirs = [Path(p) for p in paths]
    if len(dirs) == 1 and not (dirs[0] / "manifest.json").exists() and dirs[0].is_dir():
        dirs = sorted(d for d in dirs[0].iterdir() if d.is_dir() and d.name.startswith("shard-"))
        if not dirs:
            raise ConfigError(f"{paths[0]} holds neither manifest.json nor shard-NNN directories; give a sharded "
                              "index or the output of `searchgym index split`")
    sources = [s for d in dirs for s in _sources_of_index(d)]
    return check_shard_set(sources)


def check_shard_set(sources: Sequence[ShardSource]) -> list[ShardSource]:
    """Sorted by shard: refuse a set that would merge wrongly (mixed builds, a shard twice or missing, row
    ranges that do not tile the corpus)."""
    if not sources:
        raise ConfigError("no shards to serve")
    prints = sorted({s.fingerprint for s in sources})
    if len(prints) > 1:
        raise ConfigError(f"the shards come from {len(prints)} different builds (corpus fingerprints "
                          f"{', '.join(prints)}); their scores are not comparable — serve shards of one split")
    kinds = sorted({s.kind for s in sources})
    if len(kinds) > 1:
        raise ConfigError(f"the shards mix {' and '.join(kinds)} shards; their scores are not comparable — serve "
                          "the shards of one split")
    of = {s.of for s in sources} | {len(sources)}
    seen = sorted(s.shard for s in sources)
    if len(of) > 1 or seen != list(range(len(sources))):
        twice = sorted({i for i in seen if seen.count(i) > 1})
        raise ConfigError(f"expected shards 0..{max(of) - 1} once each, got {seen}"
                          + (f" (shard {twice} listed twice)" if twice else "")
                          + f": {[s.path for s in sources]}")
    ordered = sorted(sources, key=lambda s: s.shard)
    row = 0
    for s in ordered:
        if s.start != row or s.n <= 0:
            raise ConfigError(f"{s.label} holds rows {s.start}..{s.start + s.n - 1}, expected to start at {row}")
        row += s.n
    if row != ordered[0].n_total:
        raise ConfigError(f"the shards hold {row} passages, the corpus {ordered[0].n_total}")
    return ordered


# -- replies and the merge --------------------------------------------------------------------------------
Reply = list[list[tuple[int, float, Passage]]]  # per query: (global row, score, passage), best first


def validate_reply(reply: Any, source: ShardSource, n_queries: int, k: int) -> Reply:
    """``reply`` if it can be merged, else :class:`ShardReplyError` naming the shard and the fault."""
    def bad(why: str) -> ShardReplyError:
        return ShardReplyError(f"{source.label} answered a reply that cannot be merged: {why}")

    if not isinstance(reply, list) or len(reply) != n_queries:
        raise bad(f"expected a list of {n_queries} hit lists, got {type(reply).__name__}")
    lo, hi = source.start, source.start + source.n
    for qi, hits in enumerate(reply):
        if not isinstance(hits, list) or len(hits) > k:
            raise bad(f"query {qi}: more than k={k} hits or not a list")
        prev: tuple[float, int] | None = None
        for h in hits:
            if not (isinstance(h, tuple) and len(h) == 3 and isinstance(h[2], Passage)):
                raise bad(f"query {qi}: a hit is not (row, score, passage)")
            row, score = h[0], h[1]
            if not (isinstance(row, int) and lo <= row < hi):
                raise bad(f"query {qi}: row {row!r} outside the shard's rows {lo}..{hi - 1}")
            if not (isinstance(score, float) and math.isfinite(score)):
                raise bad(f"query {qi}: score {score!r} is not a finite float")
            if prev is not None and (-score, row) <= (-prev[0], prev[1]):
                raise bad(f"query {qi}: hits out of (score desc, row asc) order or repeated (row {row})")
            prev = (score, row)
        if len({h[2].id for h in hits}) != len(hits):
            raise bad(f"query {qi}: a passage id appears twice")
    return reply


def merge_replies(replies: Sequence[Reply], k: int) -> list[list[Hit]]:
    """The exact top ``k`` of validated shard replies, given in shard order (see the module docstring)."""
    n = len(replies[0]) if replies else 0
    merged = []
    for qi in range(n):
        cands = [(-score, si, pos, p, score) for si, reply in enumerate(replies)
                 for pos, (_row, score, p) in enumerate(reply[qi])]
        cands.sort(key=lambda c: c[:3])
        merged.append([Hit(c[3].id, c[4], c[3]) for c in cands[:k]])
    return merged


def check_queries(queries: Any) -> list[str]:
    if isinstance(queries, str):
        raise TypeError("batch_search takes a list of queries; use search() for one")
    queries = list(queries)
    bad = next((q for q in queries if not isinstance(q, str)), None)
    if bad is not None:
        raise QueryError(f"a query must be a string, got {type(bad).__name__}: {bad!r:.80}")
    return queries


# -- the client: retriever="ray://APP" ---------------------------------------------------------------------
def app_name(spec: str) -> str:
    """``"ray://APP"`` -> ``"APP"``."""
    name = spec[len(SPEC_PREFIX):].strip("/") if spec.startswith(SPEC_PREFIX) else ""
    if not name or "/" in name:
        raise ConfigError(f"a Ray Serve retriever spec is ray://APP (the app `searchgym serve-ray --name APP` "
                          f"deployed), got {spec!r}")
    return name


def is_spec(x: Any) -> bool:
    return isinstance(x, str) and x.startswith(SPEC_PREFIX)


def _unwrap(exc: BaseException) -> BaseException:
    """A searchgym error raised inside the app, as itself (Ray wraps it in a RayTaskError)."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, SearchGymError) else exc


class RayServeRetriever:
    """A Retriever over a running ``searchgym serve-ray`` app (spec ``ray://APP``).

    Joins the Ray cluster if this process is not in one yet (``RAY_ADDRESS``, else the local cluster; never
    starts one). ``timeout`` bounds one call; a call to an ingress replica that died is retried
    ``max_retries`` times. Picklable: the handle is looked up again on the other side.

    A shard that stays down is :class:`ShardUnavailableError`. ``allow_partial=True`` asks for the hits of the
    shards that answered instead (a warning names the missing ones); :meth:`batch_search_partial` returns them
    with the missing shards, whatever ``allow_partial`` says.
    """

    kind = "bm25"

    def __init__(self, app: str = DEFAULT_APP, *, timeout: float = 60.0, max_retries: int = 2,
                 allow_partial: bool = False) -> None:
        self.app = app_name(app) if is_spec(app) else app
        self.timeout, self.max_retries, self.allow_partial = float(timeout), int(max_retries), bool(allow_partial)
        self._handle: Any = None
        self._info: dict[str, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"app": self.app, "timeout": self.timeout, "max_retries": self.max_retries,
                "allow_partial": self.allow_partial}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["app"], timeout=state["timeout"], max_retries=state["max_retries"],  # type: ignore[misc]
                      allow_partial=state.get("allow_partial", False))

    def __repr__(self) -> str:
        return f"RayServeRetriever({SPEC_PREFIX}{self.app})"

    @property
    def handle(self) -> Any:
        if self._handle is None:
            self._handle = _app_handle(self.app)
        return self._handle

    def info(self) -> dict[str, Any]:
        if self._info is None:
            self._info = self._call("info", timeout=self.timeout)
        return self._info

    def __len__(self) -> int:
        return int(self.info()["n_passages"])

    @property
    def params(self) -> dict[str, Any]:
        return {"app": self.app, "shards": self.info().get("shards")}

    def search(self, query: str, k: int = 3) -> list[Hit]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Hit]]:
        """Exact top ``k`` over every shard, or :class:`ShardUnavailableError` naming the shard that is down
        (with ``allow_partial``: the hits of the shards that answered, and a warning naming the others)."""
        if self.allow_partial:
            return self._warn_partial(*self.batch_search_partial(queries, k))
        queries = check_queries(queries)
        if k <= 0 or not queries:
            return [[] for _ in queries]
        return self._call("search", queries, int(k), timeout=self.timeout)

    def batch_search_partial(self, queries: Sequence[str], k: int = 3) -> tuple[list[list[Hit]], list[dict[str, Any]]]:
        """``(hits, missing)``: the exact top ``k`` over the shards that answered, and ``{"shard", "of",
        "error"}`` for each shard that stayed down (empty: the answer is complete). Still
        :class:`ShardUnavailableError` when no shard answered."""
        queries = check_queries(queries)
        if k <= 0 or not queries:
            return [[] for _ in queries], []
        got = self._call("search_partial", queries, int(k), timeout=self.timeout)
        return got["result"], got["missing_shards"]

    async def abatch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Hit]]:
        """:meth:`batch_search` for asyncio trainers: awaits the app without blocking the event loop."""
        queries = check_queries(queries)
        if k <= 0 or not queries:
            return [[] for _ in queries]
        import asyncio

        method = "search_partial" if self.allow_partial else "search"
        last: BaseException | None = None
        for _ in range(self.max_retries + 1):
            try:
                resp = self.handle.options(method_name=method).remote(queries, int(k))
                got = await asyncio.wait_for(resp, self.timeout)
                return self._warn_partial(got["result"], got["missing_shards"]) if self.allow_partial else got
            except Exception as exc:  # noqa: BLE001 - sorted below
                last = self._retryable(exc)
        raise self._down(last)

    def _warn_partial(self, hits: list[list[Hit]], missing: list[dict[str, Any]]) -> list[list[Hit]]:
        """``hits``, after a warning naming the ``missing`` shards (if any)."""
        if missing:
            log.warning("Ray Serve app %r answered without %s", self.app,
                        "; ".join(f"shard {m['shard']} of {m['of']}" for m in missing))
        return hits

    def _call(self, method: str, *args: Any, timeout: float) -> Any:
        last: BaseException | None = None
        for _ in range(self.max_retries + 1):
            try:
                return self.handle.options(method_name=method).remote(*args).result(timeout_s=timeout)
            except Exception as exc:  # noqa: BLE001 - sorted below
                last = self._retryable(exc)
        raise self._down(last)

    def _retryable(self, exc: BaseException) -> BaseException:
        """Raise what is final (an error of the app, e.g. a shard that is down); return what may be retried."""
        inner = _unwrap(exc)
        if isinstance(inner, SearchGymError):
            raise inner from None
        return exc

    def _down(self, last: BaseException | None) -> RetrieverUnavailableError:
        return RetrieverUnavailableError(
            f"the Ray Serve app {self.app!r} did not answer after {self.max_retries + 1} tries "
            f"({type(last).__name__}: {str(last)[:300]}); is `searchgym serve-ray` running on this cluster?")

    def close(self) -> None:
        self._handle = None


def _app_handle(app: str) -> Any:
    try:
        import ray
        from ray import serve
    except ImportError as exc:
        raise ConfigError(f"retriever='ray://{app}' needs Ray Serve: pip install 'searchgym[ray]' ({exc})") from None
    if not ray.is_initialized():
        try:
            ray.init(address=os.environ.get("RAY_ADDRESS") or "auto", log_to_driver=False,
                     configure_logging=False)
        except ConnectionError as exc:
            raise RetrieverUnavailableError(f"no Ray cluster to find the app {app!r} in ({exc}); start one with "
                                            "`ray start --head` and `searchgym serve-ray`, or set RAY_ADDRESS"
                                            ) from None
    try:
        return serve.get_app_handle(app)
    except Exception as exc:  # noqa: BLE001 - Ray raises RayServeException / ValueError for a missing app
        raise RetrieverUnavailableError(f"no Ray Serve app named {app!r} on this cluster ({exc}); start it with "
                                        f"`searchgym serve-ray INDEX --name {app}`") from None


def describe(sources: Sequence[ShardSource]) -> str:
    return json.dumps([s.to_dict() for s in sources])
