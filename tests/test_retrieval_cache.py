"""The LRU query cache: hit statistics, only misses reach the inner retriever, eviction."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from searchgym.retrieval import BM25Retriever, CachedRetriever, Retriever, load_corpus

FIXTURE = Path(__file__).parent / "fixtures" / "retrieval" / "corpus.jsonl"


class CountingBM25(BM25Retriever):
    """A real BM25 retriever that records what reaches ``batch_search``."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.calls: list[list[str]] = []

    def batch_search(self, queries: Sequence[str], k: int = 3, **kw):
        self.calls.append(list(queries))
        return super().batch_search(queries, k, **kw)


@pytest.fixture
def inner() -> CountingBM25:
    return CountingBM25(load_corpus(FIXTURE), backend="numpy")


def test_hit_statistics_and_normalised_keys(inner):
    c = CachedRetriever(inner, maxsize=100)
    assert isinstance(c, Retriever)
    first = c.search("capital of France", 3)
    assert first[0].id == "d3"
    assert c.search("  Capital   of FRANCE ", 3) == first  # same normalised key
    assert c.search("capital of France", 2) != []  # another k is another key
    s = c.stats
    assert (s.hits, s.misses, s.size) == (1, 2, 2)
    assert s.hit_rate == pytest.approx(1 / 3)
    assert s.to_dict()["hit_rate"] == pytest.approx(1 / 3)
    assert len(inner.calls) == 2


def test_batch_sends_only_distinct_misses(inner):
    c = CachedRetriever(inner)
    c.batch_search(["capital of France", "jazz trumpet"], 3)
    assert inner.calls == [["capital of France", "jazz trumpet"]]
    res = c.batch_search(["jazz trumpet", "volcano ash", "capital of france", "volcano ash", "chess king"], 3)
    assert inner.calls[-1] == ["volcano ash", "chess king"]  # one inner call, misses only, deduplicated
    assert [r[0].id for r in res] == ["d8", "d9", "d3", "d9", "d11"]
    assert res == inner.batch_search(["jazz trumpet", "volcano ash", "capital of france", "volcano ash",
                                      "chess king"], 3)
    s = c.stats
    assert (s.hits, s.misses) == (3, 4)  # jazz, capital (cached) + the repeated volcano in one batch
    c.batch_search(["jazz trumpet", "chess king"], 3)
    assert len(inner.calls) == 3  # all hits: no inner call (the direct check above made one)
    res[0].clear()  # callers may mutate what they get; the cache keeps its own copy
    assert c.search("jazz trumpet", 3)[0].id == "d8"


def test_lru_eviction(inner):
    c = CachedRetriever(inner, maxsize=2)
    for q in ["capital", "jazz", "volcano"]:
        c.search(q, 3)
    assert c.stats.size == 2 and c.stats.evictions == 1
    c.search("volcano", 3)
    c.search("jazz", 3)
    assert c.stats.hits == 2
    c.search("capital", 3)  # evicted first, so a miss again
    assert c.stats.misses == 4
    c.clear()
    assert c.stats.size == 0 and c.stats.requests == 0
    assert c.passages is inner.passages and c.backend == "numpy"  # attributes pass through
