"""``searchgym index split``: one index directory per shard of a sharded index (data layout, not serving), or
per row range of a Flat dense index (:func:`split_dense_index`).

``split_sharded_index(DIR, OUT)`` writes ``OUT/shard-000`` ...: the shard's arrays (hard links where the
filesystem allows), the global vocabulary and the shard's own passages. Each scores with the global statistics,
so a set of split shards served side by side merges to the unsharded index's exact top k.

The source is opened by :func:`~searchgym.retrieval.index.load_index` first (sizes, checksums, every path
contained in DIR, the shards' structure), so a damaged or hostile source is refused with IndexCorruptError before
anything is written. The linked files carry the source's checksums (not fresh ones): a shard file changed after
the check fails verification in the split index as it would in the source.
"""

from __future__ import annotations

import json
import os
import shutil
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.errors import ConfigError, IndexCorruptError
from searchgym.retrieval.checksums import default_checksum_algorithm, file_checksum
from searchgym.retrieval.index import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    atomic_dir,
    contained,
    load_index,
    read_manifest,
)

ARRAYS = ("data.npy", "indices.npy", "indptr.npy")


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def _shard_specs(src: Path, entry: dict[str, Any], n_passages: int) -> list[dict[str, Any]]:
    """The shard list, each ``start``/``n`` an int within the corpus and ``dir`` inside ``src`` (load_index has
    checked the same; this keeps the split safe on its own)."""
    specs = entry.get("shards")
    if not isinstance(specs, list) or not specs:
        raise IndexCorruptError(f"{src / MANIFEST}: 'shards' must be a non-empty list")
    start = 0
    for i, s in enumerate(specs):
        if not isinstance(s, dict) or type(s.get("start")) is not int or type(s.get("n")) is not int \
                or s["start"] != start or not 0 <= s["n"] <= n_passages - start:
            raise IndexCorruptError(f"{src / MANIFEST}: shard {i} is {str(s)[:80]!r}, not an object with an int "
                                    f"start/n covering rows {start}.. of {n_passages}; rebuild the index")
        contained(src, s.get("dir"), what=f"shard {i}'s 'dir'")
        start += s["n"]
    if start != n_passages:
        raise IndexCorruptError(f"{src / MANIFEST}: the shards cover {start} of {n_passages} passages")
    return specs


def _manifest(tmp: Path, src_ck: dict[str, Any] | None, carried: dict[str, str], **fields: Any) -> None:
    """``tmp/manifest.json``: every file's size, the carried files' checksums from the source, the rest hashed."""
    import searchgym

    files = {str(f.relative_to(tmp)): f.stat().st_size for f in sorted(tmp.rglob("*")) if f.is_file()}
    algo = src_ck["algorithm"] if src_ck else default_checksum_algorithm()
    sums = {rel: (src_ck["files"][carried[rel]] if src_ck and rel in carried else file_checksum(tmp / rel, algo))
            for rel in files}
    m = {"format": FORMAT, "format_version": FORMAT_VERSION,
         "searchgym_version": getattr(searchgym, "__version__", "unknown"), "build_seconds": 0.0, **fields,
         "files": files, "checksums": {"algorithm": algo, "files": sums}}
    (tmp / MANIFEST).write_text(json.dumps(m, indent=2) + "\n", encoding="utf-8")


def _copy_records(records: Path, lo: int, hi: int, dst: Path) -> None:
    with open(records, "rb") as src_f, open(dst, "wb") as g:
        src_f.seek(lo)
        left = hi - lo
        while left:
            chunk = src_f.read(min(left, 1 << 24))
            if not chunk:
                raise IndexCorruptError(f"{records} ends before byte {hi}")
            g.write(chunk)
            left -= len(chunk)


def split_sharded_index(src: str | Path, out: str | Path, *, overwrite: bool = False,
                        verify: bool = True) -> list[Path]:
    """Write one index directory per shard of the sharded index ``src`` into ``out/shard-NNN``.
    ``verify=False`` skips the source's checksums (sizes, containment and structure are still checked)."""
    from searchgym.retrieval.sharded import NAME as SHARDED
    from searchgym.retrieval.store import OFFSETS, RECORDS

    src = Path(src)
    m = read_manifest(src)
    entry = m["backends"].get(SHARDED)
    if entry is None:
        raise ConfigError(f"{src} is not a sharded index (backends: {sorted(m['backends'])}); build it with "
                          "`searchgym index build CORPUS --shards N`")
    load_index(src, kind="bm25", backend="numpy", verify=verify)  # the loader's checks, refused before any write
    specs = _shard_specs(src, entry, m["n_passages"])
    vocab_rel = str(Path(entry["vocab_file"]))
    sdir = contained(src, m["passages_store"]["dir"], what="'passages_store'")
    offsets = np.memmap(sdir / OFFSETS, dtype="<u8", mode="r")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    dirs = []
    for i, spec in enumerate(specs):
        a, n = spec["start"], spec["n"]
        d = out / f"shard-{i:03d}"
        with atomic_dir(d, overwrite=overwrite) as tmp:
            (tmp / "passages").mkdir()
            lo, hi = int(offsets[a]), int(offsets[a + n])
            _copy_records(sdir / RECORDS, lo, hi, tmp / "passages" / RECORDS)
            (np.asarray(offsets[a:a + n + 1], dtype="<u8") - np.uint64(lo)).astype("<u8").tofile(
                tmp / "passages" / OFFSETS)
            shard_rel = str(Path(spec["dir"]))
            (tmp / SHARDED / "shards" / "000").mkdir(parents=True)
            carried = {f"{SHARDED}/shards/000/{f}": f"{shard_rel}/{f}" for f in ARRAYS}
            carried[f"{SHARDED}/vocab.json"] = vocab_rel
            for new, old in carried.items():
                if old not in m["files"]:
                    raise IndexCorruptError(f"{src / MANIFEST}: {old!r} is not one of the index's listed files")
                _link_or_copy(src / old, tmp / new)
            sub = {**entry, "vocab_file": f"{SHARDED}/vocab.json",
                   "shards": [{**spec, "dir": f"{SHARDED}/shards/000", "start": 0}],
                   "split_from": {"corpus_fingerprint": m["corpus_fingerprint"], "shard": i,
                                  "of": len(specs), "start": a, "n_passages": m["n_passages"]}}
            _manifest(tmp, m.get("checksums"), carried, n_passages=n,
                      corpus_fingerprint=f"{m['corpus_fingerprint']}#shard{i}",
                      passages_store={"format": "records-offsets", "dir": "passages"}, backends={SHARDED: sub})
        dirs.append(d)
    _write_listing(out, src, dirs, m["n_passages"], m["corpus_fingerprint"])
    return dirs


def _write_listing(out: Path, src: Path, dirs: list[Path], n_passages: int, fingerprint: str) -> None:
    listing = out / "shards.json"
    tmp_listing = listing.with_name(f".{listing.name}.tmp-{os.getpid()}")
    tmp_listing.write_text(json.dumps({"source": str(src.resolve()), "shards": [p.name for p in dirs],
                                       "n_passages": n_passages, "corpus_fingerprint": fingerprint}, indent=2))
    os.replace(tmp_listing, listing)


# -- dense: a Flat inner-product index split into row ranges ------------------------------------------------
def _flat_vectors(src: Path, r: Any) -> tuple[Any, dict[str, Any]]:
    """``(get(a, b) -> float32 rows a..b-1, encoder entry)`` of a dense index whose search is exact (a Flat
    inner-product index): only then do the shards' top k merge to the unsplit index's top k."""
    from searchgym.retrieval.dense import DenseRetriever
    from searchgym.retrieval.dense_scale import FaissRetriever, _faiss

    faiss = _faiss()
    if isinstance(r, DenseRetriever) and r.index_type == "flat":
        return (lambda a, b: np.asarray(r.embeddings[a:b], dtype=np.float32)), {
            "model": r.model_name, "query_prefix": "", "normalize": True}
    if isinstance(r, FaissRetriever) and isinstance(r.index, faiss.IndexFlat) \
            and r.index.metric_type == faiss.METRIC_INNER_PRODUCT:
        return (lambda a, b: r.index.reconstruct_n(a, b - a)), {
            "model": r.model_name, "query_prefix": r.query_prefix, "normalize": r.normalize}
    raise ConfigError(f"{src} is a dense index of {r!r}: only a Flat inner-product index splits into shards whose "
                      "merged top k is the unsplit index's (HNSW / IVF search is approximate and would differ)")


def _write_dense_shard(tmp: Path, passages: Any, vectors: Any, entry: dict[str, Any], fingerprint: str) -> None:
    from searchgym.retrieval.dense_scale import FAISS_FILE, NAME, _faiss
    from searchgym.retrieval.index import write_manifest
    from searchgym.retrieval.store import PassageStoreWriter

    w = PassageStoreWriter(tmp / "passages")
    try:
        for p in passages:
            w.add(p)
    finally:
        w.close()
    faiss = _faiss()
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    (tmp / NAME).mkdir()
    faiss.write_index(index, str(tmp / FAISS_FILE))
    entry = {**entry, "faiss_file": FAISS_FILE, "index_class": "IndexFlatIP", "dim": int(index.d),
             "ntotal": int(index.ntotal), "nprobe": None, "ef_search": None}
    write_manifest(tmp, n_passages=int(index.ntotal), fingerprint=fingerprint, backends={NAME: entry},
                   build_seconds=0.0, passages={"passages_store": {"format": "records-offsets", "dir": "passages"}})


def split_dense_index(src: str | Path, out: str | Path, *, shards: int | None = None, shard_size: int | None = None,
                      overwrite: bool = False, verify: bool = True) -> list[Path]:
    """Write the dense index ``src`` (a Flat inner-product index: built with ``--dense MODEL``, or an imported
    ``IndexFlatIP``) as ``out/shard-NNN``, one ``dense_faiss`` index per contiguous row range, each with its
    rows' vectors, passages and the encoder's name. Every shard scores a query exactly as the unsplit index does,
    so the shards served side by side (``searchgym serve-ray OUT``, each with its encoder, on a GPU with
    ``--gpus-per-shard``) merge to its exact top k."""
    from searchgym.retrieval.sharded import _shard_bounds

    src = Path(src)
    m = read_manifest(src)
    r = load_index(src, kind="dense", verify=verify)  # the loader's checks, refused before any write
    get, entry = _flat_vectors(src, r)
    n = len(r)
    bounds = _shard_bounds(n, shards, shard_size)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    dirs = []
    for i, (a, b) in enumerate(pairwise(bounds)):
        d = out / f"shard-{i:03d}"
        split_from = {"corpus_fingerprint": m["corpus_fingerprint"], "shard": i, "of": len(bounds) - 1, "start": a,
                      "n_passages": n}
        with atomic_dir(d, overwrite=overwrite) as tmp:
            _write_dense_shard(tmp, (r.passages[j] for j in range(a, b)), get(a, b), {**entry, "split_from": split_from},
                               f"{m['corpus_fingerprint']}#shard{i}")
        dirs.append(d)
    _write_listing(out, src, dirs, n, m["corpus_fingerprint"])
    return dirs
