"""Episode context for reward terms, and the shaping terms: format, search cost, retrieval hit.

Every term is a function ``term(ctx: RewardContext) -> float``. The environment evaluates the composed
reward once, when the episode ends (answer or truncation), so a term sees the whole episode.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class RewardContext:
    """What a reward term may look at when an episode ends."""

    prediction: str | None
    answers: list[str]
    num_searches: int = 0
    num_invalid: int = 0
    num_steps: int = 0
    answered: bool = False
    supporting_ids: list[str] = field(default_factory=list)
    retrieved_ids: set[str] = field(default_factory=set)
    max_turns: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


def format_term(ctx: RewardContext) -> float:
    """1 for a clean episode (an answer, no invalid action), 0.5 for an answer after invalid actions, else 0."""
    if not ctx.answered:
        return 0.0
    return 1.0 if ctx.num_invalid == 0 else 0.5


def search_count_term(ctx: RewardContext) -> float:
    """The number of searches; composed with a negative weight it is a per-search cost."""
    return float(ctx.num_searches)


def retrieval_hit_term(ctx: RewardContext) -> float:
    """Fraction of the gold supporting passages that any search retrieved (0 when none are known)."""
    if not ctx.supporting_ids:
        return 0.0
    gold = set(ctx.supporting_ids)
    return len(gold & ctx.retrieved_ids) / len(gold)
