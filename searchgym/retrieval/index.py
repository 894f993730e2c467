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

Every path an index names (``files``, ``passages_file``, the passage store, a backend's own files) must
resolve inside the index directory, symlinks included, or the manifest is refused with IndexCorruptError,
verified or not.

Backends: this module is the one layer that owns the manifest, the passages and the loader; it imports no
backend. A backend module registers itself (:func:`register_backend`) with the retriever kind it provides
("bm25" or "dense") and a loader that reads its own files; the built-in ones (``bm25``, ``dense``,
``bm25_sharded``) are imported by name when a manifest first names them. Building is
:mod:`searchgym.retrieval.build`; a sharded index (:mod:`searchgym.retrieval.sharded`) keeps its passages
in a memory-mapped record store (:mod:`searchgym.retrieval.store`) instead of ``passages.parquet``.
"""

from __future__ import annotations

import functools
import importlib
import json
import logging
import os
import shutil
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
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
from searchgym.retrieval.corpus import corpus_fingerprint

FORMAT = "searchgym-index"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
PASSAGES = "passages.parquet"
log = logging.getLogger(__name__)


def _rebuild_hint(path: Path | str) -> str:
    return f"rebuild it with `searchgym index build CORPUS --out {path}` (add --dense MODEL for a dense index)"


# -- the backend registry -----------------------------------------------------------------------------
@dataclass(frozen=True)
class LoadContext:
    """What a backend loader gets: the index root, its backend name and manifest entry, the passages
    (a list, or a memory-mapped :class:`~searchgym.retrieval.store.PassageStore`) and the load options
    (``backend``, ``device``, ``mmap``, ``model``, ``index_type``, ``n_threads``, ``kind``)."""

    root: Path
    name: str
    entry: dict[str, Any]
    passages: Sequence[Passage]
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def dir(self) -> Path:
        return self.root / self.name

    def path(self, rel: str) -> Path:
        """``root / rel``, refused (IndexCorruptError) unless it resolves inside the index directory."""
        return contained(self.root, rel, what=f"backend {self.name!r}")


@dataclass(frozen=True)
class BackendSpec:
    """A registered backend: ``provides`` is the retriever kind it serves ("bm25" or "dense")."""

    name: str
    provides: str
    load: Callable[[LoadContext], Any]
    check_options: Callable[[dict[str, Any]], None] | None = None  # raise ConfigError for a bad load option


_REGISTRY: dict[str, BackendSpec] = {}
# The built-in backends, imported by module name when a manifest first names one.
_BUILTIN = {"bm25": "searchgym.retrieval.bm25", "dense": "searchgym.retrieval.dense",
            "bm25_sharded": "searchgym.retrieval.sharded",
            "dense_faiss": "searchgym.retrieval.dense_scale"}


def register_backend(name: str, *, provides: str, load: Callable[[LoadContext], Any],
                     check_options: Callable[[dict[str, Any]], None] | None = None) -> None:
    """Make ``load_index`` read manifests that list backend ``name``: ``load`` reads its files (any error it
    raises becomes IndexCorruptError), ``check_options`` refuses bad load options first (ConfigError)."""
    if provides not in ("bm25", "dense"):
        raise ConfigError(f"backend {name!r}: provides must be 'bm25' or 'dense', not {provides!r}")
    _REGISTRY[name] = BackendSpec(name, provides, load, check_options)


def get_backend(name: str) -> BackendSpec | None:
    """The registered backend ``name`` (importing a built-in one on first use), or None."""
    if name not in _REGISTRY and name in _BUILTIN:
        importlib.import_module(_BUILTIN[name])
    return _REGISTRY.get(name)


def contained(root: Path, rel: Any, *, what: str = "a manifest entry") -> Path:
    """``root / rel`` if it stays inside ``root`` after resolving ``..`` and symlinks; else IndexCorruptError."""
    if not isinstance(rel, str) or not rel or "\x00" in rel:
        raise IndexCorruptError(f"{root / MANIFEST}: {what} names an invalid path {rel!r}; {_rebuild_hint(root)}")
    p = Path(rel)
    base = root.resolve()
    full = (root / p).resolve()
    if p.is_absolute() or ".." in p.parts or (full != base and base not in full.parents):
        raise IndexCorruptError(f"{root / MANIFEST}: {what} names {rel!r}, which resolves outside the index "
                                f"directory; refused. {_rebuild_hint(root)}")
    return root / p


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


def write_manifest(root: Path, *, n_passages: int, fingerprint: str, backends: dict[str, Any],
                   build_seconds: float, passages: dict[str, Any]) -> dict[str, Any]:
    """Write ``root/manifest.json`` listing every file under ``root`` with its size and checksum.
    ``passages``: ``{"passages_file": ...}`` (parquet) or ``{"passages_store": {...}}`` (record store)."""
    import searchgym

    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "searchgym_version": getattr(searchgym, "__version__", "unknown"),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "build_seconds": round(build_seconds, 3),
        "n_passages": n_passages,
        "corpus_fingerprint": fingerprint,
        **passages,
        "backends": backends,
        "files": (files := _file_sizes(root)),
        "checksums": _checksums(root, files),
    }
    (root / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def save_retrievers(path: str | Path, passages: Sequence[Passage], *, bm25: Any = None, dense: Any = None,
                    overwrite: bool = False, build_seconds: float | None = None) -> Path:
    """Write an index directory holding the given BM25 and/or dense retrievers over ``passages``; each
    retriever writes its own files (``_save_files``) into its backend's subdirectory."""
    if bm25 is None and dense is None:
        raise ConfigError("nothing to save: give a BM25 and/or a dense retriever")
    t0 = time.perf_counter()
    path = Path(path)
    with atomic_dir(path, overwrite=overwrite) as tmp:
        write_passages(passages, tmp / PASSAGES)
        backends = {name: part._save_files(tmp / name) for name, part in (("bm25", bm25), ("dense", dense))
                    if part is not None}
        write_manifest(tmp, n_passages=len(passages), fingerprint=corpus_fingerprint(passages), backends=backends,
                       build_seconds=build_seconds if build_seconds is not None else time.perf_counter() - t0,
                       passages={"passages_file": PASSAGES})
    return path


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
    root = mpath.parent
    for rel in files:
        contained(root, rel, what="'files'")
    if type(m["n_passages"]) is not int or m["n_passages"] < 0:
        raise bad("'n_passages' must be a non-negative integer")
    if not isinstance(m["backends"], dict) or not all(isinstance(v, dict) for v in m["backends"].values()):
        raise bad("'backends' must map backend names to parameter objects")
    if not isinstance(m["corpus_fingerprint"], str):
        raise bad("'corpus_fingerprint' must be a string")
    store = m.get("passages_store")
    if store is not None:
        if not isinstance(store, dict) or not isinstance(store.get("dir"), str):
            raise bad("'passages_store' must be an object with a 'dir'")
        contained(root, store["dir"], what="'passages_store'")
    else:
        pf = m.get("passages_file", PASSAGES)
        contained(root, pf, what="'passages_file'")
        if pf not in files:
            raise bad(f"'passages_file' {pf!r} is not one of the index's listed files")
    ck = m.get("checksums")
    if ck is not None:
        if (not isinstance(ck, dict) or not isinstance(ck.get("files"), dict)
                or not all(isinstance(v, str) for v in ck["files"].values())
                or set(ck["files"]) != set(files)):
            raise bad("'checksums' must hold one checksum per file in 'files'")
        try:
            hasher(str(ck.get("algorithm")))
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


def _read_passages(root: Path, m: dict[str, Any]) -> Sequence[Passage]:
    store = m.get("passages_store")
    if store is not None:
        from searchgym.retrieval.store import PassageStore

        d = contained(root, store["dir"], what="'passages_store'")
        try:
            return PassageStore(d, m["n_passages"])
        except (OSError, ValueError) as exc:
            raise IndexCorruptError(f"{d} cannot be read ({type(exc).__name__}: {exc}); {_rebuild_hint(root)}") \
                from None
    ppath = contained(root, m.get("passages_file", PASSAGES), what="'passages_file'")
    try:
        passages = read_passages(ppath)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for a damaged file
        raise IndexCorruptError(f"{ppath} cannot be read ({type(exc).__name__}: {exc}); {_rebuild_hint(root)}") \
            from None
    if len(passages) != m["n_passages"]:
        raise IndexCorruptError(f"{ppath} holds {len(passages)} passages, the manifest says {m['n_passages']}; "
                                f"{_rebuild_hint(root)}")
    return passages


def load_index(path: str | Path, *, kind: str | None = None, expected_fingerprint: str | None = None,
               backend: str = "auto", device: str = "cpu", mmap: bool = False, k_rrf: float = 60,
               index_type: str | None = None, model: str | None = None, verify: bool = True,
               n_threads: int | None = None) -> Any:
    """Load an index directory as a retriever.

    ``kind``: None (BM25, dense, or hybrid when the index has both), "bm25", "rank_bm25", "dense" or "hybrid".
    ``expected_fingerprint``: the ``corpus_fingerprint`` of the corpus you mean to search; a different one raises
    IndexMismatchError. ``backend`` picks the BM25 engine ("auto", "numba", "numpy"). ``verify=False`` skips the
    per-file checksums (sizes and the BM25 structure are still checked, so nothing can crash the process).
    A sharded index is always memory-mapped; ``n_threads`` sets how many shards it scores at once.
    """
    root = _resolve_root(Path(path))
    m = read_manifest(root)
    _check_files(root, m, verify)
    if expected_fingerprint is not None and expected_fingerprint != m["corpus_fingerprint"]:
        raise IndexMismatchError(
            f"{root / MANIFEST} was built from corpus {m['corpus_fingerprint'][:19]}…, not the expected "
            f"{expected_fingerprint[:19]}…; {_rebuild_hint(root)} from the corpus you mean to search")
    specs = {name: get_backend(name) for name in m["backends"]}
    if not specs or any(s is None for s in specs.values()):
        raise IndexCorruptError(f"{root / MANIFEST} lists backends {sorted(specs)}; this searchgym reads "
                                f"{sorted(set(_BUILTIN) | set(_REGISTRY))}. {_rebuild_hint(root)}")
    by_kind = {s.provides: s for s in specs.values() if s is not None}
    have = set(by_kind)
    if kind is None:
        kind = "hybrid" if {"bm25", "dense"} <= have else next(iter(sorted(have)), "")
    needs = {"bm25": ["bm25"], "rank_bm25": ["bm25"], "dense": ["dense"], "hybrid": ["bm25", "dense"]}
    if kind not in needs:
        raise ConfigError(f"unknown index kind {kind!r}; choose one of {sorted(needs)}")
    missing = set(needs[kind]) - have
    if missing:
        raise IndexNotFoundError(
            f"{root} has no {'/'.join(sorted(missing))} part (it has {sorted(have)}); rebuild with "
            f"`searchgym index build CORPUS --out {root}{' --dense MODEL' if 'dense' in missing else ' --bm25'}`")
    passages = _read_passages(root, m)
    options = {"backend": backend, "device": device, "mmap": mmap, "model": model, "index_type": index_type,
               "n_threads": n_threads, "kind": kind, "n_passages": m["n_passages"]}
    for want in needs[kind]:
        if by_kind[want].check_options is not None:
            by_kind[want].check_options(options)  # type: ignore[misc]
    parts = []
    for want in needs[kind]:
        spec = by_kind[want]
        ctx = LoadContext(root, spec.name, m["backends"][spec.name], passages, options)
        parts.append(_load_part(root, spec.name, functools.partial(spec.load, ctx)))
    if kind == "hybrid":
        from searchgym.retrieval.hybrid import HybridRetriever

        return HybridRetriever(parts, k_rrf=k_rrf)
    return parts[0]


def _load_part(root: Path, name: str, load: Callable[[], Any]) -> Any:
    """Run a backend loader; anything but a typed index / model error means the files are damaged."""
    try:
        return load()
    except (_IndexError, ModelLoadError):
        raise
    except (SearchGymError, Exception) as exc:  # noqa: BLE001 - numpy/json/faiss/re raise many types
        raise IndexCorruptError(f"{root / name} cannot be read ({type(exc).__name__}: {exc}); "
                                f"{_rebuild_hint(root)}") from None
