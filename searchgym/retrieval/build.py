"""``build_index``: a corpus in, an index directory out (BM25 and/or dense, or a sharded BM25 index).

The orchestration sits above the index layer (:mod:`searchgym.retrieval.index`) and the backends, so neither
imports the other's builder. ``shards`` / ``shard_size`` select the streaming sharded build
(:func:`searchgym.retrieval.sharded.build_sharded_index`), which never holds the corpus in memory.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from searchgym import dirswap
from searchgym.errors import ConfigError
from searchgym.retrieval.base import Passage
from searchgym.retrieval.corpus import load_corpus
from searchgym.retrieval.index import _check_target, _is_complete_index, save_retrievers

BM25_KEYS = {"k1", "b", "method", "stopwords", "stemmer", "lowercase", "backend", "n_threads"}
DENSE_KEYS = {"hnsw_m", "ef_search", "ef_construction", "batch_size", "device"}
IVFPQ_KEYS = {"nlist", "pq_m", "nbits", "nprobe", "train_size", "query_prefix", "passage_prefix"}
# Below this many passages the bm25s / encoder progress bars are noise (issue 22): they stay off.
PROGRESS_MIN_PASSAGES = 20_000


def build_index(
    corpus: str | Path | Sequence[Passage],
    out_dir: str | Path,
    *,
    bm25: bool = True,
    dense: str | None = None,
    hnsw: bool = False,
    overwrite: bool = False,
    show_progress: bool = True,
    format: str | None = None,
    shards: int | None = None,
    shard_size: int | None = None,
    ivfpq: bool = False,
    **params: Any,
) -> Path:
    """Build an index directory from a corpus file / HF dataset / list of passages.

    ``dense`` names the encoder (``"all-MiniLM-L6-v2"`` = the bundled default) or is None for no dense part;
    ``hnsw`` picks HNSW over Flat. ``params``: BM25 ones (k1, b, method, stopwords, stemmer, lowercase) and
    dense ones (hnsw_m, ef_search, ef_construction, batch_size, device). ``shards`` / ``shard_size``: build a
    streaming, sharded, memory-mapped BM25 index instead (BM25 only). ``ivfpq=True`` (with ``dense=MODEL``,
    ``bm25=False``): a streaming IVF-PQ build (:func:`searchgym.retrieval.dense_scale.build_ivfpq_index`; params
    nlist, pq_m, nbits, nprobe, train_size, query_prefix, passage_prefix, batch_size, device). Progress bars are
    shown only for corpora of at least 20,000 passages.
    """
    unknown = set(params) - BM25_KEYS - DENSE_KEYS - (IVFPQ_KEYS if ivfpq else set())
    if unknown:
        raise ConfigError(f"unknown index parameters {sorted(unknown)}; BM25: {sorted(BM25_KEYS)}, "
                          f"dense: {sorted(DENSE_KEYS)}")
    if not bm25 and not dense:
        raise ConfigError("an index needs BM25 and/or dense: keep bm25=True or give dense=MODEL")
    if ivfpq:
        if not dense or bm25:
            raise ConfigError("an IVF-PQ index is dense only: give dense=MODEL and bm25=False (CLI: --dense MODEL "
                              "--ivfpq --no-bm25); build BM25 as its own (sharded) index and fuse with load_hybrid")
        from searchgym.retrieval.dense_scale import build_ivfpq_index

        kw = {("m" if k == "pq_m" else k): v for k, v in params.items()
              if k in IVFPQ_KEYS | {"batch_size", "device"}}
        return build_ivfpq_index(corpus, out_dir, model=dense, overwrite=overwrite, format=format,
                                 show_progress=show_progress, **kw)
    if shards is not None or shard_size is not None:
        if dense or not bm25:
            raise ConfigError("a sharded index is BM25 only; build the dense part as its own index")
        from searchgym.retrieval.sharded import build_sharded_index

        kw = {k: v for k, v in params.items() if k in BM25_KEYS - {"backend", "n_threads"}}
        return build_sharded_index(corpus, out_dir, shards=shards, shard_size=shard_size, overwrite=overwrite,
                                   show_progress=show_progress, format=format, **kw)
    dirswap.cleanup_siblings(Path(out_dir), is_complete=_is_complete_index)
    _check_target(Path(out_dir), overwrite)  # fail before the (long) build, not after
    t0 = time.perf_counter()
    passages = list(corpus) if not isinstance(corpus, (str, Path)) else load_corpus(corpus, format=format)
    if not passages:
        raise ConfigError(f"the corpus {corpus if isinstance(corpus, (str, Path)) else ''} holds no passages")
    progress = show_progress and len(passages) >= PROGRESS_MIN_PASSAGES
    b = d = None
    if bm25:
        from searchgym.retrieval.bm25 import BM25Retriever

        kw = {k: v for k, v in params.items() if k in BM25_KEYS}
        kw.setdefault("backend", "numpy")  # building never needs the numba kernels
        b = BM25Retriever(passages, show_progress=progress, **kw)
    if dense:
        from searchgym.retrieval.dense import DenseRetriever

        kw = {k: v for k, v in params.items() if k in DENSE_KEYS}
        d = DenseRetriever(passages, model=dense, index_type="hnsw" if hnsw else "flat",
                           show_progress=progress, **kw)
    return save_retrievers(out_dir, passages, bm25=b, dense=d, overwrite=overwrite,
                           build_seconds=time.perf_counter() - t0)
