"""Retrieval: corpora, BM25 (bm25s / rank-bm25), dense FAISS, hybrid fusion, caching, index directories.

Names load on first use, so ``import searchgym.retrieval`` does not pull in bm25s, faiss or torch.

    from searchgym.retrieval import load_corpus, BM25Retriever, build_index, load_index
    r = BM25Retriever(load_corpus("corpus.jsonl"))
    r.batch_search(["who wrote hamlet"], k=3)
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

from searchgym.retrieval.base import Hit, Passage, Retriever

_LAZY = {
    "iter_corpus": "corpus",
    "load_corpus": "corpus",
    "corpus_fingerprint": "corpus",
    "parse_contents": "corpus",
    "write_jsonl": "corpus",
    "CorpusNotFoundError": "corpus",
    "Tokenizer": "tokenize",
    "TokenizerConfig": "tokenize",
    "BM25Retriever": "bm25",
    "DenseRetriever": "dense",
    "load_encoder": "dense",
    "HybridRetriever": "hybrid",
    "CachedRetriever": "cache",
    "CacheStats": "cache",
    "build_index": "build",
    "load_index": "index",
    "index_info": "index",
    "read_manifest": "index",
    "save_retrievers": "index",
    "FORMAT_VERSION": "index",
    "RemoteRetriever": "remote",
    "ShardedBM25Retriever": "sharded",
    "build_sharded_index": "sharded",
    "RayServeRetriever": "serve_ray",
    "ShardUnavailableError": "serve_ray",
    "split_sharded_index": "split",
    "FaissRetriever": "dense_scale",
    "import_faiss_index": "dense_scale",
    "build_ivfpq_index": "dense_scale",
    "load_hybrid": "dense_scale",
    "PassageStore": "store",
    "write_synthetic_corpus": "synth",
    "register_backend": "index",
}

__all__ = [
    "FORMAT_VERSION",
    "BM25Retriever",
    "CacheStats",
    "CachedRetriever",
    "CorpusNotFoundError",
    "DenseRetriever",
    "FaissRetriever",
    "Hit",
    "HybridRetriever",
    "Passage",
    "PassageStore",
    "RayServeRetriever",
    "RemoteRetriever",
    "Retriever",
    "ShardUnavailableError",
    "ShardedBM25Retriever",
    "Tokenizer",
    "TokenizerConfig",
    "build_index",
    "build_ivfpq_index",
    "build_retriever",
    "build_sharded_index",
    "corpus_fingerprint",
    "import_faiss_index",
    "index_info",
    "iter_corpus",
    "load_corpus",
    "load_encoder",
    "load_hybrid",
    "load_index",
    "parse_contents",
    "read_manifest",
    "register_backend",
    "save_retrievers",
    "split_sharded_index",
    "write_jsonl",
    "write_synthetic_corpus",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"searchgym.retrieval.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'searchgym.retrieval' has no attribute {name!r}")


def build_retriever(passages: Sequence[Passage], kind: str = "bm25", **kw: Any) -> Retriever:
    """Build an in-memory retriever: kind "bm25" (bm25s), "rank_bm25", "dense" or "hybrid" (BM25 + dense, RRF).

    Keyword arguments go to the backend (``BM25Retriever`` / ``DenseRetriever``); for "hybrid", ``k_rrf``,
    ``weights`` and ``depth`` go to ``HybridRetriever`` and ``model`` / dense options to the dense part.
    """
    from searchgym.errors import ConfigError

    if kind in ("bm25", "rank_bm25"):
        from searchgym.retrieval.bm25 import BM25Retriever

        if kind == "rank_bm25":
            kw["backend"] = "rank_bm25"
        return BM25Retriever(passages, **kw)
    if kind == "dense":
        from searchgym.retrieval.dense import DenseRetriever

        return DenseRetriever(passages, **kw)
    if kind == "hybrid":
        from searchgym.retrieval.bm25 import BM25Retriever
        from searchgym.retrieval.build import BM25_KEYS
        from searchgym.retrieval.dense import DenseRetriever
        from searchgym.retrieval.hybrid import HybridRetriever

        hyb = {k: kw.pop(k) for k in ("k_rrf", "weights", "depth") if k in kw}
        bm = BM25Retriever(passages, **{k: v for k, v in kw.items() if k in BM25_KEYS})
        dn = DenseRetriever(passages, **{k: v for k, v in kw.items() if k not in BM25_KEYS})
        return HybridRetriever([bm, dn], **hyb)
    raise ConfigError(f"unknown retriever kind {kind!r}; choose bm25, rank_bm25, dense or hybrid")
