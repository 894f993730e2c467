"""Dense retrieval at scale: a prebuilt FAISS index opened memory-mapped, and an IVF-PQ build that streams.

Backend ``dense_faiss`` (provides "dense"): an index directory holding any FAISS index file (Flat, HNSW, IVF,
IVF-PQ, e.g. Search-R1's ``e5_Flat.index``), the name of its query encoder and the passages (a memory-mapped
record store, or linked from a sharded BM25 index of the same corpus). FAISS reads it with
``IO_FLAG_MMAP_IFC | IO_FLAG_READ_ONLY``: Flat codes and IVF inverted lists stay in the file and the page cache
(measured: a 300 MB Flat index opens at +1 MB RSS, IVF-PQ at +2 MB); index types FAISS cannot map are read
into memory, with a log line saying so.

- ``import_faiss_index(FAISS_FILE, CORPUS, OUT, model=..., query_prefix=...)`` (CLI ``searchgym index
  import-faiss``): row ``i`` of the FAISS index must be passage ``i`` of CORPUS (Search-R1's convention).
  CORPUS may be a corpus file or an index directory with a passage store (its store is hard-linked, not copied).
- ``build_ivfpq_index(CORPUS, OUT, model=...)`` (CLI ``index build CORPUS --dense MODEL --ivfpq``): encodes the
  corpus in batches, trains on the first ``train_size`` vectors and adds the rest as they come.

IVF-PQ memory arithmetic (n passages, d dims, ``m`` sub-quantisers of ``nbits`` = 8 bits, ``nlist`` lists):
codes ``n * m`` bytes + ids ``8 n`` bytes + coarse centroids ``4 d nlist`` + PQ codebooks ``4 d 2^nbits``;
training holds ``4 d train_size`` bytes. wiki-18 with e5-base (n = 21.0M, d = 768), m = 64, nlist = 16384:
codes 1.34 GB + ids 0.17 GB + centroids 0.05 GB ≈ 1.6 GB (a Flat index: 4 d n = 64.6 GB); training on 256k
vectors 0.79 GB. Encoding is the cost: ~35 passages/s for MiniLM on 2 CPU cores (a week for 21M), so encode on a
GPU or import the prebuilt index.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.errors import ConfigError, IndexCorruptError, IndexMismatchError, QueryError
from searchgym.retrieval.base import Hit, Passage
from searchgym.retrieval.corpus import fingerprint_update
from searchgym.retrieval.dense import by_score_then_row
from searchgym.retrieval.index import (
    LoadContext,
    atomic_dir,
    read_manifest,
    register_backend,
    write_manifest,
)
from searchgym.retrieval.tokenize import Tokenizer

log = logging.getLogger(__name__)

NAME = "dense_faiss"
FAISS_FILE = f"{NAME}/index.faiss"
MAX_QUERY_CHARS = 2048


def _faiss() -> Any:
    try:
        import faiss
    except ImportError as exc:
        raise ConfigError("dense retrieval needs faiss: pip install 'searchgym[dense]'") from exc
    return faiss


def open_faiss_index(path: str | Path, *, mmap: bool = True) -> Any:
    """Read a FAISS index file, memory-mapped where FAISS can (Flat codes, IVF lists), else into memory."""
    faiss = _faiss()
    if mmap:
        try:
            return faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY)
        except RuntimeError as exc:
            log.info("FAISS cannot memory-map %s (%s); reading it into memory", path, str(exc)[:200])
    return faiss.read_index(str(path))


class FaissRetriever:
    """Dense retrieval over any FAISS index whose row ``i`` is passage ``i``, with its query encoder.

    ``query_prefix`` is prepended to each query (e5 models expect ``"query: "``); ``nprobe`` (IVF) and
    ``ef_search`` (HNSW) set the search breadth.
    """

    kind = "dense"

    def __init__(self, index: Any, passages: Sequence[Passage], *, model: str, query_prefix: str = "",
                 normalize: bool = True, nprobe: int | None = None, ef_search: int | None = None,
                 device: str = "cpu", batch_size: int = 64) -> None:
        from searchgym.retrieval.dense import load_encoder

        if index.ntotal != len(passages):
            raise IndexMismatchError(f"the FAISS index holds {index.ntotal} vectors for {len(passages)} passages; "
                                     "row i of the index must be passage i of the corpus")
        self.index, self._passages = index, passages
        self.model_name, self.query_prefix, self.normalize = model, query_prefix, normalize
        self.batch_size = batch_size
        self.encoder = load_encoder(model, device)
        dim = _embedding_dim(self.encoder)
        if dim is not None and dim != index.d:
            raise IndexMismatchError(f"the encoder {model!r} makes {dim}-d vectors, the FAISS index holds {index.d}-d")
        faiss = _faiss()
        if nprobe is not None and _is_ivf(index):
            faiss.extract_index_ivf(index).nprobe = int(nprobe)
        if ef_search is not None and hasattr(index, "hnsw"):
            index.hnsw.efSearch = int(ef_search)
        self._stop = Tokenizer(stopwords="en")

    @property
    def passages(self) -> Sequence[Passage]:
        return self._passages

    def __len__(self) -> int:
        return len(self._passages)

    @property
    def params(self) -> dict[str, Any]:
        return {"model": self.model_name, "index_class": type(self.index).__name__, "dim": int(self.index.d),
                "query_prefix": self.query_prefix}

    def __repr__(self) -> str:
        return f"FaissRetriever(n={len(self)}, {type(self.index).__name__}, model={self.model_name!r})"

    def encode_queries(self, queries: Sequence[str]) -> np.ndarray:
        emb = self.encoder.encode([self.query_prefix + q[:MAX_QUERY_CHARS] for q in queries],
                                  batch_size=self.batch_size, convert_to_numpy=True,
                                  normalize_embeddings=self.normalize, show_progress_bar=False)
        return np.ascontiguousarray(emb, dtype=np.float32)

    def search(self, query: str, k: int = 3) -> list[Hit]:
        return self.batch_search([query], k)[0]

    def search_rows(self, queries: Sequence[str], k: int = 3) -> list[list[tuple[int, float]]]:
        """Each query's top ``k`` as ``(row, score)``, by (score descending, row ascending): the order a split
        index's shards are merged by (:mod:`~searchgym.retrieval.serve_ray`)."""
        if isinstance(queries, str):
            raise TypeError("batch_search takes a list of queries; use search() for one")
        for q in queries:
            if not isinstance(q, str):
                raise QueryError(f"a query must be a string, got {type(q).__name__}: {q!r:.80}")
        results: list[list[tuple[int, float]]] = [[] for _ in queries]
        live = [i for i, q in enumerate(queries) if self._stop.has_terms(q[:MAX_QUERY_CHARS])]
        if k <= 0 or not live:
            return results
        k = min(int(k), len(self))
        scores, idx = self.index.search(self.encode_queries([queries[i] for i in live]), k)
        n = len(self._passages)
        for row, s_row, i_row in zip(live, scores.tolist(), idx.tolist()):
            if max(i_row) >= n:
                raise IndexCorruptError(f"the FAISS index returned row {max(i_row)} for a corpus of {n} "
                                        "passages (its ids are damaged); rebuild or re-import it")
            results[row] = [(i, s) for s, i in by_score_then_row(s_row, i_row)]
        return results

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Hit]]:
        store = self._passages
        return [[Hit(p.id, s, p) for i, s in hits for p in (store[i],)] for hits in self.search_rows(queries, k)]


def _embedding_dim(encoder: Any) -> int | None:
    get = getattr(encoder, "get_embedding_dimension", None) or encoder.get_sentence_embedding_dimension
    d = get()
    return None if d is None else int(d)


def _is_ivf(index: Any) -> bool:
    try:
        _faiss().extract_index_ivf(index)
    except RuntimeError:
        return False
    return True


# -- writing ------------------------------------------------------------------------------------------
def _link_or_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def _passages_into(tmp: Path, corpus: str | Path | Sequence[Passage], format: str | None
                   ) -> tuple[int, str, Iterable[Passage] | None]:
    """Put the passages into ``tmp/passages``: link an index directory's store, or stream a corpus in.
    Returns (n, fingerprint, None)."""
    import hashlib

    from searchgym.retrieval.store import OFFSETS, RECORDS, PassageStoreWriter

    if isinstance(corpus, (str, Path)) and (Path(corpus) / "manifest.json").is_file():
        m = read_manifest(corpus)
        store = m.get("passages_store")
        if not store:
            raise ConfigError(f"{corpus} has no passage store (only sharded indexes do); give the corpus file")
        for f in (RECORDS, OFFSETS):
            _link_or_copy(Path(corpus) / store["dir"] / f, tmp / "passages" / f)
        return m["n_passages"], m["corpus_fingerprint"], None
    if isinstance(corpus, (str, Path)):
        from searchgym.retrieval.corpus import iter_corpus

        it: Iterable[Passage] = iter_corpus(corpus, format=format)
    else:
        it = corpus
    w = PassageStoreWriter(tmp / "passages")
    h = hashlib.sha256()
    try:
        for p in it:
            w.add(p)
            fingerprint_update(h, p)
    finally:
        w.close()
    return w.rows, "sha256:" + h.hexdigest(), None


# -- checking a FAISS file before it is trusted ------------------------------------------------------------
PROBE_TIMEOUT_S = 600
_PROBE_CHUNK = 1 << 22


def _view(faiss: Any, ptr: Any, n: int, dtype: Any) -> np.ndarray:
    """A numpy view of ``n`` items at a FAISS C++ pointer (no copy)."""
    if n == 0:
        return np.zeros(0, dtype)
    return faiss.rev_swig_ptr(ptr, n)


def _in_range(a: np.ndarray, lo: int, hi: int) -> bool:
    for j in range(0, len(a), _PROBE_CHUNK):
        c = a[j:j + _PROBE_CHUNK]
        if len(c) and (int(c.min()) < lo or int(c.max()) >= hi):
            return False
    return True


def _check_hnsw(faiss: Any, index: Any) -> str | None:
    h, n = index.hnsw, index.ntotal
    offsets = _view(faiss, h.offsets.data(), h.offsets.size(), np.uint64)
    neighbors = _view(faiss, h.neighbors.data(), h.neighbors.size(), np.int32)
    if h.levels.size() != n or len(offsets) != n + 1 or (n and int(offsets[-1]) != len(neighbors)) \
            or not (len(offsets) < 2 or bool(np.all(offsets[1:] >= offsets[:-1]))):
        return "its HNSW graph's levels and offsets do not match its vectors"
    if not _in_range(neighbors, -1, n) or not -1 <= h.entry_point < max(n, 1):
        return f"its HNSW graph names neighbours outside rows 0..{n - 1}"
    storage = getattr(index, "storage", None)
    if storage is not None and storage.ntotal != n:
        return f"its HNSW storage holds {storage.ntotal} vectors, the index {n}"
    return None


def _check_ivf(faiss: Any, ivf: Any, n: int) -> str | None:
    inv = ivf.invlists
    if ivf.quantizer.ntotal != ivf.nlist or inv.nlist != ivf.nlist:
        return f"its IVF quantizer holds {ivf.quantizer.ntotal} centroids for {ivf.nlist} lists"
    total = 0
    for lst in range(ivf.nlist):
        size = inv.list_size(lst)
        total += size
        if total > n:
            break
        ptr = inv.get_ids(lst)
        try:
            ok = _in_range(_view(faiss, ptr, size, np.int64), 0, n)
        finally:
            inv.release_ids(lst, ptr)
        if not ok:
            return f"its IVF list {lst} holds ids outside rows 0..{n - 1}"
    if total != n:
        return f"its IVF lists hold {total} ids for {n} vectors"
    return None


def _check_faiss_index(faiss: Any, index: Any) -> str | None:
    """What is wrong with a FAISS index read from a file (None: consistent), checked without copying it."""
    n, d = index.ntotal, index.d
    if not 0 < d <= 1 << 16 or n < 0:
        return f"it claims {n} vectors of {d} dimensions"
    if hasattr(index, "hnsw"):
        why = _check_hnsw(faiss, index)
        if why:
            return why
    if _is_ivf(index):
        why = _check_ivf(faiss, faiss.extract_index_ivf(index), n)
        if why:
            return why
    codes = getattr(index, "codes", None)  # Flat-like: the codes must hold every vector
    if codes is not None and hasattr(index, "code_size") and codes.size() != n * index.code_size:
        return f"its codes hold {codes.size()} bytes for {n} vectors of {index.code_size}"
    if n:
        k = min(10, n)
        _, ids = index.search(np.ones((1, d), dtype=np.float32), k)
        if int(ids.min()) < -1 or int(ids.max()) >= n:
            return f"a test search returned rows outside 0..{n - 1}"
    return None


def _probe_main() -> None:
    """In a child process (see :func:`probe_faiss_file`): read ``argv[1]``, check it, print one JSON line."""
    import json
    import sys

    faiss = _faiss()
    try:
        index = open_faiss_index(sys.argv[1])
        why = _check_faiss_index(faiss, index)
    except (RuntimeError, MemoryError, ValueError, OverflowError) as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        why = f"FAISS cannot read it ({type(exc).__name__}: {first})"
        index = None
    info = {"error": why} if why or index is None else \
        {"class": type(index).__name__, "d": int(index.d), "ntotal": int(index.ntotal)}
    print(json.dumps(info), flush=True)


def probe_faiss_file(path: Path, label: str | Path | None = None) -> dict[str, Any]:
    """Read and check a FAISS file in a child process with an address-space cap (twice the file plus 1 GiB): a
    truncated or forged file that makes FAISS crash, abort or allocate without bound is an IndexCorruptError here
    instead of a dead process. Returns ``{"class", "d", "ntotal"}``."""
    import json
    import subprocess
    import sys

    name = label if label is not None else path
    _faiss()  # ConfigError without faiss, before a child is started
    cap = 2 * path.stat().st_size + (1 << 30) + (1 << 29)

    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    code = "from searchgym.retrieval.dense_scale import _probe_main; _probe_main()"
    try:
        r = subprocess.run([sys.executable, "-c", code, str(path)], check=False, capture_output=True, text=True,
                           timeout=PROBE_TIMEOUT_S, preexec_fn=limit, env={**os.environ, "OMP_NUM_THREADS": "1"})
    except subprocess.TimeoutExpired:
        raise IndexCorruptError(f"{name}: reading and checking it took over {PROBE_TIMEOUT_S} s; refused") from None
    lines = r.stdout.strip().splitlines()
    try:
        info = json.loads(lines[-1]) if r.returncode == 0 and lines else None
    except ValueError:
        info = None
    if not isinstance(info, dict):
        how = f"signal {-r.returncode}" if r.returncode < 0 else f"exit status {r.returncode}"
        raise IndexCorruptError(f"{name} is not a readable FAISS index (FAISS died reading it: {how}); "
                                "give the intact file (truncated or damaged?)")
    if info.get("error"):
        raise IndexCorruptError(f"{name} is not a valid FAISS index: {info['error']}")
    return info


def import_faiss_index(faiss_file: str | Path, corpus: str | Path | Sequence[Passage], out: str | Path, *,
                       model: str, query_prefix: str = "", normalize: bool = True, nprobe: int | None = None,
                       ef_search: int | None = None, overwrite: bool = False, format: str | None = None) -> Path:
    """Make an index directory of a prebuilt FAISS index (hard-linked where possible) and its corpus."""
    faiss_file = Path(faiss_file)
    if not faiss_file.is_file():
        raise ConfigError(f"no FAISS index file at {faiss_file}")
    t0 = time.perf_counter()
    with atomic_dir(out, overwrite=overwrite) as tmp:
        _link_or_copy(faiss_file, tmp / FAISS_FILE)  # checked as linked: a later change fails the checksum
        info = probe_faiss_file(tmp / FAISS_FILE, label=faiss_file)
        n, fp, _ = _passages_into(tmp, corpus, format)
        if n != info["ntotal"]:
            raise IndexMismatchError(f"{faiss_file} holds {info['ntotal']} vectors, the corpus {n} passages; row i "
                                     "of the FAISS index must be passage i of the corpus")
        entry = {"model": model, "query_prefix": query_prefix, "normalize": normalize, "faiss_file": FAISS_FILE,
                 "index_class": info["class"], "dim": info["d"], "ntotal": info["ntotal"],
                 "nprobe": nprobe, "ef_search": ef_search}
        write_manifest(tmp, n_passages=n, fingerprint=fp, backends={NAME: entry},
                       build_seconds=time.perf_counter() - t0,
                       passages={"passages_store": {"format": "records-offsets", "dir": "passages"}})
    return Path(out)


def _default_pq_m(d: int) -> int:
    """The largest divisor of ``d`` not above d/8 (e.g. 48 for 384, 96 for 768): ~4 bytes per 32 dims."""
    return max(m for m in range(1, d // 8 + 1) if d % m == 0) if d >= 8 else 1


def build_ivfpq_index(corpus: str | Path | Sequence[Passage], out: str | Path, *, model: str,
                      nlist: int | None = None, m: int | None = None, nbits: int = 8,
                      train_size: int | None = None, nprobe: int = 16, batch_size: int = 256,
                      query_prefix: str = "", passage_prefix: str = "", device: str = "cpu",
                      overwrite: bool = False, format: str | None = None, show_progress: bool = False) -> Path:
    """Encode a corpus in batches into an IVF-PQ index (streaming; memory: see the module docstring)."""
    from searchgym.retrieval.dense import load_encoder

    faiss = _faiss()
    enc = load_encoder(model, device)
    d = int(_embedding_dim(enc) or 0)
    m = m or _default_pq_m(d)
    if d % m:
        raise ConfigError(f"--pq-m {m} must divide the embedding size {d}")
    t0 = time.perf_counter()
    with atomic_dir(out, overwrite=overwrite) as tmp:
        n, fp, _ = _passages_into(tmp, corpus, format)
        if n == 0:
            raise ConfigError("the corpus holds no passages")
        from searchgym.retrieval.store import PassageStore

        store = PassageStore(tmp / "passages", n)
        nl = nlist or max(1, min(65536, 1 << round(float(np.log2(max(1.0, 4 * np.sqrt(n)))))))
        ts = min(n, train_size or max(39 * nl, 1 << nbits) * 4)
        index = faiss.IndexIVFPQ(faiss.IndexFlatIP(d), d, nl, m, nbits, faiss.METRIC_INNER_PRODUCT)
        pending: list[np.ndarray] = []
        held = 0
        for start in range(0, n, batch_size):
            texts = [passage_prefix + p.contents for p in store[start:start + batch_size]]
            v = np.ascontiguousarray(enc.encode(texts, batch_size=batch_size, convert_to_numpy=True,
                                                normalize_embeddings=True, show_progress_bar=False), np.float32)
            if index.is_trained:
                index.add(v)
                continue
            pending.append(v)
            held += len(v)
            if held >= ts:
                x = np.concatenate(pending)
                index.train(x[:ts])
                index.add(x)
                pending.clear()
            if show_progress and start % (batch_size * 100) == 0:
                log.warning("encoded %s / %s passages", f"{start:,}", f"{n:,}")
        if pending:  # fewer passages than train_size: train on all of them
            x = np.concatenate(pending)
            index.train(x)
            index.add(x)
        index.nprobe = nprobe
        (tmp / NAME).mkdir()
        faiss.write_index(index, str(tmp / FAISS_FILE))
        entry = {"model": model, "query_prefix": query_prefix, "normalize": True, "faiss_file": FAISS_FILE,
                 "index_class": "IndexIVFPQ", "dim": d, "ntotal": n, "nprobe": nprobe, "ef_search": None,
                 "nlist": nl, "pq_m": m, "nbits": nbits, "train_size": ts}
        write_manifest(tmp, n_passages=n, fingerprint=fp, backends={NAME: entry},
                       build_seconds=time.perf_counter() - t0,
                       passages={"passages_store": {"format": "records-offsets", "dir": "passages"}})
    return Path(out)


def load_hybrid(bm25_dir: str | Path, dense_dir: str | Path, *, k_rrf: float = 60, verify: bool = True) -> Any:
    """Reciprocal-rank fusion of two index directories of the same corpus (e.g. a sharded BM25 index and an
    imported FAISS index); IndexMismatchError when their corpus fingerprints differ."""
    from searchgym.retrieval.hybrid import HybridRetriever
    from searchgym.retrieval.index import load_index

    a, b = read_manifest(bm25_dir), read_manifest(dense_dir)
    if a["corpus_fingerprint"] != b["corpus_fingerprint"]:
        raise IndexMismatchError(f"{bm25_dir} and {dense_dir} were built from different corpora "
                                 f"({a['corpus_fingerprint'][:19]}… vs {b['corpus_fingerprint'][:19]}…)")
    return HybridRetriever([load_index(bm25_dir, kind="bm25", verify=verify),
                            load_index(dense_dir, kind="dense", verify=verify)], k_rrf=k_rrf)


def _load_backend(ctx: LoadContext) -> FaissRetriever:
    e = ctx.entry
    idx = open_faiss_index(ctx.path(e["faiss_file"]), mmap=True)
    if idx.d != e.get("dim") or idx.ntotal != e.get("ntotal"):
        raise ValueError(f"the FAISS file holds {idx.ntotal}x{idx.d}, the manifest says {e.get('ntotal')}x{e.get('dim')}")
    return FaissRetriever(idx, ctx.passages, model=ctx.options.get("model") or e["model"],
                          query_prefix=e.get("query_prefix", ""), normalize=bool(e.get("normalize", True)),
                          nprobe=e.get("nprobe"), ef_search=e.get("ef_search"),
                          device=ctx.options.get("device", "cpu"))


register_backend(NAME, provides="dense", load=_load_backend)
