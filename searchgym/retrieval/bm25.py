"""BM25 retrieval on bm25s (numba or numpy backend), with rank-bm25 as a reference backend.

Hot path: a query becomes term ids through a per-word cache (``QueryEncoder``), all queries of a batch go to
one call of bm25s' numba retrieval kernel, and hits are made from precomputed id / passage lists. Zero-score
documents are never returned (a query whose terms match nothing gets ``[]``).

numba: bm25s compiles its kernels with ``njit`` and no disk cache, so every new process pays ~6-15 s of
compilation on its first query. We wrap the same kernel (``bm25s.numba.retrieve_utils``) with
``njit(cache=True)`` so the compiled code is cached on disk and later processes start in well under a second.
"""

from __future__ import annotations

import gc
import importlib.util
import logging
import threading
import types
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.errors import ConfigError, CorpusFormatError, QueryError
from searchgym.retrieval._bm25s import ensure_bm25s
from searchgym.retrieval.base import Hit, Passage
from searchgym.retrieval.index import LoadContext, load_index, register_backend, save_retrievers
from searchgym.retrieval.tokenize import Tokenizer, TokenizerConfig

log = logging.getLogger(__name__)

BACKENDS = ("auto", "numba", "numpy", "rank_bm25")
METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")
NUMBA_AVAILABLE = importlib.util.find_spec("numba") is not None

_kernels: dict[bool, Any] = {}
_kernel_lock = threading.Lock()
# numba's default (workqueue) threading layer aborts the process on concurrent parallel launches.
_parallel_lock = threading.Lock()


def _numba_kernel(parallel: bool):
    """bm25s' retrieval kernel, compiled with a disk cache (falls back to bm25s' own, uncached one)."""
    k = _kernels.get(parallel)
    if k is not None:
        return k
    with _kernel_lock:
        if parallel in _kernels:
            return _kernels[parallel]
        import numba
        ensure_bm25s()
        from bm25s.numba import retrieve_utils as ru

        py = ru._retrieve_internal_jitted
        # A distinct function object per variant so the serial and parallel builds get their own cache files.
        fn = types.FunctionType(py.__code__, py.__globals__, py.__name__, py.__defaults__, py.__closure__)
        fn.__qualname__ = f"searchgym_{'parallel' if parallel else 'serial'}_{py.__name__}"
        fn.__module__ = py.__module__
        try:
            k = numba.njit(parallel=True, cache=True)(fn) if parallel else numba.njit(nogil=True, cache=True)(fn)
        except (RuntimeError, OSError) as exc:  # no writable cache location: compile in memory each process
            log.info("numba disk cache unavailable (%s); using bm25s' uncached kernel", exc)
            k = ru._retrieve_internal_jitted_parallel if parallel else ru._retrieve_internal_jitted_serial
        _kernels[parallel] = k
        return k


def resolve_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise ConfigError(f"unknown BM25 backend {backend!r}; choose one of {BACKENDS}")
    if backend == "auto":
        return "numba" if NUMBA_AVAILABLE else "numpy"
    if backend == "numba" and not NUMBA_AVAILABLE:
        raise ConfigError("backend='numba' needs numba: pip install 'searchgym[fast]' (or use backend='numpy')")
    return backend


class _Bm25sEngine:
    """Scores term-id queries with a bm25s index; returns (scores, indices) arrays of shape (n, k)."""

    def __init__(self, bm: Any, backend: str) -> None:
        self.bm = bm
        self.backend = backend
        s = bm.scores
        self.data, self.indices, self.indptr = s["data"], s["indices"], s["indptr"]
        self.num_docs = int(s["num_docs"])
        self.nonocc = getattr(bm, "nonoccurrence_array", None)
        self.dtype = np.dtype(bm.dtype)
        self.int_dtype = np.dtype(bm.int_dtype)

    def topk(self, id_lists: list[list[int]], k: int, n_threads: int) -> tuple[np.ndarray, np.ndarray]:
        if self.backend == "numba":
            return self._topk_numba(id_lists, k, n_threads)
        return self._topk_numpy(id_lists, k, n_threads)

    def _topk_numba(self, id_lists, k, n_threads):
        if len(id_lists) == 1:  # the single-query path: skip the batch bookkeeping
            flat = np.array(id_lists[0], dtype=self.int_dtype)
            ptr = np.array((0, len(flat)), dtype=self.int_dtype)
        else:
            ptr = np.zeros(len(id_lists) + 1, dtype=self.int_dtype)
            ptr[1:] = np.cumsum(np.fromiter(map(len, id_lists), dtype=np.int64, count=len(id_lists)))
            flat = np.fromiter(chain.from_iterable(id_lists), dtype=self.int_dtype, count=int(ptr[-1]))
        args = (flat, ptr, k, True, self.dtype, self.int_dtype, self.data, self.indptr, self.indices,
                self.num_docs, self.nonocc, None)
        if n_threads > 1 and len(id_lists) >= 2 * n_threads:
            import numba

            with _parallel_lock:
                old = numba.get_num_threads()
                numba.set_num_threads(min(n_threads, numba.config.NUMBA_NUM_THREADS))
                try:
                    return _numba_kernel(True)(*args)
                finally:
                    numba.set_num_threads(old)
        return _numba_kernel(False)(*args)

    def _one_numpy(self, ids: list[int], k: int) -> tuple[np.ndarray, np.ndarray]:
        scores = self.bm.get_scores_from_ids(ids)
        if k < len(scores):
            part = np.argpartition(-scores, k - 1)[:k]
        else:
            part = np.arange(len(scores))
        order = part[np.argsort(-scores[part], kind="stable")]
        return scores[order], order

    def _topk_numpy(self, id_lists, k, n_threads):
        if n_threads > 1 and len(id_lists) > 1:
            with ThreadPoolExecutor(max_workers=n_threads) as ex:
                res = list(ex.map(lambda q: self._one_numpy(q, k), id_lists))
        else:
            res = [self._one_numpy(q, k) for q in id_lists]
        return np.stack([r[0] for r in res]), np.stack([r[1] for r in res])


class _RankBM25Engine:
    """rank-bm25 behind the same interface (reference backend: slow, keeps the tokenised corpus in memory)."""

    def __init__(self, corpus_tokens: list[list[str]], method: str, k1: float, b: float):
        import rank_bm25

        if method in ("lucene", "robertson", "atire"):
            self.bm = rank_bm25.BM25Okapi(corpus_tokens, k1=k1, b=b)
        elif method == "bm25l":
            self.bm = rank_bm25.BM25L(corpus_tokens, k1=k1, b=b)
        else:
            self.bm = rank_bm25.BM25Plus(corpus_tokens, k1=k1, b=b)
        self.num_docs = len(corpus_tokens)

    def topk(self, token_lists: list[list[str]], k: int, n_threads: int) -> Any:
        out_s, out_i = [], []
        for toks in token_lists:
            scores = np.asarray(self.bm.get_scores(toks), dtype=np.float64)
            part = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
            order = part[np.argsort(-scores[part], kind="stable")]
            out_s.append(scores[order])
            out_i.append(order)
        return np.stack(out_s), np.stack(out_i)


def validate_bm25s_arrays(d: Path, bm: Any, n_passages: int) -> None:
    """Check a loaded bm25s index so the numba/numpy kernels cannot read out of bounds: every document id in
    ``indices`` below ``n_passages``, ``indptr`` monotone from 0 to ``len(indices)``, every vocabulary id a
    valid row. Costs one pass over the arrays (~0.1 s per 100M entries); raises IndexCorruptError."""
    from searchgym.errors import IndexCorruptError

    hint = f"rebuild it with `searchgym index build CORPUS --out {d.parent}`"

    def bad(name: str, what: str) -> IndexCorruptError:
        return IndexCorruptError(f"{d / name}: {what}; {hint}")

    s = bm.scores
    data, indices, indptr = s.get("data"), s.get("indices"), s.get("indptr")
    for name, arr, kind in (("data.csc.index.npy", data, "f"), ("indices.csc.index.npy", indices, "iu"),
                            ("indptr.csc.index.npy", indptr, "iu")):
        if not isinstance(arr, np.ndarray) or arr.ndim != 1 or arr.dtype.kind not in kind \
                or not arr.dtype.isnative:
            raise bad(name, f"expected a 1-d native {'float' if kind == 'f' else 'integer'} array, got "
                            f"{getattr(arr, 'dtype', type(arr).__name__)} of shape {getattr(arr, 'shape', None)}")
    if s.get("num_docs") != n_passages:
        raise bad("params.index.json", f"num_docs is {s.get('num_docs')!r}, the index holds {n_passages} passages")
    if len(data) != len(indices):
        raise bad("data.csc.index.npy", f"{len(data)} scores for {len(indices)} document ids")
    if len(indptr) < 1 or indptr[0] != 0 or indptr[-1] != len(indices):
        raise bad("indptr.csc.index.npy", f"offsets must run from 0 to {len(indices)}")
    if len(indptr) > 1 and (np.diff(indptr) < 0).any():
        raise bad("indptr.csc.index.npy", "offsets are not non-decreasing")
    if len(indices) and (int(indices.min()) < 0 or int(indices.max()) >= n_passages):
        raise bad("indices.csc.index.npy", f"holds document ids outside 0..{n_passages - 1}")
    vocab = bm.vocab_dict
    if not isinstance(vocab, dict):
        raise bad("vocab.index.json", f"expected an object of term -> id, got {type(vocab).__name__}")
    n_terms = len(indptr) - 1
    # bm25s adds the empty term with id n_terms (one past the last row); queries never look it up.
    vals = [v for t, v in vocab.items() if t != "" or v != n_terms]
    ids = np.fromiter(vals, dtype=np.int64, count=len(vals)) if all(type(v) is int for v in vals) else None
    if ids is None or not all(isinstance(t, str) for t in vocab) or (
            len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= n_terms)):
        raise bad("vocab.index.json", f"term ids must be integers in 0..{n_terms - 1}")
    nonocc = getattr(bm, "nonoccurrence_array", None)
    if nonocc is not None and (not isinstance(nonocc, np.ndarray) or nonocc.shape != (n_terms,)
                               or nonocc.dtype.kind != "f"):
        raise bad("nonoccurrence_array.index.npy", f"expected {n_terms} floats")
    try:
        fdt, idt = np.dtype(bm.dtype), np.dtype(bm.int_dtype)
    except TypeError:
        raise bad("params.index.json", "dtype / int_dtype are not numpy dtypes") from None
    if fdt.kind != "f" or idt.kind not in "iu" or np.iinfo(idt).max < max(n_terms, n_passages):
        raise bad("params.index.json", f"dtype {fdt} / int_dtype {idt} cannot hold this index")


_NO_TERMS = ("none of the {n} passage(s) has an indexable term (every token is a stopword or punctuation); "
             "check the corpus's text field, or pass stopwords=None")


class BM25Retriever:
    """BM25 over a list of passages (bm25s; numba backend when installed, else numpy; or rank-bm25).

    Example::

        r = BM25Retriever(passages, stemmer="english")
        r.search("capital of france", k=3)       # -> [Hit(id, score, passage), ...]
        r.batch_search(["q1", "q2"], k=3)        # one kernel call for all queries
        r.save("idx/"); BM25Retriever.load("idx/")
    """

    kind = "bm25"

    def __init__(
        self,
        passages: Sequence[Passage],
        *,
        k1: float = 1.5,
        b: float = 0.75,
        method: str = "lucene",
        stopwords: str | Sequence[str] | None = "en",
        stemmer: str | None = None,
        lowercase: bool = True,
        backend: str = "auto",
        n_threads: int | None = None,
        show_progress: bool = False,
    ):
        if method not in METHODS:
            raise ConfigError(f"unknown BM25 method {method!r}; choose one of {METHODS}")
        if not passages:
            raise ConfigError("cannot build a BM25 index over an empty corpus")
        self.tokenizer = Tokenizer(lowercase=lowercase, stopwords=stopwords, stemmer=stemmer)
        self.k1, self.b, self.method = float(k1), float(b), method
        self.backend = resolve_backend(backend)
        texts = (p.contents for p in passages)
        if self.backend == "rank_bm25":
            tokens = self.tokenizer.tokenize_many(texts)
            if not any(tokens):
                raise CorpusFormatError(_NO_TERMS.format(n=len(passages)))
            engine: Any = _RankBM25Engine(tokens, method, k1, b)
            vocab: dict[str, int] = {}
        else:
            ensure_bm25s()
            import bm25s

            ids, vocab = self.tokenizer.corpus_ids(texts, show_progress=show_progress)
            if not vocab:  # bm25s itself fails with "max() arg is an empty sequence"
                raise CorpusFormatError(_NO_TERMS.format(n=len(passages)))
            bm = bm25s.BM25(k1=k1, b=b, method=method, backend="numpy")
            bm.index((ids, vocab), show_progress=show_progress)
            del ids
            engine = _Bm25sEngine(bm, self.backend)
            vocab = bm.vocab_dict
        self._setup(passages, engine, vocab, n_threads)

    def _setup(self, passages: Sequence[Passage], engine: Any, vocab: dict[str, int], n_threads: int | None):
        self._passages = list(passages)
        self._ids = [p.id for p in self._passages]
        self._engine = engine
        self._qenc = self.tokenizer.query_encoder(vocab)
        # Serial by default: on a busy 2-core machine numba's parallel kernel ran 6x slower than the serial
        # one (it fights the env, the server and torch for cores) and gained only ~20% when idle.
        # Pass n_threads=os.cpu_count() for big batches on a machine of your own.
        self.n_threads = n_threads if n_threads is not None else 1

    # -- properties ---------------------------------------------------------------------------------
    @property
    def passages(self) -> list[Passage]:
        return self._passages

    def __len__(self) -> int:
        return len(self._passages)

    @property
    def params(self) -> dict[str, Any]:
        return {"k1": self.k1, "b": self.b, "method": self.method, "tokenizer": self.tokenizer.config.to_dict()}

    def __repr__(self) -> str:
        return f"BM25Retriever(n={len(self)}, backend={self.backend!r}, method={self.method!r})"

    # -- search -------------------------------------------------------------------------------------
    def _encode(self, query: str):
        if self.backend == "rank_bm25":
            toks = self.tokenizer.tokenize(query)
            if len(toks) > self._qenc.max_terms:  # same cap as the bm25s path
                toks = list(dict.fromkeys(toks))[: self._qenc.max_terms]
            return toks
        return self._qenc.ids(query)

    def search(self, query: str, k: int = 3) -> list[Hit]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int = 3, *, n_threads: int | None = None) -> list[list[Hit]]:
        if isinstance(queries, str):
            raise TypeError("batch_search takes a list of queries; use search() for one")
        if k <= 0:
            return [[] for _ in queries]
        k = min(int(k), len(self._passages))
        try:
            encoded = [self._encode(q) for q in queries]
        except (AttributeError, TypeError):
            bad = next(q for q in queries if not isinstance(q, str))
            raise QueryError(f"a query must be a string, got {type(bad).__name__}: {bad!r:.80}") from None
        live = [i for i, q in enumerate(encoded) if q]
        results: list[list[Hit]] = [[] for _ in encoded]
        if not live:
            return results
        batch = encoded if len(live) == len(encoded) else [encoded[i] for i in live]
        scores, idx = self._engine.topk(batch, k, self.n_threads if n_threads is None else n_threads)
        # Rows are sorted by descending score; keep the positive prefix (zero = no query term matched).
        npos = (scores > 0).sum(axis=1).tolist()
        id_of, passage_of, make = self._ids.__getitem__, self._passages.__getitem__, Hit._make
        # Making thousands of Hit tuples triggers the cyclic GC, which then walks the whole corpus of
        # Passage objects; nothing here makes cycles, so pause it (measured: +25-60% batched throughput).
        paused = len(live) > 8 and gc.isenabled()
        if paused:
            gc.disable()
        try:
            for row, n, s_row, i_row in zip(live, npos, scores.tolist(), idx.tolist()):
                if n < k:
                    s_row, i_row = s_row[:n], i_row[:n]
                results[row] = list(map(make, zip(map(id_of, i_row), s_row, map(passage_of, i_row))))
        finally:
            if paused:
                gc.enable()
        return results

    def warmup(self) -> None:
        """Compile (or load from the disk cache) the numba kernels now rather than on the first query."""
        if self.backend == "numba":
            probe = next(iter(self._qenc._vocab.values()), 0)
            self._engine.topk([[probe]], 1, 1)
            self._engine.topk([[probe]] * (2 * max(2, self.n_threads)), 1, max(2, self.n_threads))

    # -- persistence --------------------------------------------------------------------------------
    def save(self, path: str | Path, *, overwrite: bool = False) -> Path:
        """Write a self-contained index directory (manifest, passages, bm25 files), atomically."""
        return save_retrievers(path, self._passages, bm25=self, overwrite=overwrite)

    @classmethod
    def load(cls, path: str | Path, *, backend: str = "auto", expected_fingerprint: str | None = None,
             mmap: bool = False, verify: bool = True) -> BM25Retriever:
        r = load_index(path, kind="bm25", backend=backend, expected_fingerprint=expected_fingerprint, mmap=mmap,
                       verify=verify)
        assert isinstance(r, cls)
        return r

    def _save_files(self, d: Path) -> dict[str, Any]:
        """Write this backend's files into ``d`` (a fresh directory); return its manifest entry."""
        d.mkdir(parents=True, exist_ok=True)
        entry: dict[str, Any] = {"engine": "rank_bm25" if self.backend == "rank_bm25" else "bm25s", **self.params}
        if self.backend != "rank_bm25":
            ensure_bm25s()
            import bm25s

            self._engine.bm.save(str(d), corpus=None, allow_pickle=False)
            entry["bm25s_version"] = getattr(bm25s, "__version__", "unknown")
        return entry

    @classmethod
    def _from_files(cls, d: Path, entry: dict[str, Any], passages: list[Passage], *, backend: str = "auto",
                    mmap: bool = False, n_threads: int | None = None) -> BM25Retriever:
        tcfg = TokenizerConfig.from_dict(entry.get("tokenizer", {}))
        if entry.get("engine") == "rank_bm25" or backend == "rank_bm25":
            return cls(passages, k1=entry["k1"], b=entry["b"], method=entry["method"], stopwords=tcfg.stopwords,
                       stemmer=tcfg.stemmer, lowercase=tcfg.lowercase, backend="rank_bm25", n_threads=n_threads)
        ensure_bm25s()
        import bm25s

        bm = bm25s.BM25.load(str(d), load_corpus=False, mmap=mmap, allow_pickle=False, backend="numpy",
                             show_progress=False)
        validate_bm25s_arrays(d, bm, len(passages))
        self = cls.__new__(cls)
        self.tokenizer = Tokenizer.from_config(tcfg)
        self.k1, self.b, self.method = float(entry["k1"]), float(entry["b"]), entry["method"]
        self.backend = resolve_backend(backend)
        self._setup(passages, _Bm25sEngine(bm, self.backend), bm.vocab_dict, n_threads)
        return self


def _check_load_options(options: dict[str, Any]) -> None:
    if options.get("kind") != "rank_bm25":
        resolve_backend(options.get("backend", "auto"))


def _load_backend(ctx: LoadContext) -> BM25Retriever:
    be = "rank_bm25" if ctx.options.get("kind") == "rank_bm25" else resolve_backend(ctx.options.get("backend", "auto"))
    return BM25Retriever._from_files(ctx.dir, ctx.entry, list(ctx.passages), backend=be,
                                     mmap=bool(ctx.options.get("mmap")), n_threads=ctx.options.get("n_threads"))


register_backend("bm25", provides="bm25", load=_load_backend, check_options=_check_load_options)
