"""Resolving the environment's inputs (corpus, dataset, retriever) into objects, memoised.

Building a retriever is the expensive part of making an environment (a BM25 index over the world takes
about a second, a dense one much longer), so retrievers built from the same inputs are shared by every
environment in the process: the sub-environments of a vector env, and repeated ``gymnasium.make`` calls.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from searchgym.errors import ConfigError

V3_SPLITS = ("shift_renamed", "shift_homonym")  # only in worlds of generator version >= 3 (former names)
WORLD_SPLITS = ("train", "dev", "test", "shift_phrasing", "shift_family", "shift_type", "shift_strategy", *V3_SPLITS)
RETRIEVER_KINDS = ("bm25", "dense", "hybrid")

_LOCK = threading.Lock()
_RETRIEVERS: dict[Any, Any] = {}
_DATASETS: dict[Any, list[Any]] = {}


def _freeze(x: Any) -> Any:
    if isinstance(x, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return tuple(_freeze(v) for v in x)
    try:
        hash(x)
        return x
    except TypeError:
        return id(x)


def _file_key(path: str | os.PathLike) -> tuple[str, float, int]:
    p = Path(path)
    st = p.stat()
    return (str(p.resolve()), st.st_mtime, st.st_size)


def world_key(seed: int = 0, version: int | None = None, n_entities: int | None = None,
              split: Any = None) -> tuple[int, int, int]:
    """``(seed, generator version, n_entities)`` of the world an env reads. No version: the embedded default
    (version 2), or version 3 when ``split`` is a split only version 3 has (``shift_renamed``,
    ``shift_homonym``). No ``n_entities``: the embedded default size."""
    from searchgym.data.world.world import DEFAULT_N_ENTITIES, GENERATOR_VERSION, VERSIONS

    if version is None:
        version = 3 if isinstance(split, str) and split in V3_SPLITS else GENERATOR_VERSION
    if version not in VERSIONS:
        raise ConfigError(f"world_version must be one of {list(VERSIONS)}, got {version!r}")
    n = DEFAULT_N_ENTITIES if n_entities is None else n_entities
    if not isinstance(n, int) or isinstance(n, bool) or n < 50:
        raise ConfigError(f"world_entities must be an integer >= 50, got {n_entities!r}")
    return (int(seed), int(version), n)


def _as_key(world: int | tuple[int, int, int]) -> tuple[int, int, int]:
    return world if isinstance(world, tuple) else world_key(world)


@functools.lru_cache(maxsize=4)
def _generated(key: tuple[int, int, int]) -> Any:
    from searchgym.data import World

    seed, version, n = key
    return World.generate(seed=seed, n_entities=n, version=version)


def _world(world: int | tuple[int, int, int]) -> Any:
    """The embedded default world (memoised in ``default_world``) or another generated one."""
    from searchgym.data import default_world
    from searchgym.data.world.world import DEFAULT_N_ENTITIES, GENERATOR_VERSION

    seed, version, n = _as_key(world)
    if (version, n) == (GENERATOR_VERSION, DEFAULT_N_ENTITIES):
        return default_world(seed=seed)
    return _generated((seed, version, n))


def _is_url(x: Any) -> bool:
    return isinstance(x, str) and x.startswith(("http://", "https://"))


def check_dataset_given(kwargs: dict[str, Any]) -> None:
    """Raise :class:`~searchgym.errors.ConfigError` when a user corpus or retriever comes without ``dataset=``.

    A user corpus is ``corpus=`` (a file or an index directory) or a ``retriever=`` that is not one of
    the built-in names (an ``http://`` server or a Retriever object): none of them knows the questions.
    """
    if kwargs.get("dataset") is not None or kwargs.get("split") is not None:
        return  # the questions are named: a QA file, or a world split chosen on purpose
    retriever = kwargs.get("retriever")
    own_retriever = retriever is not None and not (isinstance(retriever, str) and retriever in RETRIEVER_KINDS)
    if kwargs.get("corpus") is None and not own_retriever:
        return
    what = f"corpus={kwargs['corpus']!r}" if kwargs.get("corpus") is not None else f"retriever={retriever!r}"
    raise ConfigError(
        f"{what} was given without dataset=: the env would ask the embedded world's questions against your "
        "passages. Pass dataset=QA_FILE (jsonl/parquet/json with your questions and answers; see `searchgym "
        "data info FILE`), or name a world split (dataset='train', split='dev') to ask the world's questions on "
        "purpose.")


def resolve_dataset(dataset: Any, split: str, world_seed: int | tuple[int, int, int]) -> tuple[list[Any], str]:
    """Return ``(examples, split_label)``. ``dataset`` is None (the world's ``split``), a world split name,
    a file any QA loader reads, or a sequence of QAExample. ``world_seed``: a seed or a :func:`world_key`."""
    if dataset is None:
        dataset = split
    if isinstance(dataset, str) and dataset in WORLD_SPLITS and not os.path.exists(dataset):
        key = ("world", _as_key(world_seed), dataset)
        with _LOCK:
            if key not in _DATASETS:
                _DATASETS[key] = list(_world(world_seed).split(dataset))
        return _DATASETS[key], dataset
    if isinstance(dataset, (str, os.PathLike)):
        path = Path(dataset)
        if not path.exists():
            raise ConfigError(
                f"dataset {str(dataset)!r} is neither a file nor a world split; pass a QA file (FlashRAG jsonl, "
                f"Search-R1 parquet, HotpotQA/MuSiQue/2Wiki json) or one of {list(WORLD_SPLITS)}")
        from searchgym.data import load_qa

        key = ("file", _file_key(path))
        with _LOCK:
            if key not in _DATASETS:
                _DATASETS[key] = list(load_qa(str(path)))
        return _DATASETS[key], split
    if isinstance(dataset, Sequence):
        return list(dataset), split
    raise ConfigError(f"dataset must be a split name, a file path or a list of QAExample, got {type(dataset).__name__}")


def _build(kind: str, passages: Sequence[Any], kw: dict[str, Any]) -> Any:
    from searchgym.retrieval import build_retriever

    return build_retriever(passages, kind=kind, **kw)


def _build_world(kind: str, world_seed: int | tuple[int, int, int], kw: dict[str, Any]) -> Any:
    """A retriever over the embedded world; its dense embeddings come from the on-disk cache
    (``$SEARCHGYM_CACHE``, default ``~/.cache/searchgym``), so only the first process ever encodes the world."""
    world = _world(world_seed)
    if kind in ("dense", "hybrid") and kw.get("embeddings") is None:
        from searchgym.data.world.world import DEFAULT_N_ENTITIES
        from searchgym.retrieval.dense import DEFAULT_MODEL, cached_embeddings

        seed, version, n = _as_key(world_seed)
        cache_key: dict[str, Any] = {"world_seed": seed, "generator_version": version}
        if n != DEFAULT_N_ENTITIES:
            cache_key["n_entities"] = n
        kw = dict(kw)
        kw["embeddings"] = cached_embeddings(
            world.passages, key=cache_key,
            model=kw.get("model", DEFAULT_MODEL), batch_size=kw.get("batch_size", 64),
            device=kw.get("device", "cpu"), show_progress=kw.get("show_progress", False))
    return _build(kind, world.passages, kw)


def _is_remote(x: Any) -> bool:
    """An ``http(s)://`` retrieval server or a Ray Serve app (``ray://APP``)."""
    return _is_url(x) or (isinstance(x, str) and x.startswith("ray://"))


def _memo(key: Any, build: Any, cache: bool | int) -> Any:
    """The retriever memoised under ``key``, built by ``build()`` the first time."""
    with _LOCK:
        if key not in _RETRIEVERS:
            _RETRIEVERS[key] = _maybe_cache(build(), cache)
        return _RETRIEVERS[key]


def _from_index_dir(retriever: Any, corpus: Any, kw: dict[str, Any], cache: bool | int) -> Any:
    if retriever is not None and retriever not in RETRIEVER_KINDS:
        raise ConfigError(f"retriever must be one of {list(RETRIEVER_KINDS)} for an index directory, "
                          f"got {retriever!r}")
    manifest = Path(corpus) / "manifest.json"
    key = ("index", _file_key(manifest) if manifest.exists() else _file_key(corpus), retriever, _freeze(kw),
           _freeze(cache))

    def build() -> Any:
        from searchgym.retrieval import load_index

        return load_index(str(corpus), kind=retriever, **kw)

    return _memo(key, build, cache)


def _from_remote(spec: str, kw: dict[str, Any], cache: bool | int) -> Any:
    def build() -> Any:
        if _is_url(spec):
            from searchgym.retrieval.remote import RemoteRetriever

            return RemoteRetriever(spec, **kw)
        from searchgym.retrieval.serve_ray import RayServeRetriever

        return RayServeRetriever(spec, **kw)

    return _memo(("url", spec, _freeze(kw), _freeze(cache)), build, cache)


def _from_world(retriever: str, dataset: Any, world_seed: int | tuple[int, int, int], kw: dict[str, Any],
                cache: bool | int) -> Any:
    if dataset is not None and not (isinstance(dataset, str) and dataset in WORLD_SPLITS):
        raise ConfigError("dataset= names a file or a list of examples but no corpus= was given; pass the "
                          "corpus its questions are about (a corpus file or an index directory), or a "
                          "retriever URL/object")
    return _memo(("world", _as_key(world_seed), retriever, _freeze(kw), _freeze(cache)),
                 lambda: _build_world(retriever, world_seed, kw), cache)


def _from_corpus_file(retriever: str, corpus: str | os.PathLike, kw: dict[str, Any], cache: bool | int) -> Any:
    path = Path(corpus)
    if not path.exists():
        from searchgym.errors import CorpusFormatError

        raise CorpusFormatError("corpus file not found; pass a corpus jsonl/parquet file or an index "
                                "directory built with `searchgym index build`", path=str(path))

    def build() -> Any:
        from searchgym.retrieval import load_corpus

        return _build(retriever, load_corpus(str(path)), kw)

    return _memo(("corpus", _file_key(path), retriever, _freeze(kw), _freeze(cache)), build, cache)


def _from_passages(retriever: str, corpus: Sequence[Any], kw: dict[str, Any], cache: bool | int) -> Any:
    # A list of passages in memory: memoise by content (gymnasium deep-copies make() kwargs, so the
    # same corpus comes back as another list; Passage is frozen and hashable).
    passages = list(corpus)
    try:
        content: Any = hash(tuple(passages))
    except TypeError:
        content = id(corpus)
    return _memo(("passages", len(passages), content, retriever, _freeze(kw), _freeze(cache)),
                 lambda: _build(retriever, passages, kw), cache)


def resolve_retriever(retriever: Any, corpus: Any, dataset: Any, world_seed: int | tuple[int, int, int],
                      retriever_kwargs: dict[str, Any] | None = None, cache: bool | int = False) -> Any:
    """Return a Retriever for the given inputs (shared with other environments built from the same ones).

    ``retriever``: None / ``"bm25"`` / ``"dense"`` / ``"hybrid"`` (built over ``corpus``, an index directory
    or the embedded world), an ``http://`` retrieval server, ``"ray://APP"`` (a ``searchgym serve-ray`` app on
    the Ray cluster this process is in), or an object with ``batch_search``."""
    kw = dict(retriever_kwargs or {})
    own_object = retriever is not None and not isinstance(retriever, str)
    if isinstance(corpus, (str, os.PathLike)) and Path(corpus).is_dir() and not own_object \
            and not _is_remote(retriever):
        return _from_index_dir(retriever, corpus, kw, cache)
    if own_object:
        if not hasattr(retriever, "batch_search"):
            raise ConfigError(f"retriever must be 'bm25', 'dense', 'hybrid', an http:// URL, ray://APP or an "
                              f"object with search/batch_search, got {type(retriever).__name__}")
        return _maybe_cache(retriever, cache)
    if _is_remote(retriever):
        return _from_remote(retriever, kw, cache)
    if retriever is None:
        retriever = "bm25"
    if retriever not in RETRIEVER_KINDS:
        raise ConfigError(f"retriever must be one of {list(RETRIEVER_KINDS)}, an http:// URL, ray://APP or a "
                          f"Retriever object, got {retriever!r}")
    if corpus is None:
        return _from_world(retriever, dataset, world_seed, kw, cache)
    if isinstance(corpus, (str, os.PathLike)):
        return _from_corpus_file(retriever, corpus, kw, cache)
    if isinstance(corpus, Sequence):
        return _from_passages(retriever, corpus, kw, cache)
    raise ConfigError(f"corpus must be a file, an index directory or a list of Passage, got {type(corpus).__name__}")


def _maybe_cache(retriever: Any, cache: bool | int) -> Any:
    if not cache:
        return retriever
    from searchgym.retrieval import CachedRetriever

    if cache is True:
        return CachedRetriever(retriever)
    return CachedRetriever(retriever, maxsize=int(cache))


def clear_caches() -> None:
    """Forget the memoised retrievers and datasets (frees their memory)."""
    with _LOCK:
        _RETRIEVERS.clear()
        _DATASETS.clear()
