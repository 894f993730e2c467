"""Sharded BM25 for corpora that do not fit in memory: a streaming build and memory-mapped, exact search.

Build (``build_sharded_index``, CLI ``searchgym index build CORPUS --shards N`` or ``--shard-size S``):

1. *Pass 1* streams the corpus once: each passage goes to the passage store (:mod:`.store`), is tokenised
   exactly as :class:`~searchgym.retrieval.bm25.BM25Retriever` tokenises it, and its ``(term, tf)`` pairs are
   appended to a temporary postings file; document frequencies, lengths and the corpus fingerprint are
   accumulated on the way. Memory: the vocabulary and the df array (a function of the vocabulary, not of the
   corpus size) plus ~24 bytes per passage on disk, never the text.
2. *Pass 2*, per shard: the shard's postings are scored with the **global** IDF and average length, with
   bm25s' own scoring functions and the same float64 -> float32 arithmetic, so every (term, passage) score is
   bit-identical to the one an unsharded bm25s index holds; they are written as CSC arrays (bm25s' layout:
   ``data``, ``indices``, ``indptr`` ``.npy``), loadable with ``np.load(mmap_mode="r")``.

The work happens in ``.<name>.building/`` next to the output; ``state.json`` there records pass 1 and every
finished shard, so a killed build started again with the same corpus and parameters redoes only the unfinished
shards. The finished directory is swapped into place atomically, as every other index build.

Search (``ShardedBM25Retriever``, registered as backend ``bm25_sharded``): each shard scores a batch of
queries in one numba call (``nogil``: with ``n_threads > 1`` threads take parts of the batch, or groups of
shards for a batch smaller than the threads), keeps its top k by (score descending, row ascending) and the
shards' lists are merged by the same order. The shards are visited in order and each query's k-th best score so
far goes to the next shard as a floor its passages must beat, so later shards prune more. Since each shard
scores exactly as the unsharded index and ties break by row everywhere, the merged top k is the unsharded
index's top k under that order, scores included. The kernel prunes with MaxScore (:func:`_maxscore_py`):
common terms that cannot lift a passage into the top k alone are looked up per candidate rather than scanned,
and every score it returns is summed exactly as the exhaustive kernel (:func:`_score_py`) sums it. The kernel checks every offset and document id it reads, so a
damaged shard raises IndexCorruptError naming the shard instead of reading out of bounds, without a pass over
the arrays at load time (``load_index`` with ``verify=True``, the default, also checksums every file).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import math
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import filterfalse
from pathlib import Path
from typing import Any

import numpy as np

from searchgym import dirswap
from searchgym.errors import ConfigError, DuplicateIdError, IndexCorruptError, QueryError
from searchgym.retrieval._bm25s import ensure_bm25s
from searchgym.retrieval.base import Hit, Passage
from searchgym.retrieval.corpus import fingerprint_update
from searchgym.retrieval.index import (
    LoadContext,
    _check_target,
    _is_complete_index,
    register_backend,
    write_manifest,
)
from searchgym.retrieval.store import PassageStore, PassageStoreWriter
from searchgym.retrieval.tokenize import Tokenizer, TokenizerConfig

log = logging.getLogger(__name__)

NAME = "bm25_sharded"
ENGINE = "searchgym-sharded-bm25"
METHODS = ("lucene", "robertson", "atire")  # bm25l / bm25+ score absent terms too: not shardable this way
DEFAULT_SHARD_SIZE = 1_000_000
STATE_VERSION = 1
_BATCH = 8192  # passages tokenised between two writes of the postings
# MaxScore: the query terms whose bounds sum to less than this fraction of a first lower bound of the k-th score
# are looked up per candidate instead of scanned. Any fraction in [0, 1] is exact; 1 scans the fewest postings
# but leaves more candidates to look up. Measured on 1M synthetic passages: 0.5-0.7 is fastest.
_NON_ESSENTIAL = 0.6


# -- build --------------------------------------------------------------------------------------------
def _source_key(corpus: str | Path | Sequence[Passage], format: str | None) -> dict[str, Any] | None:
    """What identifies the corpus for resuming: path, size and mtime of every file (None: cannot resume)."""
    if not isinstance(corpus, (str, Path)):
        return None
    p = Path(corpus)
    if not p.exists():
        return None
    files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file())
    return {"path": str(p.resolve()), "format": format,
            "files": [[str(f.relative_to(p) if f != p else f.name), f.stat().st_size, f.stat().st_mtime_ns]
                      for f in files]}


def _iter_source(corpus: str | Path | Sequence[Passage], format: str | None) -> Iterator[Passage]:
    if isinstance(corpus, (str, Path)):
        from searchgym.retrieval.corpus import iter_corpus

        return iter_corpus(corpus, format=format, check_unique=False)
    return iter(corpus)


class _Work:
    """The resumable work directory ``.<name>.building`` and its ``state.json``."""

    def __init__(self, out: Path):
        self.dir = out.with_name(f".{out.name}.building")
        self.index = self.dir / "index"
        self.tmp = self.dir / "tmp"
        self.state_path = self.dir / "state.json"
        self._lock: Any = None

    def lock(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.dir / "lock", "w")  # noqa: SIM115 - held until release()
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            raise ConfigError(f"another build of {self.dir.name[1:-9]} is running ({self.dir} is locked)") \
                from None

    def release(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def read_state(self) -> dict[str, Any] | None:
        try:
            s = json.loads(self.state_path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return None
        return s if isinstance(s, dict) else None

    def write_state(self, state: dict[str, Any]) -> None:
        tmp = self.state_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(state), encoding="utf-8")
        os.replace(tmp, self.state_path)

    def reset(self) -> None:
        for p in (self.index, self.tmp, self.state_path):
            if p.is_dir():
                shutil.rmtree(p)
            else:
                p.unlink(missing_ok=True)


def _shard_bounds(n: int, shards: int | None, shard_size: int | None) -> list[int]:
    if shards is not None and shard_size is not None:
        raise ConfigError("give --shards or --shard-size, not both")
    if shards is not None and shards < 1 or shard_size is not None and shard_size < 1:
        raise ConfigError("the number of shards and the shard size must be at least 1")
    count = shards if shards is not None else math.ceil(n / (shard_size or DEFAULT_SHARD_SIZE))
    count = max(1, min(count, n))
    return [n * i // count for i in range(count + 1)]


def _pass1(source: Iterable[Passage], tok: Tokenizer, work: _Work, show_progress: bool) -> dict[str, Any]:
    """Stream the corpus: passage store, postings (term ids + tfs), per-passage offsets and lengths, df."""
    work.tmp.mkdir(parents=True, exist_ok=True)
    writer = PassageStoreWriter(work.index / "passages")
    vocab: dict[str, int] = {}
    df = np.zeros(1 << 16, dtype=np.int64)
    split, stem = tok._split, tok._stemmer
    is_stop = tok.stopwords.__contains__
    vget = vocab.get
    lower = tok.config.lowercase
    fp = hashlib.sha256()
    files = {name: open(work.tmp / name, "wb") for name in  # noqa: SIM115 - closed below
             ("terms.i32", "tfs.i32", "docptr.u64", "lens.i64", "idhash.i64")}
    files["docptr.u64"].write(np.zeros(1, "<u8").tobytes())
    n = 0
    total_postings = 0
    flat: list[int] = []
    lens: list[int] = []
    hashes: list[int] = []
    t0 = time.perf_counter()

    def flush() -> None:
        nonlocal df, total_postings
        if not lens:
            return
        ids = np.fromiter(flat, dtype=np.int64, count=len(flat))
        ln = np.asarray(lens, dtype=np.int64)
        doc = np.repeat(np.arange(len(ln), dtype=np.int64), ln)
        keys, tfs = np.unique((doc << 32) | ids, return_counts=True)
        terms = (keys & 0xFFFFFFFF).astype("<i4")
        per_doc = np.bincount(keys >> 32, minlength=len(ln))
        if len(vocab) > len(df):
            df = np.concatenate([df, np.zeros(max(len(vocab), 2 * len(df)) - len(df), np.int64)])
        df += np.bincount(terms, minlength=len(df))
        files["terms.i32"].write(terms.tobytes())
        files["tfs.i32"].write(tfs.astype("<i4").tobytes())
        files["docptr.u64"].write((total_postings + np.cumsum(per_doc)).astype("<u8").tobytes())
        files["lens.i64"].write(ln.astype("<i8").tobytes())
        files["idhash.i64"].write(np.asarray(hashes, dtype="<i8").tobytes())
        total_postings += len(terms)
        flat.clear()
        lens.clear()
        hashes.clear()

    try:
        for p in source:
            if not isinstance(p, Passage):
                raise ConfigError(f"a corpus item must be a Passage, got {type(p).__name__}")
            fingerprint_update(fp, p)
            writer.add(p)
            text = p.contents
            words = list(filterfalse(is_stop, split(text.lower() if lower else text)))
            if stem is not None:
                words = stem.stemWords(words)
            ids: list[Any] = list(map(vget, words))  # C-level lookups; the (ever rarer) new terms get ids below
            if None in ids:
                for j, t in enumerate(ids):
                    if t is None:
                        ids[j] = vocab.setdefault(words[j], len(vocab))
            flat.extend(ids)
            lens.append(len(ids))
            hashes.append(hash(p.id) & 0x7FFFFFFFFFFFFFFF)
            n += 1
            if len(lens) >= _BATCH:
                flush()
                if show_progress and n % (_BATCH * 25) == 0:
                    log.warning("pass 1: %s passages, %s terms, %.0f s", f"{n:,}", f"{len(vocab):,}",
                                time.perf_counter() - t0)
        flush()
    finally:
        for f in files.values():
            f.close()
        writer.close()
    if n == 0:
        raise ConfigError("the corpus holds no passages")
    _check_ids_unique(work, n, source)
    lens_all = np.fromfile(work.tmp / "lens.i64", dtype="<i8")
    np.save(work.tmp / "df.npy", df[: len(vocab)])
    vdir = work.index / NAME
    vdir.mkdir(parents=True, exist_ok=True)
    (vdir / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")  # C encoder
    return {"n": n, "avgdl": float(lens_all.mean()), "n_terms": len(vocab), "postings": total_postings,
            "fingerprint": "sha256:" + fp.hexdigest(), "pass1_seconds": round(time.perf_counter() - t0, 3)}


def _check_ids_unique(work: _Work, n: int, source: Iterable[Passage]) -> None:
    """Duplicate ids, in memory of 8 bytes per passage: sort the id hashes; on a hash collision, compare the
    colliding passages' real ids by reading them back from the store."""
    h = np.fromfile(work.tmp / "idhash.i64", dtype="<i8")
    order = np.argsort(h, kind="stable")
    hs = h[order]
    dup = np.flatnonzero(hs[1:] == hs[:-1])
    if not len(dup):
        return
    store = PassageStore(work.index / "passages", n)
    for i in dup:
        a, b = sorted((int(order[i]), int(order[i + 1])))
        if store[a].id == store[b].id:
            raise DuplicateIdError(f"duplicate passage id {store[a].id!r} (rows {a + 1} and {b + 1}); ids must be "
                                   "unique — deduplicate the corpus or renumber the ids")


def _build_shard(work: _Work, i: int, a: int, b: int, p1: dict[str, Any], idf: np.ndarray, params: dict[str, Any]
                 ) -> dict[str, Any]:
    """Score shard ``i`` (rows a..b-1) with the global statistics and write its CSC arrays."""
    ensure_bm25s()
    from bm25s.scoring import _select_tfc_scorer

    docptr = np.memmap(work.tmp / "docptr.u64", dtype="<u8", mode="r", shape=(p1["n"] + 1,))
    pa, pb = int(docptr[a]), int(docptr[b])
    terms = np.fromfile(work.tmp / "terms.i32", dtype="<i4", count=pb - pa, offset=pa * 4)
    tfs = np.fromfile(work.tmp / "tfs.i32", dtype="<i4", count=pb - pa, offset=pa * 4)
    per_doc = np.diff(np.asarray(docptr[a:b + 1], dtype=np.int64)).astype(np.int64)
    del docptr
    local = np.repeat(np.arange(b - a, dtype=np.int64), per_doc)
    lens = np.fromfile(work.tmp / "lens.i64", dtype="<i8", count=b - a, offset=a * 8).astype(np.int64)
    # The arithmetic of bm25s' _build_scores_and_indices_for_matrix, vectorised: float32 tf, an int length,
    # a float64 average length, float32 idf, product cast to float32 (numpy 2 promotion rules).
    tfc = _select_tfc_scorer(params["method"])(tf_array=tfs.astype(np.float32), l_d=lens[local],
                                               l_avg=np.float64(p1["avgdl"]), k1=params["k1"], b=params["b"])
    data = (idf[terms] * tfc).astype(np.float32)
    del tfc, tfs, lens
    order = np.argsort(terms, kind="stable")  # by term; rows stay ascending within a term
    counts = np.bincount(terms, minlength=len(idf))
    indptr = np.zeros(len(idf) + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    out = work.index / NAME / "shards"
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".{i:03d}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    np.save(tmp / "data.npy", data[order])
    np.save(tmp / "indices.npy", local[order].astype(np.int32))
    np.save(tmp / "indptr.npy", indptr)
    final = out / f"{i:03d}"
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    return {"dir": f"{NAME}/shards/{i:03d}", "start": a, "n": b - a, "nnz": int(pb - pa)}


def _nonneg_int(v: Any) -> bool:
    return type(v) is int and 0 <= v < 2**62


def _file_len(p: Path) -> int:
    return p.stat().st_size if p.is_file() else -1


def _pass1_ok(work: _Work, p1: Any) -> bool:
    """Pass 1's record against its temporary files: types, ranges, sizes, a finite avgdl equal to the lengths'."""
    if not isinstance(p1, dict) or not all(_nonneg_int(p1.get(k)) for k in ("n", "n_terms", "postings")) \
            or p1["n"] < 1 or not isinstance(p1.get("fingerprint"), str) \
            or not isinstance(p1.get("avgdl"), float) or not math.isfinite(p1["avgdl"]):
        return False
    n, nnz, t = p1["n"], p1["postings"], work.tmp
    sizes = {"terms.i32": 4 * nnz, "tfs.i32": 4 * nnz, "docptr.u64": 8 * (n + 1), "lens.i64": 8 * n,
             "idhash.i64": 8 * n}
    if any(_file_len(t / f) != size for f, size in sizes.items()) \
            or _file_len(work.index / "passages" / "offsets.u64") != 8 * (n + 1) \
            or not (work.index / NAME / "vocab.json").is_file():
        return False
    try:
        df = np.load(t / "df.npy", mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError):
        return False
    last = int(np.fromfile(t / "docptr.u64", dtype="<u8", count=1, offset=8 * n)[0])
    lens = np.fromfile(t / "lens.i64", dtype="<i8")
    return df.shape == (p1["n_terms"],) and last == nnz and bool(lens.min() >= 0) \
        and abs(float(lens.mean()) - p1["avgdl"]) <= 1e-9 * max(1.0, p1["avgdl"])


def _shard_ok(work: _Work, i: int, rec: Any, a: int, b: int, docptr: np.ndarray) -> bool:
    return (isinstance(rec, dict) and rec.get("dir") == f"{NAME}/shards/{i:03d}" and rec.get("start") == a
            and rec.get("n") == b - a and type(rec.get("nnz")) is int and rec["nnz"] == int(docptr[b] - docptr[a])
            and all((work.index / rec["dir"] / f).is_file() for f in ("data.npy", "indices.npy", "indptr.npy")))


def _resumable(work: _Work, state: dict[str, Any], shards: int | None, shard_size: int | None
               ) -> dict[str, Any] | None:
    """``state`` checked against the work directory (None: start afresh): pass 1's record and its files, and
    each finished shard's record (one that does not match is dropped, so only that shard is built again)."""
    p1, done = state.get("pass1"), state.get("shards")
    if not isinstance(done, dict):
        return None
    if p1 is None:
        return {**state, "shards": {}}
    if not _pass1_ok(work, p1):
        return None
    bounds = _shard_bounds(p1["n"], shards, shard_size)
    docptr = np.memmap(work.tmp / "docptr.u64", dtype="<u8", mode="r", shape=(p1["n"] + 1,))
    kept = {str(i): done[str(i)] for i in range(len(bounds) - 1)
            if str(i) in done and _shard_ok(work, i, done[str(i)], bounds[i], bounds[i + 1], docptr)}
    del docptr
    return {**state, "shards": kept}


def build_sharded_index(
    corpus: str | Path | Sequence[Passage],
    out_dir: str | Path,
    *,
    shards: int | None = None,
    shard_size: int | None = None,
    k1: float = 1.5,
    b: float = 0.75,
    method: str = "lucene",
    stopwords: str | Sequence[str] | None = "en",
    stemmer: str | None = None,
    lowercase: bool = True,
    overwrite: bool = False,
    show_progress: bool = True,
    format: str | None = None,
    _after_shard: Callable[[int], None] | None = None,
) -> Path:
    """Build a sharded BM25 index directory from a corpus stream (see the module docstring).

    ``shards``: the number of shards, or ``shard_size``: passages per shard (default 1,000,000). A build killed
    part-way resumes when started again with the same corpus files and parameters. Returns ``out_dir``.
    """
    if method not in METHODS:
        raise ConfigError(f"a sharded index supports BM25 methods {METHODS}, not {method!r}")
    _shard_bounds(1, shards, shard_size)  # argument errors before any work
    out = Path(out_dir)
    dirswap.cleanup_siblings(out, is_complete=_is_complete_index)
    _check_target(out, overwrite)
    tok = Tokenizer(lowercase=lowercase, stopwords=stopwords, stemmer=stemmer)
    params = {"k1": float(k1), "b": float(b), "method": method, "tokenizer": tok.config.to_dict()}
    key = {"version": STATE_VERSION, "source": _source_key(corpus, format), "params": params,
           "shards": shards, "shard_size": shard_size}
    work = _Work(out)
    t0 = time.perf_counter()
    work.lock()
    try:
        state = work.read_state()
        if state is None or key["source"] is None or state.get("key") != key:
            state = None
        elif (state := _resumable(work, state, shards, shard_size)) is None:
            log.warning("the saved state of the build of %s does not match its temporary files; starting afresh",
                        out)
        if state is None:
            work.reset()
            state = {"key": key, "pass1": None, "shards": {}}
        else:
            log.warning("resuming the build of %s: %d shard(s) already done", out, len(state["shards"]))
        if state["pass1"] is None:
            work.reset()
            work.index.mkdir(parents=True)
            state = {"key": key, "pass1": _pass1(_iter_source(corpus, format), tok, work, show_progress),
                     "shards": {}}
            work.write_state(state)
        p1 = state["pass1"]
        ensure_bm25s()
        from bm25s.scoring import _select_idf_scorer

        idf_fn = _select_idf_scorer(method)
        df = np.load(work.tmp / "df.npy")
        idf = np.array([idf_fn(int(d), N=p1["n"]) for d in df.tolist()], dtype=np.float32)
        bounds = _shard_bounds(p1["n"], shards, shard_size)
        for i in range(len(bounds) - 1):
            if str(i) in state["shards"]:
                continue
            state["shards"][str(i)] = _build_shard(work, i, bounds[i], bounds[i + 1], p1, idf, params)
            work.write_state(state)
            if show_progress and p1["n"] >= 20_000:
                log.warning("shard %d/%d written (%.0f s)", i + 1, len(bounds) - 1, time.perf_counter() - t0)
            if _after_shard is not None:
                _after_shard(i)
        entry = {"engine": ENGINE, **params, "avgdl": p1["avgdl"], "n_terms": p1["n_terms"],
                 "vocab_file": f"{NAME}/vocab.json",
                 "shards": [state["shards"][str(i)] for i in range(len(bounds) - 1)]}
        shutil.rmtree(work.tmp, ignore_errors=True)
        write_manifest(work.index, n_passages=p1["n"], fingerprint=p1["fingerprint"], backends={NAME: entry},
                       build_seconds=time.perf_counter() - t0,
                       passages={"passages_store": {"format": "records-offsets", "dir": "passages"}})
        _check_target(out, overwrite)  # it may have changed during a long build
        if out.is_dir() and not any(out.iterdir()):
            out.rmdir()
        dirswap.swap_into_place(work.index, out)
    finally:
        work.release()
    shutil.rmtree(work.dir, ignore_errors=True)
    return out


# -- search -------------------------------------------------------------------------------------------
_kernel: Any = None
_maxscore: Any = None
_sift_down: Any = None
_seek: Any = None
_distinct_terms: Any = None
_term_bounds: Any = None
_order_terms: Any = None
_seed_candidates: Any = None
_score_seeds: Any = None
_accumulate: Any = None
_kth_partial: Any = None
_candidates: Any = None
_exact_score: Any = None
_heap_offer: Any = None
_score_candidates: Any = None
_heap_sorted: Any = None
_maxscore_query: Any = None
_kernel_lock = threading.Lock()
# the MaxScore kernel's steps, compiled (or bound to their _py versions) in this order by _compile
_STEPS = ("_sift_down", "_seek", "_distinct_terms", "_term_bounds", "_order_terms", "_seed_candidates",
          "_score_seeds", "_accumulate", "_kth_partial", "_candidates", "_exact_score", "_heap_offer",
          "_score_candidates", "_heap_sorted", "_maxscore_query", "_maxscore")


def _score_py(qids: np.ndarray, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, acc: np.ndarray,
              mark: np.ndarray, touched: np.ndarray, k: int, out_s: np.ndarray, out_r: np.ndarray) -> int:
    """One query on one shard: accumulate the scores of the touched rows into ``acc`` (float32, term by term
    in query order, as bm25s does), then keep the best ``k`` positive ones by (score desc, row asc) in a
    min-heap written to ``out_s`` / ``out_r``, clearing ``acc`` / ``mark`` on the way. Returns how many were
    kept, or -1 when an offset or a row id is out of range (a damaged shard)."""
    n_docs = acc.shape[0]
    n_nnz = indices.shape[0]
    n = 0
    for t in qids:
        s = indptr[t]
        e = indptr[t + 1]
        if s < 0 or e < s or e > n_nnz:
            for i in range(n):
                acc[touched[i]] = 0
                mark[touched[i]] = False
            return -1
        for j in range(s, e):
            d = indices[j]
            if d < 0 or d >= n_docs:
                for i in range(n):
                    acc[touched[i]] = 0
                    mark[touched[i]] = False
                return -1
            if not mark[d]:
                mark[d] = True
                touched[n] = d
                n += 1
            acc[d] += data[j]
    size = 0
    for i in range(n):
        d = touched[i]
        sc = acc[d]
        acc[d] = 0
        mark[d] = False
        if not sc > 0:
            continue
        if size < k:  # push, sift up (the root is the worst kept: lowest score, then highest row)
            c = size
            size += 1
            while c > 0:
                p = (c - 1) // 2
                if sc < out_s[p] or (sc == out_s[p] and d > out_r[p]):  # the new one is worse: it rises
                    out_s[c] = out_s[p]
                    out_r[c] = out_r[p]
                    c = p
                else:
                    break
            out_s[c] = sc
            out_r[c] = d
        elif sc > out_s[0] or (sc == out_s[0] and d < out_r[0]):  # better than the worst: replace, sift down
            _sift_down(out_s, out_r, 0, size, sc, d)
    return size


def _distinct_terms_py(qids: np.ndarray, a: int, m: int, n_terms: int, uterm: np.ndarray, ucount: np.ndarray,
                       pos_u: np.ndarray) -> int:
    """The query's distinct terms (``uterm``), their counts and each position's term; -1: a term out of range."""
    nu = 0
    for p in range(m):
        t = qids[a + p]
        if t < 0 or t >= n_terms:
            return -1
        f = -1
        for u in range(nu):
            if uterm[u] == t:
                f = u
                break
        if f < 0:
            f = nu
            uterm[nu] = t
            ucount[nu] = 0
            nu += 1
        ucount[f] += 1
        pos_u[p] = f
    return nu


def _term_bounds_py(uterm: np.ndarray, ucount: np.ndarray, nu: int, data: np.ndarray, indptr: np.ndarray,
                    n_nnz: int, tbound: np.ndarray, ubound: np.ndarray) -> int:
    """Each term's bound (count x its largest score here, cached in ``tbound`` per shard and term) into ``ubound``.
    Returns 0, 1 when a term has a negative score (the query needs the exhaustive kernel), -1 on a bad offset."""
    negative = 0
    for u in range(nu):
        t = uterm[u]
        s = indptr[t]
        e = indptr[t + 1]
        if s < 0 or e < s or e > n_nnz:
            return -1
        bd = tbound[t]
        if np.isnan(bd):
            mx = np.float32(0.0)
            neg = False
            for j in range(s, e):
                v = data[j]
                mx = max(mx, v)
                if v < 0:
                    neg = True
            bd = np.float32(-1.0) if neg else mx
            tbound[t] = bd
        if bd < 0:
            negative = 1
        ubound[u] = ucount[u] * np.float64(bd)
    return negative


def _order_terms_py(uterm: np.ndarray, ucount: np.ndarray, ubound: np.ndarray, nu: int, indptr: np.ndarray,
                    order: np.ndarray, rank: np.ndarray, scount: np.ndarray, cur: np.ndarray, end: np.ndarray,
                    cum: np.ndarray) -> float:
    """Terms by bound ascending (insertion sort: a query has a few terms): each term's rank, and per rank its
    count, posting range and the bounds summed so far. Returns the sum of all bounds."""
    for u in range(nu):
        order[u] = u
    for i in range(1, nu):
        x = order[i]
        j = i - 1
        while j >= 0 and ubound[order[j]] > ubound[x]:
            order[j + 1] = order[j]
            j -= 1
        order[j + 1] = x
    total = 0.0
    for i in range(nu):
        u = order[i]
        rank[u] = i
        scount[i] = ucount[u]
        t = uterm[u]
        cur[i] = indptr[t]
        end[i] = indptr[t + 1]
        total += ubound[u]
        cum[i] = total
    return total


def _seed_candidates_py(nu: int, k: int, cur: np.ndarray, end: np.ndarray, indices: np.ndarray, n_docs: int,
                        cand: np.ndarray) -> int:
    """Step 0: the passages of the rarest terms (at most ``len(cand)``), sorted; -1 on a row out of range."""
    cap = cand.shape[0]
    ncand = 0
    for i in range(nu - 1, -1, -1):
        ln = end[i] - cur[i]
        take = ln if ncand + ln <= cap else (cap - ncand if ncand < k else 0)
        if take <= 0:
            break
        for j in range(cur[i], cur[i] + take):
            x = indices[j]
            if x < 0 or x >= n_docs:
                return -1
            cand[ncand] = x
            ncand += 1
    cand[:ncand].sort()
    return ncand


def _score_seeds_py(cand: np.ndarray, ncand: int, nu: int, m: int, cur: np.ndarray, end: np.ndarray,
                    indices: np.ndarray, data: np.ndarray, pos_s: np.ndarray, scur: np.ndarray, c: np.ndarray,
                    seeds: np.ndarray) -> int:
    """Step 0: the exact scores of the (sorted) candidates into ``seeds``; returns how many are positive."""
    nseed = 0
    for i in range(nu):
        scur[i] = cur[i]
    for j in range(ncand):
        d = cand[j]
        if j > 0 and d == cand[j - 1]:
            continue
        for i in range(nu):  # the candidates ascend: each term's cursor only moves forward
            lo = _seek(indices, scur[i], end[i], d)
            scur[i] = lo
            c[i] = data[lo] if lo < end[i] and indices[lo] == d else 0
        sc = np.float32(0.0)
        for p in range(m):
            sc += c[pos_s[p]]
        if sc > 0:
            seeds[nseed] = sc
            nseed += 1
    return nseed


def _accumulate_py(fe: int, nu: int, scount: np.ndarray, cur: np.ndarray, end: np.ndarray, indices: np.ndarray,
                   data: np.ndarray, n_docs: int, acc: np.ndarray, touched: np.ndarray) -> int:
    """Step 1: the essential terms' postings summed term at a time into ``acc`` (an approximate partial score);
    returns how many passages were touched (listed in ``touched``), or -1 on a row out of range (``acc`` cleared)."""
    n = 0
    for i in range(fe, nu):
        w = np.float32(scount[i])  # a term twice in the query counts twice
        for j in range(cur[i], end[i]):
            d = indices[j]
            if d < 0 or d >= n_docs:
                for jj in range(n):
                    acc[touched[jj]] = 0
                return -1
            v = w * data[j]
            if v > 0:  # a passage is listed once, when its partial score turns positive
                if acc[d] == 0:
                    touched[n] = d
                    n += 1
                acc[d] += v
    return n


def _kth_partial_py(acc: np.ndarray, touched: np.ndarray, n: int, k: int, best: np.ndarray) -> Any:
    """Step 2: the k-th best partial score of the ``n >= k`` touched passages (a min-heap of the k best)."""
    hn = 0
    for jj in range(n):
        v = acc[touched[jj]]
        if hn < k:
            ch = hn
            hn += 1
            while ch > 0:
                par = (ch - 1) // 2
                if v < best[par]:
                    best[ch] = best[par]
                    ch = par
                else:
                    break
            best[ch] = v
        elif v > best[0]:
            ch = 0
            while True:
                left = 2 * ch + 1
                if left >= hn:
                    break
                w = left
                if left + 1 < hn and best[left + 1] < best[left]:
                    w = left + 1
                if best[w] < v:
                    best[ch] = best[w]
                    ch = w
                else:
                    break
            best[ch] = v
    return best[0]


def _candidates_py(acc: np.ndarray, touched: np.ndarray, n: int, slack: float, rest: float, seed: float) -> int:
    """Step 2: keep (sorted, at the front of ``touched``) the passages whose partial score plus the
    non-essential terms' bound can reach ``seed``; clears ``acc``. Returns how many."""
    nc = 0
    for jj in range(n):
        d = touched[jj]
        ub = (np.float64(acc[d]) * slack + rest) * slack
        acc[d] = 0
        if not ub < seed:
            touched[nc] = d
            nc += 1
    touched[:nc].sort()
    return nc


def _exact_score_py(d: int, nu: int, m: int, cum: np.ndarray, slack: float, theta: float, seed: float,
                    cur: np.ndarray, end: np.ndarray, indices: np.ndarray, data: np.ndarray, scount: np.ndarray,
                    pos_s: np.ndarray, c: np.ndarray) -> Any:
    """Step 3: passage ``d``'s exact score (float32, summed in query order), each term's posting found by
    galloping search, highest bound first; -1 as soon as the known part plus the bounds of the terms left
    cannot reach the k-th score."""
    known = 0.0
    for i in range(nu - 1, -1, -1):
        ub = (known + cum[i]) * slack
        if ub <= theta or ub < seed:
            return np.float32(-1.0)
        c[i] = 0
        lo = _seek(indices, cur[i], end[i], d)
        cur[i] = lo
        if lo < end[i] and indices[lo] == d:
            c[i] = data[lo]
            known += scount[i] * c[i]
            cur[i] = lo + 1
    sc = np.float32(0.0)
    for p in range(m):
        sc += c[pos_s[p]]
    return sc


def _heap_offer_py(hs: np.ndarray, hr: np.ndarray, size: int, k: int, sc: Any, d: int) -> int:
    """Offer (sc, d) to a min-heap of at most ``k`` by (score asc, row desc): the root is the worst kept.
    Returns the new size."""
    if size < k:  # push, sift up
        ch = size
        while ch > 0:
            par = (ch - 1) // 2
            if sc < hs[par] or (sc == hs[par] and d > hr[par]):  # the new one is worse: it rises
                hs[ch] = hs[par]
                hr[ch] = hr[par]
                ch = par
            else:
                break
        hs[ch] = sc
        hr[ch] = d
        return size + 1
    if sc > hs[0] or (sc == hs[0] and d < hr[0]):  # better than the worst: replace it, sift down
        _sift_down(hs, hr, 0, size, sc, d)
    return size


def _score_candidates_py(touched: np.ndarray, nc: int, nu: int, m: int, k: int, fl: float, slack: float,
                         seed: float, cum: np.ndarray, cur: np.ndarray, end: np.ndarray, indices: np.ndarray,
                         data: np.ndarray, scount: np.ndarray, pos_s: np.ndarray, c: np.ndarray, hs: np.ndarray,
                         hr: np.ndarray) -> int:
    """Step 3: the candidates' exact scores in row order into the heap ``hs`` / ``hr``; returns its size."""
    theta = fl  # the score a passage must beat: the floor, then the heap's k-th once it holds k
    size = 0
    for jj in range(nc):
        d = touched[jj]
        sc = _exact_score(d, nu, m, cum, slack, theta, seed, cur, end, indices, data, scount, pos_s, c)
        if not sc > 0 or not sc > fl:
            continue
        size = _heap_offer(hs, hr, size, k, sc, d)
        if size == k:
            theta = max(theta, np.float64(hs[0]))
    return size


def _heap_sorted_py(hs: np.ndarray, hr: np.ndarray, size: int) -> None:
    """The heap -> (score desc, row asc), in place: pop the worst to the back."""
    for last in range(size - 1, 0, -1):
        ws = hs[0]
        wr = hr[0]
        _sift_down(hs, hr, 0, last, hs[last], hr[last])
        hs[last] = ws
        hr[last] = wr


def _maxscore_query_py(qids: np.ndarray, a: int, m: int, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray,
                       n_docs: int, tbound: np.ndarray, k: int, fl: float, acc: np.ndarray, touched: np.ndarray,
                       hs: np.ndarray, hr: np.ndarray, w: Any) -> int:
    """One query (``qids[a:a + m]``) of :func:`_maxscore_py`: its count of hits in ``hs`` / ``hr`` (sorted),
    -2 for the exhaustive kernel, -1 for a damaged shard. ``w`` holds the scratch arrays."""
    (uterm, ucount, ubound, pos_u, order, rank, cur, end, cum, pos_s, scount, c, scur, cand, seeds, best) = w
    nu = _distinct_terms(qids, a, m, indptr.shape[0] - 1, uterm, ucount, pos_u)
    if nu < 0:
        return -1
    neg = _term_bounds(uterm, ucount, nu, data, indptr, indices.shape[0], tbound, ubound)
    if neg != 0:
        return -1 if neg < 0 else -2
    total = _order_terms(uterm, ucount, ubound, nu, indptr, order, rank, scount, cur, end, cum)
    for p in range(m):
        pos_s[p] = rank[pos_u[p]]
    slack = 1.0 + (m + 1) * 2.0 ** -22
    if total * slack <= fl:  # no passage of this shard can beat the earlier shards' k-th score
        return 0
    # 0. a first lower bound of the k-th score: the exact scores of the passages of the rarest terms; a passage
    # must also beat the earlier shards' k-th score, so that is a lower bound too
    ncand = _seed_candidates(nu, k, cur, end, indices, n_docs, cand)
    if ncand < 0:
        return -1
    nseed = _score_seeds(cand, ncand, nu, m, cur, end, indices, data, pos_s, scur, c, seeds)
    seed = fl
    if nseed >= k:
        seed = max(seed, np.float64(np.sort(seeds[:nseed])[nseed - k]))
    fe = 0  # 1. the first essential term, then the essential terms' postings
    while fe < nu and cum[fe] * slack < _NON_ESSENTIAL * seed:
        fe += 1
    rest = cum[fe - 1] if fe > 0 else 0.0  # the bound of the non-essential terms together
    n = _accumulate(fe, nu, scount, cur, end, indices, data, n_docs, acc, touched)
    if n < 0:
        return -1
    if n >= k:  # 2. the k-th best partial score, less its float32 rounding, is a lower bound too
        seed = max(seed, np.float64(_kth_partial(acc, touched, n, k, best)) / (slack * slack))
    nc = _candidates(acc, touched, n, slack, rest, seed)
    size = _score_candidates(touched, nc, nu, m, k, fl, slack, seed, cum, cur, end, indices, data, scount, pos_s,
                             c, hs, hr)  # 3.
    _heap_sorted(hs, hr, size)
    return size


def _maxscore_py(qids: np.ndarray, qptr: np.ndarray, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray,
                 n_docs: int, tbound: np.ndarray, k: int, floor: np.ndarray, acc: np.ndarray, touched: np.ndarray,
                 out_s: np.ndarray, out_r: np.ndarray, out_n: np.ndarray) -> int:
    """A batch of queries on one shard with MaxScore pruning (Turtle & Flood 1995), exact to the last bit.

    Query ``q`` is ``qids[qptr[q]:qptr[q + 1]]``. Its best ``k`` rows by (score desc, row asc) go to
    ``out_s[q]`` / ``out_r[q]`` in that order and their count to ``out_n[q]``; ``out_n[q] == -2`` asks the
    caller to score the query exhaustively (a query term with a negative score somewhere: robertson's IDF of a
    term in over half the passages). Returns 0, or -1 when an offset or a row id is out of range.

    ``floor[q]`` is the k-th best score query ``q`` already has from the shards before this one (-1: fewer
    than k so far). Those shards' rows all come before this shard's, so a passage here must score strictly
    more than the floor to enter the merged top k; only such passages are returned (fewer than k, maybe none).
    Carried from shard to shard, the floor rises towards the final k-th score and prunes the later shards
    almost as if the answer were known.

    ``tbound[t]`` caches term ``t``'s largest score in this shard (NaN: not yet known, computed here on first
    use, a benign race between threads that write the same value; -1: the term has a negative score). A term's
    bound is that times its count in the query. Per query:

    0. *seed*: the passages of the rarest terms (at most ``max(3k, 32)``) are scored exactly; the k-th best
       is a lower bound of the k-th score;
    1. the terms, by bound ascending, whose bounds sum to less than ``_NON_ESSENTIAL`` x the seed are
       *non-essential* (a passage holding only those cannot reach the top k); the others' postings are summed
       term at a time into ``acc`` (float32, any order: an approximate partial score);
    2. the k-th best partial score, less its rounding, is a better lower bound (contributions are >= 0);
       the candidates are the passages whose partial score plus the non-essential bound reaches it;
    3. the candidates, in row order, are scored by finding each term's posting by galloping search, highest
       bound first, stopping as soon as the known part plus the bounds of the terms left cannot reach the
       k-th score (the heap's, once it holds k, or the lower bound).

    Exactness: a passage scored in step 3 (or 0) has its contributions summed in float32 in query order, as
    bm25s and the exhaustive kernel sum them, so its score is bit-identical. Every bound is a float64 sum
    widened by ``slack`` (more than the float32 rounding of ``m`` additions can move a score) and is compared
    strictly (``<``) with a lower bound, since a passage that ties the k-th score may still win on its row,
    except in step 3, where the rows ascend: a passage that only ties the heap's k-th score comes after it
    and cannot displace it, so ``<=`` is exact there. ``acc`` is left all zero.
    """
    nq = qptr.shape[0] - 1
    maxm = 1
    for q in range(nq):
        maxm = max(maxm, qptr[q + 1] - qptr[q])
    cap = max(3 * k, 32)  # passages scored exactly for the first lower bound
    w = (np.empty(maxm, np.int64), np.empty(maxm, np.int64), np.empty(maxm, np.float64), np.empty(maxm, np.int64),
         np.empty(maxm, np.int64), np.empty(maxm, np.int64), np.empty(maxm, np.int64), np.empty(maxm, np.int64),
         np.empty(maxm, np.float64), np.empty(maxm, np.int64), np.empty(maxm, np.float64),
         np.empty(maxm, np.float32), np.empty(maxm, np.int64), np.empty(cap, np.int64), np.empty(cap, np.float32),
         np.empty(k, np.float32))
    for q in range(nq):
        a = qptr[q]
        got = _maxscore_query(qids, a, qptr[q + 1] - a, data, indices, indptr, n_docs, tbound, k,
                              np.float64(floor[q]), acc, touched, out_s[q], out_r[q], w)
        if got == -1:
            return -1
        out_n[q] = got
    return 0


def _seek_py(indices: np.ndarray, lo: int, hi: int, d: int) -> int:
    """The first position in ``lo..hi`` whose row is >= ``d`` (``hi`` if none): gallop from ``lo``, then
    bisect, so a cursor moving forward over a sorted posting list costs the log of each step, not of the list."""
    if lo < hi and indices[lo] < d:
        step = 1
        while lo + step < hi and indices[lo + step] < d:
            lo += step
            step *= 2
        hi = min(lo + step, hi)
        lo += 1
        while lo < hi:
            mid = (lo + hi) >> 1
            if indices[mid] < d:
                lo = mid + 1
            else:
                hi = mid
    return lo


def _sift_down_py(hs: np.ndarray, hr: np.ndarray, c: int, size: int, sc: Any, d: Any) -> None:
    """Put (sc, d) at heap slot ``c`` of a min-heap of ``size`` by (score asc, row desc) and sift it down."""
    while True:
        left = 2 * c + 1
        if left >= size:
            break
        w = left
        right = left + 1
        if right < size and (hs[right] < hs[left] or (hs[right] == hs[left] and hr[right] > hr[left])):
            w = right
        if hs[w] < sc or (hs[w] == sc and hr[w] > d):
            hs[c] = hs[w]
            hr[c] = hr[w]
            c = w
        else:
            break
    hs[c] = sc
    hr[c] = d


def _get_kernel() -> Any:
    """The exhaustive kernel, numba-compiled when numba is installed (pure Python otherwise: correct, slow)."""
    _compile()
    return _kernel


def _get_maxscore() -> Any:
    _compile()
    return _maxscore


def _compile() -> None:
    global _kernel
    if _kernel is None:
        with _kernel_lock:
            if _kernel is None:
                g = globals()
                try:
                    import numba
                except ImportError:  # install searchgym[fast] for numba
                    for name in _STEPS:
                        g[name] = g[name + "_py"]
                    _kernel = _score_py
                    return
                for cache in (True, False):
                    try:
                        for name in _STEPS:  # a step calls the compiled steps before it (globals at compile time)
                            g[name] = numba.njit(nogil=True, cache=cache)(g[name + "_py"])
                        _kernel = numba.njit(nogil=True, cache=cache)(_score_py)
                        break
                    except (RuntimeError, OSError):
                        continue


_NO_ROW = np.iinfo(np.int64).max  # pads a top-k list that holds fewer than k passages


def _merge(s1: np.ndarray, r1: np.ndarray, s2: np.ndarray, r2: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Row by row, the best ``k`` of two padded top-k lists by (score desc, row asc)."""
    sc, rows = np.concatenate((s1, s2), axis=1), np.concatenate((r1, r2), axis=1)
    order = np.lexsort((rows, -sc), axis=-1)[:, :k]
    return np.take_along_axis(sc, order, axis=1), np.take_along_axis(rows, order, axis=1)


class _Shard:
    """One shard's memory-mapped CSC arrays."""

    def __init__(self, root: Path, i: int, n_shards: int, spec: dict[str, Any], n_terms: int, ctx: LoadContext):
        self.label = f"shard {i} of {n_shards} ({root / spec['dir']})"
        d = ctx.path(spec["dir"])
        try:
            self.data = np.load(d / "data.npy", mmap_mode="r", allow_pickle=False)
            self.indices = np.load(d / "indices.npy", mmap_mode="r", allow_pickle=False)
            self.indptr = np.load(d / "indptr.npy", mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise IndexCorruptError(f"{self.label} cannot be read ({type(exc).__name__}: {exc})") from None
        self.start, self.n = spec["start"], spec["n"]
        self._tbound: np.ndarray | None = None
        ok = (self.data.ndim == self.indices.ndim == self.indptr.ndim == 1
              and self.data.dtype == np.float32 and self.indices.dtype == np.int32
              and self.indptr.dtype == np.int64 and len(self.data) == len(self.indices) == spec.get("nnz")
              and len(self.indptr) == n_terms + 1 and len(self.indptr) > 0
              and int(self.indptr[0]) == 0 and int(self.indptr[-1]) == len(self.indices))
        if not ok:
            raise IndexCorruptError(f"{self.label}: arrays have the wrong type, shape or bounds; rebuild the index")

    def bounds(self) -> np.ndarray:
        """Each term's largest score in this shard, filled in by the MaxScore kernel on a term's first query
        (4 bytes per vocabulary term, allocated on the first search: NaN until known)."""
        if self._tbound is None:
            with _kernel_lock:
                if self._tbound is None:
                    self._tbound = np.full(len(self.indptr) - 1, np.nan, np.float32)
        return self._tbound

    def topk_batch(self, qids: np.ndarray, qptr: np.ndarray, k: int, floor: np.ndarray, bufs: dict[str, np.ndarray]
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """This shard's best ``k`` for each query of a batch that beat ``floor`` (the k-th score from the
        shards before, -1 for none), MaxScore-pruned: ``(scores, local rows, counts)``, row ``q`` of the first
        two in (score desc, row asc) order; a count of -2 asks for the exhaustive kernel (see
        :func:`_maxscore_py`)."""
        nq = len(qptr) - 1
        out_s, out_r, out_n = np.empty((nq, k), np.float32), np.empty((nq, k), np.int64), np.empty(nq, np.int64)
        rc = _get_maxscore()(qids, qptr, self.data, self.indices, self.indptr, self.n, self.bounds(), k, floor,
                             bufs["acc"][: self.n], bufs["touched"], out_s, out_r, out_n)
        if rc < 0:
            raise IndexCorruptError(f"{self.label}: a term's offsets or a passage id are out of range (the "
                                    "shard is damaged); rebuild the index")
        return out_s, out_r, out_n

    def topk(self, qids: np.ndarray, k: int, bufs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """This shard's best ``k`` for one query: (scores desc, global rows asc on ties)."""
        out_s, out_r = np.empty(k, np.float32), np.empty(k, np.int64)
        n = _get_kernel()(qids, self.data, self.indices, self.indptr, bufs["acc"][: self.n],
                          bufs["mark"][: self.n], bufs["touched"], k, out_s, out_r)
        if n < 0:
            raise IndexCorruptError(f"{self.label}: a term's offsets or a passage id are out of range (the "
                                    "shard is damaged); rebuild the index")
        s, r = out_s[:n], out_r[:n]
        order = np.lexsort((r, -s))
        return s[order], r[order] + self.start


class ShardedBM25Retriever:
    """BM25 over a sharded, memory-mapped index: exact top k across shards (see the module docstring).

    Load it with ``load_index(DIR)``; ``n_threads`` > 1 splits a batch's queries (or, for fewer queries than
    threads, the shards) between that many threads (numba releases the GIL). ``passages`` is a memory-mapped
    :class:`~searchgym.retrieval.store.PassageStore`.
    """

    kind = "bm25"

    def __init__(self, ctx: LoadContext, *, n_threads: int | None = None) -> None:
        e = ctx.entry
        if e.get("engine") != ENGINE or e.get("method") not in METHODS:
            raise IndexCorruptError(f"{ctx.root / 'manifest.json'}: {NAME} entry is not a {ENGINE} entry")
        self.tokenizer = Tokenizer.from_config(TokenizerConfig.from_dict(e.get("tokenizer", {})))
        self.k1, self.b, self.method = float(e["k1"]), float(e["b"]), e["method"]
        vpath = ctx.path(e["vocab_file"])
        vocab = json.loads(vpath.read_text(encoding="utf-8"))
        n_terms = int(e["n_terms"])
        if not isinstance(vocab, dict) or len(vocab) != n_terms or not all(
                type(v) is int and 0 <= v < n_terms for v in vocab.values()):
            raise IndexCorruptError(f"{vpath}: expected {n_terms} terms with ids in 0..{n_terms - 1}")
        specs = e["shards"]
        self._shards = [_Shard(ctx.root, i, len(specs), s, n_terms, ctx) for i, s in enumerate(specs)]
        n = len(ctx.passages)
        if [s.start for s in self._shards] != list(np.cumsum([0] + [s.n for s in self._shards])[:-1]) \
                or sum(s.n for s in self._shards) != n:
            raise IndexCorruptError(f"{ctx.root / 'manifest.json'}: the shards do not cover the {n} passages")
        self._passages = ctx.passages
        self._qenc = self.tokenizer.query_encoder(vocab)
        self._max_shard = max(s.n for s in self._shards)
        self._local = threading.local()
        self.n_threads = n_threads if n_threads is not None else 1
        #: MaxScore pruning (exact, the default); False: the exhaustive kernel scores every posting of every term
        self.pruning = True

    @property
    def passages(self) -> Sequence[Passage]:
        return self._passages

    @property
    def params(self) -> dict[str, Any]:
        return {"k1": self.k1, "b": self.b, "method": self.method, "tokenizer": self.tokenizer.config.to_dict(),
                "shards": self.n_shards}

    @property
    def n_shards(self) -> int:
        return len(self._shards)

    def __len__(self) -> int:
        return len(self._passages)

    def __repr__(self) -> str:
        return f"ShardedBM25Retriever(n={len(self)}, shards={self.n_shards}, method={self.method!r})"

    def _bufs(self) -> dict[str, np.ndarray]:
        b = getattr(self._local, "bufs", None)
        if b is None:  # per thread: concurrent searches never share scratch space
            m = self._max_shard
            b = {"acc": np.zeros(m, np.float32), "mark": np.zeros(m, np.bool_), "touched": np.zeros(m, np.int64)}
            self._local.bufs = b
        return b

    def search(self, query: str, k: int = 3) -> list[Hit]:
        return self.batch_search([query], k)[0]

    def _exhaustive(self, shard: _Shard, encoded: list[np.ndarray], k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """One shard's (scores, global rows) for each query, every posting scored (``pruning=False``)."""
        bufs = self._bufs()
        empty = (np.empty(0, np.float32), np.empty(0, np.int64))
        return [shard.topk(q, k, bufs) if len(q) else empty for q in encoded]

    def _pruned(self, encoded: list[np.ndarray], k: int, shards: Sequence[_Shard]) -> tuple[np.ndarray, np.ndarray]:
        """The merged top k of a batch over ``shards`` (consecutive, in order): ``(scores, global rows)``, each
        ``(len(encoded), k)`` in (score desc, row asc) order, padded with ``-inf`` / the largest int64.

        The shards are scored one after the other, each with the k-th score the shards before it gave each
        query as its floor (see :func:`_maxscore_py`), merged as they come."""
        nq = len(encoded)
        qptr = np.zeros(nq + 1, np.int64)
        np.cumsum([len(q) for q in encoded], out=qptr[1:])
        qids = np.concatenate(encoded) if qptr[-1] else np.empty(0, np.int64)
        top_s = np.full((nq, k), -np.inf, np.float32)
        top_r = np.full((nq, k), _NO_ROW, np.int64)
        floor = np.full(nq, -1.0)
        bufs = self._bufs()
        for shard in shards:
            out_s, out_r, out_n = shard.topk_batch(qids, qptr, k, floor, bufs)
            out_r += shard.start
            missing = np.arange(k)[None, :] >= out_n[:, None]
            out_s[missing], out_r[missing] = -np.inf, _NO_ROW
            for qi in np.flatnonzero(out_n == -2):  # a term with a negative score: the exhaustive kernel
                sc, rows = shard.topk(encoded[qi], k, bufs)
                out_s[qi, : len(sc)], out_r[qi, : len(rows)] = sc, rows
            top_s, top_r = _merge(top_s, top_r, out_s, out_r, k)
            floor = np.where(np.isfinite(top_s[:, -1]), top_s[:, -1], -1.0).astype(np.float64)
        return top_s, top_r

    def _encode(self, queries: Sequence[str]) -> list[np.ndarray]:
        try:
            return [np.asarray(self._qenc.ids(q), dtype=np.int64) for q in queries]
        except (AttributeError, TypeError):
            bad = next(q for q in queries if not isinstance(q, str))
            raise QueryError(f"a query must be a string, got {type(bad).__name__}: {bad!r:.80}") from None

    def search_shard(self, queries: Sequence[str], k: int, shard: int) -> list[list[tuple[int, float]]]:
        """Shard ``shard``'s own top ``k`` for each query as ``(row, score)`` pairs, rows of this index, in
        (score desc, row asc) order: what one shard deployment of :mod:`.serve_ray` answers. Merging the
        shards' lists by (score desc, row asc) gives :meth:`batch_search`'s answer exactly."""
        if isinstance(queries, str):
            raise TypeError("search_shard takes a list of queries")
        k = min(int(k), len(self))
        encoded = self._encode(queries)
        if k <= 0 or not any(len(q) for q in encoded):
            return [[] for _ in queries]
        top_s, top_r = self._pruned(encoded, k, [self._shards[shard]])
        return [[(r, s) for s, r in zip(sc.tolist(), rows.tolist()) if s != -math.inf]
                for sc, rows in zip(top_s, top_r)]

    def batch_search(self, queries: Sequence[str], k: int = 3, *, n_threads: int | None = None
                     ) -> list[list[Hit]]:
        if isinstance(queries, str):
            raise TypeError("batch_search takes a list of queries; use search() for one")
        if k <= 0:
            return [[] for _ in queries]
        k = min(int(k), len(self))
        encoded = self._encode(queries)
        if not any(len(q) for q in encoded):
            return [[] for _ in queries]
        threads = max(1, min(self.n_threads if n_threads is None else n_threads, self.n_shards))
        if not self.pruning:
            if threads > 1:
                with ThreadPoolExecutor(max_workers=threads) as ex:
                    per_shard = list(ex.map(lambda s: self._exhaustive(s, encoded, k), self._shards))
            else:
                per_shard = [self._exhaustive(s, encoded, k) for s in self._shards]
            results = []
            for qi in range(len(encoded)):
                sc = np.concatenate([r[qi][0] for r in per_shard])
                rows = np.concatenate([r[qi][1] for r in per_shard])
                order = np.lexsort((rows, -sc))[:k]
                results.append((sc[order], rows[order]))
        elif threads == 1:
            top_s, top_r = self._pruned(encoded, k, self._shards)
            results = list(zip(top_s, top_r))
        else:
            # threads split the queries (each carries its floors through every shard); a batch smaller than
            # the threads splits the shards instead, and the groups' lists are merged
            if len(encoded) >= threads:
                cuts = np.array_split(np.arange(len(encoded)), threads)
                parts = [(encoded[c[0]: c[-1] + 1], self._shards) for c in cuts]
            else:
                cuts = np.array_split(np.arange(self.n_shards), threads)
                parts = [(encoded, self._shards[c[0]: c[-1] + 1]) for c in cuts]
            with ThreadPoolExecutor(max_workers=threads) as ex:
                got = list(ex.map(lambda p: self._pruned(p[0], k, p[1]), parts))
            if len(encoded) >= threads:
                top_s, top_r = np.concatenate([g[0] for g in got]), np.concatenate([g[1] for g in got])
            else:
                top_s, top_r = got[0]
                for s2, r2 in got[1:]:
                    top_s, top_r = _merge(top_s, top_r, s2, r2, k)
            results = list(zip(top_s, top_r))
        out: list[list[Hit]] = []
        store = self._passages
        for sc, rows in results:
            hits = []
            for s, row in zip(sc.tolist(), rows.tolist()):
                if s == -math.inf:
                    break
                p = store[row]
                hits.append(Hit(p.id, s, p))
            out.append(hits)
        return out

    def warmup(self) -> None:
        """Compile (or load from numba's disk cache) the scoring kernel now rather than on the first query."""
        probe = next(iter(self._qenc._vocab.values()), None)
        if probe is not None:
            q = np.array([probe], np.int64)
            self._shards[0].topk(q, 1, self._bufs())
            self._shards[0].topk_batch(q[:0], np.zeros(1, np.int64), 1, np.full(0, -1.0), self._bufs())


def _check_load_options(options: dict[str, Any]) -> None:
    if options.get("kind") == "rank_bm25" or options.get("backend") == "rank_bm25":
        raise ConfigError("a sharded index has no rank_bm25 backend; load it with kind='bm25'")
    if options.get("backend") not in ("auto", "numba", "numpy", None):
        raise ConfigError(f"unknown BM25 backend {options.get('backend')!r}; choose auto, numba or numpy")


def _load_backend(ctx: LoadContext) -> ShardedBM25Retriever:
    return ShardedBM25Retriever(ctx, n_threads=ctx.options.get("n_threads"))


register_backend(NAME, provides="bm25", load=_load_backend, check_options=_check_load_options)
