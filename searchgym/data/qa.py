"""The QA example record shared by the world generator, the loaders and the environment."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class QAExample:
    id: str
    question: str
    answers: list[str]
    supporting_ids: list[str] = field(default_factory=list)
    # family, hops, split, phrasing, source dataset, ... Whatever the source knows.
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def family(self) -> str | None:
        return self.metadata.get("family")

    @property
    def hops(self) -> int | None:
        return self.metadata.get("hops")

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "question": self.question, "answers": list(self.answers),
                "supporting_ids": list(self.supporting_ids), "metadata": dict(self.metadata)}
