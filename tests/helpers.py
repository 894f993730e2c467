"""Small helpers shared by several test modules (tests/ is on sys.path under pytest)."""

from __future__ import annotations


class CountingRetriever:
    """A real retriever with every batch_search call recorded as (queries, k); search() goes through it too."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def search(self, query, k=3):
        return self.batch_search([query], k)[0]

    def batch_search(self, queries, k=3):
        self.calls.append((list(queries), k))
        return self.inner.batch_search(queries, k)

    @property
    def queries(self) -> list[list[str]]:
        """The queries of each call, in order."""
        return [q for q, _ in self.calls]

    def __getattr__(self, name):
        return getattr(self.inner, name)
