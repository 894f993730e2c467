"""Hybrid retrieval by reciprocal-rank fusion (Cormack et al., 2009): score(d) = sum_i w_i / (k_rrf + rank_i(d))."""

from __future__ import annotations

from collections.abc import Sequence

from searchgym.errors import ConfigError
from searchgym.retrieval.base import Hit, Passage, Retriever


class HybridRetriever:
    """Fuses the ranked lists of several retrievers (e.g. BM25 + dense) by reciprocal rank.

    Each retriever contributes its top ``depth`` hits (default ``max(2k, 20)``); ranks start at 1. Ties are broken
    by the best single rank, then by the order of ``retrievers``. Scores are the fused RRF values.
    """

    kind = "hybrid"

    def __init__(self, retrievers: Sequence[Retriever], *, k_rrf: float = 60, weights: Sequence[float] | None = None,
                 depth: int | None = None):
        if not retrievers:
            raise ConfigError("HybridRetriever needs at least one retriever")
        if weights is not None and len(weights) != len(retrievers):
            raise ConfigError(f"{len(weights)} weights for {len(retrievers)} retrievers")
        if k_rrf < 0:
            raise ConfigError("k_rrf must be >= 0")
        self.retrievers = list(retrievers)
        self.k_rrf = float(k_rrf)
        self.weights = [float(w) for w in weights] if weights is not None else [1.0] * len(self.retrievers)
        self.depth = depth

    @property
    def passages(self) -> list[Passage]:
        return self.retrievers[0].passages  # type: ignore[attr-defined]

    def __len__(self) -> int:
        return len(self.passages)

    def __repr__(self) -> str:
        return f"HybridRetriever({self.retrievers!r}, k_rrf={self.k_rrf})"

    def search(self, query: str, k: int = 3) -> list[Hit]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Hit]]:
        if isinstance(queries, str):
            raise TypeError("batch_search takes a list of queries; use search() for one")
        if k <= 0:
            return [[] for _ in queries]
        depth = self.depth or max(2 * k, 20)
        per = [r.batch_search(list(queries), depth) for r in self.retrievers]
        return [self.fuse([p[qi] for p in per], k) for qi in range(len(queries))]

    def fuse(self, ranked_lists: Sequence[Sequence[Hit]], k: int) -> list[Hit]:
        """Fuse one query's ranked lists (one per retriever) into the top ``k``."""
        score: dict[str, float] = {}
        best: dict[str, tuple[int, int]] = {}
        passage: dict[str, Passage] = {}
        for ri, (hits, w) in enumerate(zip(ranked_lists, self.weights)):
            for rank, h in enumerate(hits, 1):
                score[h.id] = score.get(h.id, 0.0) + w / (self.k_rrf + rank)
                b = (rank, ri)
                if h.id not in best or b < best[h.id]:
                    best[h.id] = b
                    passage.setdefault(h.id, h.passage)
        order = sorted(score, key=lambda d: (-score[d], best[d]))[:k]
        return [Hit(d, score[d], passage[d]) for d in order]
