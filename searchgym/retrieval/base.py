"""The passage record and the one Retriever protocol every backend implements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class Passage:
    id: str
    title: str
    text: str

    @property
    def contents(self) -> str:
        """The Search-R1 / FlashRAG form: the quoted title on the first line, then the text."""
        return f'"{self.title}"\n{self.text}'

    def to_search_r1(self) -> dict[str, Any]:
        return {"id": self.id, "contents": self.contents}

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "text": self.text}


class Hit(NamedTuple):
    """One retrieved passage: ``(id, score, passage)``. Higher scores are better."""

    id: str
    score: float
    passage: Passage


@runtime_checkable
class Retriever(Protocol):
    """``search(query, k)`` and ``batch_search(queries, k)``; the batched call is the fast path.

    Contract shared by all backends:
    - hits are sorted by descending score and carry the passage;
    - an empty query, or one made only of stopwords, returns ``[]`` (never arbitrary zero-score passages);
    - ``k`` larger than the corpus returns every matching passage;
    - ``batch_search`` returns one list per query, in order.
    """

    def search(self, query: str, k: int = 3) -> list[Hit]: ...

    def batch_search(self, queries: Sequence[str], k: int = 3) -> list[list[Hit]]: ...
