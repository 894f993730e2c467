"""Index directories: a manifest, the passages and each backend's files, written atomically, loaded safely.

Layout::

    DIR/manifest.json        format_version, backends + parameters, corpus fingerprint, sizes of every file
    DIR/passages.parquet     id, title, text (row order = index order), so the directory is self-contained
    DIR/bm25/                bm25s arrays (.npy, allow_pickle=False) + vocab/params json
    DIR/dense/               embeddings.npy (+ hnsw.faiss for HNSW; a Flat index is rebuilt from the embeddings)

The directory is assembled in a temporary sibling and swapped into place (an atomic exchange where the OS
offers one), so an interrupted build leaves no index behind and the final name never goes missing. A later build
removes temporary directories whose build process is gone. ``--overwrite`` replaces only an index directory.

Integrity: the manifest records each file's size and checksum (xxh3-128, ~20 GB/s; blake2b when xxhash is
missing). ``load_index`` verifies both unless given ``verify=False`` (for a huge index you trust), and always
checks the BM25 arrays' structure (ids within the corpus, monotone offsets, vocabulary ids within range) before
any kernel sees them, so a corrupted index raises IndexCorruptError instead of crashing the process. Indexes
written before checksums existed still load, with a warning that they cannot be verified. Nothing is pickled.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from searchgym import dirswap
from searchgym.errors import (
    ConfigError,
    IndexCorruptError,
    IndexMismatchError,
    IndexNotFoundError,
    IndexVersionError,
    ModelLoadError,
    SearchGymError,
)
from searchgym.errors import (
    IndexError_ as _IndexError,
)
from searchgym.fsmode import current_umask
from searchgym.retrieval.base import Passage
from searchgym.retrieval.checksums import default_checksum_algorithm, file_checksum, hasher
from searchgym.retrieval.corpus import corpus_fingerprint, load_corpus

FORMAT = "searchgym-index"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
PASSAGES = "passages.parquet"
BM25_KEYS = {"k1", "b", "method", "stopwords", "stemmer", "lowercase", "backend", "n_threads"}
DENSE_KEYS = {"hnsw_m", "ef_search", "ef_construction", "batch_size", "device"}
log = logging.getLogger(__name__)


def _rebuild_hint(path: Path | str) -> str:
    return f"rebuild it with `searchgym index build CORPUS --out {path}` (add --dense for a dense index)"


# -- writing ------------------------------------------------------------------------------------------
def _is_index_dir(path: Path) -> bool:
    try:
        m = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(m, dict) and m.get("format") == FORMAT


def _check_target(path: Path, overwrite: bool) -> None:
    if not os.path.lexists(path) or (path.is_dir() and not path.is_symlink() and not any(path.iterdir())):
        return
    if not overwrite:
        raise ConfigError(f"{path} already exists; pass overwrite=True (CLI: --overwrite) or choose another --out")
    if path.is_symlink() or not path.is_dir() or not _is_index_dir(path):
        what = "a file" if not path.is_dir() else "a directory that is not a searchgym index (no index manifest)"
        raise ConfigError(f"{path} is {what}; --overwrite only replaces an index directory, so it was left "
                          "untouched: choose another --out or remove it yourself")


def _is_complete_index(p: Path) -> bool:
    return (p / MANIFEST).is_file()


@contextmanager
def atomic_dir(path: str | Path, *, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary directory next to ``path``; on success it replaces ``path``, on any error (or
    KeyboardInterrupt) it is removed and ``path`` is left as it was. Stale temporary directories of killed
    builds of the same ``path`` are removed first."""
    path = Path(path)
    dirswap.cleanup_siblings(path, is_complete=_is_complete_index)  # first: it may restore a parked index
    _check_target(path, overwrite)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = dirswap.tmp_name(path)
    tmp.mkdir(mode=0o777)  # permissions from the umask (mkdtemp would make it 0700)
    try:
        yield tmp
        _check_target(path, overwrite)  # it may have changed during a long build
        for d in (tmp, *(p for p in tmp.rglob("*") if p.is_dir())):  # subdirs made by libraries, too
            d.chmod(0o777 & ~current_umask())
        if path.is_dir() and not any(path.iterdir()):
            path.rmdir()
        dirswap.swap_into_place(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_passages(passages: Sequence[Passage], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({
        "id": pa.array([p.id for p in passages], pa.string()),
        "title": pa.array([p.title for p in passages], pa.string()),
        "text": pa.array([p.text for p in passages], pa.string()),
    })
    pq.write_table(table, path, compression="zstd")


def read_passages(path: Path) -> list[Passage]:
    import pyarrow.parquet as pq

    t = pq.read_table(path, columns=["id", "title", "text"])
    return list(map(Passage, t.column("id").to_pylist(), t.column("title").to_pylist(), t.column("text").to_pylist()))


def _file_sizes(root: Path) -> dict[str, int]:
    return {str(f.relative_to(root)): f.stat().st_size for f in sorted(root.rglob("*")) if f.is_file()}


def _checksums(root: Path, files: dict[str, int]) -> dict[str, Any]:
    algo = default_checksum_algorithm()
    return {"algorithm": algo, "files": {rel: file_checksum(root / rel, algo) for rel in files}}


def save_retrievers(path: str | Path, passages: Sequence[Passage], *, bm25: Any = None, dense: Any = None,
                    overwrite: bool = False, build_seconds: float | None = None) -> Path:
    """Write an index directory holding the given BM25 and/or dense retrievers over ``passages``."""
    if bm25 is None and dense is None:
        raise ConfigError("nothing to save: give a BM25 and/or a dense retriever")
    import searchgym

    t0 = time.perf_counter()
    path = Path(path)
    with atomic_dir(path, overwrite=overwrite) as tmp:
        write_passages(passages, tmp / PASSAGES)
        backends: dict[str, Any] = {}
        if bm25 is not None:
            backends["bm25"] = bm25._save_files(tmp / "bm25")
        if dense is not None:
            backends["dense"] = dense._save_files(tmp / "dense")
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "searchgym_version": getattr(searchgym, "__version__", "unknown"),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "build_seconds": round(build_seconds if build_seconds is not None else time.perf_counter() - t0, 3),
            "n_passages": len(passages),
            "corpus_fingerprint": corpus_fingerprint(passages),
            "passages_file": PASSAGES,
            "backends": backends,
            "files": (files := _file_sizes(tmp)),
            "checksums": _checksums(tmp, files),
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return path


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
    **params: Any,
) -> Path:
    """Build an index directory from a corpus file / HF dataset / list of passages.

    ``dense`` names the encoder (``"all-MiniLM-L6-v2"`` = the bundled default) or is None for no dense part;
    ``hnsw`` picks HNSW over Flat. ``params``: BM25 ones (k1, b, method, stopwords, stemmer, lowercase) and
    dense ones (hnsw_m, ef_search, ef_construction, batch_size, device).
    """
    unknown = set(params) - BM25_KEYS - DENSE_KEYS
    if unknown:
        raise ConfigError(f"unknown index parameters {sorted(unknown)}; BM25: {sorted(BM25_KEYS)}, "
                          f"dense: {sorted(DENSE_KEYS)}")
    if not bm25 and not dense:
        raise ConfigError("an index needs BM25 and/or dense: keep bm25=True or give dense=MODEL")
    dirswap.cleanup_siblings(Path(out_dir), is_complete=_is_complete_index)
    _check_target(Path(out_dir), overwrite)  # fail before the (long) build, not after
    t0 = time.perf_counter()
    passages = list(corpus) if not isinstance(corpus, (str, Path)) else load_corpus(corpus, format=format)
    if not passages:
        raise ConfigError(f"the corpus {corpus if isinstance(corpus, (str, Path)) else ''} holds no passages")
    b = d = None
    if bm25:
        from searchgym.retrieval.bm25 import BM25Retriever

        kw = {k: v for k, v in params.items() if k in BM25_KEYS}
        kw.setdefault("backend", "numpy")  # building never needs the numba kernels
        b = BM25Retriever(passages, show_progress=show_progress, **kw)
    if dense:
        from searchgym.retrieval.dense import DenseRetriever

        kw = {k: v for k, v in params.items() if k in DENSE_KEYS}
        d = DenseRetriever(passages, model=dense, index_type="hnsw" if hnsw else "flat",
                           show_progress=show_progress, **kw)
    return save_retrievers(out_dir, passages, bm25=b, dense=d, overwrite=overwrite,
                           build_seconds=time.perf_counter() - t0)


# -- reading ------------------------------------------------------------------------------------------
def _resolve_root(root: Path) -> Path:
    """``root``, or (when a writer died between the two renames of a non-atomic swap) its parked old copy."""
    if os.path.lexists(root) or not root.parent.is_dir():
        return root
    olds = [p for p in root.parent.glob(f".{root.name}.old-*") if _is_complete_index(p)]
    if olds:
        old = max(olds, key=lambda p: p.stat().st_mtime)
        log.warning("%s is missing; reading the previous copy %s left by an interrupted swap", root, old)
        return old
    return root


def read_manifest(path: str | Path) -> dict[str, Any]:
    """Read and check ``DIR/manifest.json`` (typed errors for missing, corrupt and other-version files)."""
    root = _resolve_root(Path(path))
    if not root.exists():
        raise IndexNotFoundError(f"no index directory at {root}; {_rebuild_hint(root)}")
    if not root.is_dir():
        raise IndexNotFoundError(f"{root} is a file, not an index directory; {_rebuild_hint(root)}")
    mpath = root / MANIFEST
    if not mpath.exists():
        raise IndexNotFoundError(f"{mpath} is missing (not an index directory, or a half-copied one); "
                                 f"{_rebuild_hint(root)}")
    try:
        m = json.loads(mpath.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise IndexCorruptError(f"{mpath} is not valid JSON ({exc}); {_rebuild_hint(root)}") from None
    if not isinstance(m, dict) or m.get("format") != FORMAT or "format_version" not in m:
        raise IndexCorruptError(f"{mpath} is not a searchgym index manifest; {_rebuild_hint(root)}")
    if m["format_version"] != FORMAT_VERSION:
        raise IndexVersionError(
            f"{mpath} has format_version {m['format_version']!r}; this searchgym reads version {FORMAT_VERSION}. "
            f"{_rebuild_hint(root)} with this version (or install the searchgym that wrote it)")
    for key in ("backends", "files", "n_passages", "corpus_fingerprint"):
        if key not in m:
            raise IndexCorruptError(f"{mpath} lacks {key!r}; {_rebuild_hint(root)}")
    _check_manifest_types(mpath, m)
    return m


def _check_manifest_types(mpath: Path, m: dict[str, Any]) -> None:
    def bad(what: str) -> IndexCorruptError:
        return IndexCorruptError(f"{mpath}: {what}; {_rebuild_hint(mpath.parent)}")

    files = m["files"]
    if not isinstance(files, dict) or not all(
            isinstance(k, str) and type(v) is int and v >= 0 for k, v in files.items()):
        raise bad("'files' must map file names to byte sizes")
    for rel in files:
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise bad(f"'files' names {rel!r}, outside the index directory")
    if type(m["n_passages"]) is not int or m["n_passages"] < 0:
        raise bad("'n_passages' must be a non-negative integer")
    if not isinstance(m["backends"], dict) or not all(isinstance(v, dict) for v in m["backends"].values()):
        raise bad("'backends' must map backend names to parameter objects")
    if not isinstance(m["corpus_fingerprint"], str):
        raise bad("'corpus_fingerprint' must be a string")
    if not isinstance(m.get("passages_file", PASSAGES), str):
        raise bad("'passages_file' must be a string")
    ck = m.get("checksums")
    if ck is not None:
        if (not isinstance(ck, dict) or not isinstance(ck.get("files"), dict)
                or not all(isinstance(v, str) for v in ck["files"].values())
                or set(ck["files"]) != set(files)):
            raise bad("'checksums' must hold one checksum per file in 'files'")
        try:
            hasher(ck.get("algorithm"))
        except (KeyError, ImportError, TypeError):
            raise bad(f"unknown checksum algorithm {ck.get('algorithm')!r} (xxh3_128 needs: pip install xxhash)") \
                from None


def _check_files(root: Path, m: dict[str, Any], verify: bool = True) -> None:
    """Every file present with its recorded size; with ``verify``, its recorded checksum too."""
    for rel, size in m["files"].items():
        f = root / rel
        if not f.is_file():
            raise IndexNotFoundError(f"{f} is missing from the index; {_rebuild_hint(root)}")
        actual = f.stat().st_size
        if actual != size:
            raise IndexCorruptError(f"{f} has {actual} bytes, the manifest says {size} (truncated or modified); "
                                    f"{_rebuild_hint(root)}")
    if not verify:
        return
    ck = m.get("checksums")
    if ck is None:
        warnings.warn(f"{root / MANIFEST} has no checksums (written by an older searchgym), so its files cannot "
                      f"be verified; {_rebuild_hint(root)} to add them", stacklevel=3)
        return
    algo = ck["algorithm"]
    for rel, want in ck["files"].items():
        got = file_checksum(root / rel, algo)
        if got != want:
            raise IndexCorruptError(f"{root / rel} fails its {algo} checksum (the file was modified or damaged "
                                    f"after the build); {_rebuild_hint(root)}")


def index_info(path: str | Path) -> dict[str, Any]:
    """The manifest plus the directory's total size on disk."""
    m = read_manifest(path)
    info = dict(m)
    info["path"] = str(Path(path).resolve())
    info["total_bytes"] = sum(m["files"].values())
    return info


def load_index(path: str | Path, *, kind: str | None = None, expected_fingerprint: str | None = None,
               backend: str = "auto", device: str = "cpu", mmap: bool = False, k_rrf: float = 60,
               index_type: str | None = None, model: str | None = None, verify: bool = True) -> Any:
    """Load an index directory as a retriever.

    ``kind``: None (BM25, dense, or hybrid when the index has both), "bm25", "rank_bm25", "dense" or "hybrid".
    ``expected_fingerprint``: the ``corpus_fingerprint`` of the corpus you mean to search; a different one raises
    IndexMismatchError. ``backend`` picks the BM25 engine ("auto", "numba", "numpy"). ``verify=False`` skips the
    per-file checksums (sizes and the BM25 structure are still checked, so nothing can crash the process).
    """
    root = _resolve_root(Path(path))
    m = read_manifest(root)
    _check_files(root, m, verify)
    if expected_fingerprint is not None and expected_fingerprint != m["corpus_fingerprint"]:
        raise IndexMismatchError(
            f"{root / MANIFEST} was built from corpus {m['corpus_fingerprint'][:19]}…, not the expected "
            f"{expected_fingerprint[:19]}…; {_rebuild_hint(root)} from the corpus you mean to search")
    have = set(m["backends"])
    if not have or not have <= {"bm25", "dense"}:
        raise IndexCorruptError(f"{root / MANIFEST} lists backends {sorted(have)}; expected bm25 and/or dense. "
                                f"{_rebuild_hint(root)}")
    if kind is None:
        kind = "hybrid" if {"bm25", "dense"} <= have else next(iter(sorted(have)), "")
    needs = {"bm25": {"bm25"}, "rank_bm25": {"bm25"}, "dense": {"dense"}, "hybrid": {"bm25", "dense"}}
    if kind not in needs:
        raise ConfigError(f"unknown index kind {kind!r}; choose one of {sorted(needs)}")
    missing = needs[kind] - have
    if missing:
        raise IndexNotFoundError(
            f"{root} has no {'/'.join(sorted(missing))} part (it has {sorted(have)}); rebuild with "
            f"`searchgym index build CORPUS --out {root}{' --dense' if 'dense' in missing else ' --bm25'}`")

    ppath = root / m.get("passages_file", PASSAGES)
    try:
        passages = read_passages(ppath)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for a damaged file
        raise IndexCorruptError(f"{ppath} cannot be read ({type(exc).__name__}: {exc}); {_rebuild_hint(root)}") \
            from None
    if len(passages) != m["n_passages"]:
        raise IndexCorruptError(f"{ppath} holds {len(passages)} passages, the manifest says {m['n_passages']}; "
                                f"{_rebuild_hint(root)}")

    parts = []
    if needs[kind] & {"bm25"}:
        from searchgym.retrieval.bm25 import BM25Retriever, resolve_backend

        be = "rank_bm25" if kind == "rank_bm25" else resolve_backend(backend)  # a bad argument is a ConfigError
        parts.append(_load_part(root, "bm25", lambda: BM25Retriever._from_files(
            root / "bm25", m["backends"]["bm25"], passages, backend=be, mmap=mmap)))
    if "dense" in needs[kind]:
        from searchgym.retrieval.dense import DenseRetriever

        parts.append(_load_part(root, "dense", lambda: DenseRetriever._from_files(
            root / "dense", m["backends"]["dense"], passages, device=device, model=model, index_type=index_type,
            mmap=mmap)))
    if kind == "hybrid":
        from searchgym.retrieval.hybrid import HybridRetriever

        return HybridRetriever(parts, k_rrf=k_rrf)
    return parts[0]


def _load_part(root: Path, name: str, load: Any) -> Any:
    """Run a backend loader; anything but a typed index / model error means the files are damaged."""
    try:
        return load()
    except (_IndexError, ModelLoadError):
        raise
    except (SearchGymError, Exception) as exc:  # noqa: BLE001 - numpy/json/faiss/re raise many types
        raise IndexCorruptError(f"{root / name} cannot be read ({type(exc).__name__}: {exc}); "
                                f"{_rebuild_hint(root)}") from None
