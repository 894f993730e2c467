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

from searchgym.errors import ConfigError, IndexMismatchError, QueryError
from searchgym.retrieval.base import Hit, Passage
from searchgym.retrieval.corpus import fingerprint_update
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

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Hit]]:
        if isinstance(queries, str):
            raise TypeError("batch_search takes a list of queries; use search() for one")
        for q in queries:
            if not isinstance(q, str):
                raise QueryError(f"a query must be a string, got {type(q).__name__}: {q!r:.80}")
        results: list[list[Hit]] = [[] for _ in queries]
        live = [i for i, q in enumerate(queries) if self._stop.has_terms(q[:MAX_QUERY_CHARS])]
        if k <= 0 or not live:
            return results
        k = min(int(k), len(self))
        scores, idx = self.index.search(self.encode_queries([queries[i] for i in live]), k)
        store = self._passages
        for row, s_row, i_row in zip(live, scores.tolist(), idx.tolist()):
            hits = []
            for s, i in zip(s_row, i_row):
                if i >= 0:
                    p = store[i]
                    hits.append(Hit(p.id, s, p))
            results[row] = hits
        return results


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


def import_faiss_index(faiss_file: str | Path, corpus: str | Path | Sequence[Passage], out: str | Path, *,
                       model: str, query_prefix: str = "", normalize: bool = True, nprobe: int | None = None,
                       ef_search: int | None = None, overwrite: bool = False, format: str | None = None) -> Path:
    """Make an index directory of a prebuilt FAISS index (hard-linked where possible) and its corpus."""
    faiss_file = Path(faiss_file)
    if not faiss_file.is_file():
        raise ConfigError(f"no FAISS index file at {faiss_file}")
    idx = open_faiss_index(faiss_file)
    t0 = time.perf_counter()
    with atomic_dir(out, overwrite=overwrite) as tmp:
        n, fp, _ = _passages_into(tmp, corpus, format)
        if n != idx.ntotal:
            raise IndexMismatchError(f"{faiss_file} holds {idx.ntotal} vectors, the corpus {n} passages; row i of "
                                     "the FAISS index must be passage i of the corpus")
        _link_or_copy(faiss_file, tmp / FAISS_FILE)
        entry = {"model": model, "query_prefix": query_prefix, "normalize": normalize, "faiss_file": FAISS_FILE,
                 "index_class": type(idx).__name__, "dim": int(idx.d), "ntotal": int(idx.ntotal),
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
