"""An LRU cache in front of any retriever. RL repeats queries (a collapsed policy repeats them a lot)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from searchgym.retrieval.base import Hit, Retriever


def normalize_query(q: str) -> str:
    """Case and whitespace do not change the BM25 / MiniLM results (both lowercase), so they share a key."""
    return " ".join(q.split()).lower()


@dataclass(frozen=True)
class CacheStats:
    hits: int
    misses: int
    size: int
    maxsize: int
    evictions: int

    @property
    def requests(self) -> int:
        return self.hits + self.misses

    @property
    def hit_rate(self) -> float:
        return self.hits / self.requests if self.requests else 0.0

    def to_dict(self) -> dict[str, float]:
        return {"hits": self.hits, "misses": self.misses, "hit_rate": self.hit_rate, "size": self.size,
                "maxsize": self.maxsize, "evictions": self.evictions}


class CachedRetriever:
    """Wraps a retriever with an LRU keyed on ``(normalised query, k)``; thread-safe.

    ``batch_search`` answers what it can from the cache and sends only the distinct misses to the inner
    ``batch_search`` (one call). Returned lists are fresh copies, so callers may mutate them.
    """

    def __init__(self, retriever: Retriever, maxsize: int = 100_000,
                 normalize: Callable[[str], str] = normalize_query):
        self.retriever = retriever
        self.maxsize = int(maxsize)
        self.normalize = normalize
        self._data: OrderedDict[tuple[str, int], list[Hit]] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = self._misses = self._evictions = 0

    @property
    def passages(self) -> Any:
        return self.retriever.passages  # type: ignore[attr-defined]

    def __len__(self) -> int:
        return len(self.retriever)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        if name == "retriever":  # not yet set (e.g. during unpickling)
            raise AttributeError(name)
        return getattr(self.retriever, name)

    @property
    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(self._hits, self._misses, len(self._data), self.maxsize, self._evictions)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._hits = self._misses = self._evictions = 0

    def search(self, query: str, k: int = 3) -> list[Hit]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Hit]]:
        if isinstance(queries, str):
            raise TypeError("batch_search takes a list of queries; use search() for one")
        keys = [(self.normalize(q), k) for q in queries]
        out: list[list[Hit] | None] = [None] * len(keys)
        todo: dict[tuple[str, int], list[int]] = {}
        with self._lock:
            for i, key in enumerate(keys):
                got = self._data.get(key)
                if got is not None:
                    self._data.move_to_end(key)
                    out[i] = list(got)
                    self._hits += 1
                elif key in todo:  # the same query twice in one batch: computed once
                    todo[key].append(i)
                    self._hits += 1
                else:
                    todo[key] = [i]
                    self._misses += 1
        if todo:
            miss_keys = list(todo)
            fresh = self.retriever.batch_search([queries[todo[key][0]] for key in miss_keys], k)
            with self._lock:
                for key, hits in zip(miss_keys, fresh):
                    for i in todo[key]:
                        out[i] = list(hits)
                    if self.maxsize > 0:
                        self._data[key] = list(hits)
                        self._data.move_to_end(key)
                        while len(self._data) > self.maxsize:
                            self._data.popitem(last=False)
                            self._evictions += 1
        return out  # type: ignore[return-value]
