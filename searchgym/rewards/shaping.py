"""Episode context for reward terms, and the shaping terms: format, search cost, retrieval hit.

Every term is a function ``term(ctx: RewardContext) -> float``. The environment evaluates the composed
reward once, when the episode ends (answer or truncation), so a term sees the whole episode.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from searchgym.rewards.metrics import f1_normalized
from searchgym.rewards.normalize import normalize_answer


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
    # Normalised gold answers, if the caller has them cached (the environment does); else computed.
    normalized_answers: list[str] | None = field(default=None, repr=False)
    _pred_norm: str | None = field(default=None, repr=False)
    _f1: float | None = field(default=None, repr=False)

    def _norms(self) -> tuple[str | None, list[str]]:
        if self.normalized_answers is None:
            self.normalized_answers = [normalize_answer(a) for a in self.answers]
        if self._pred_norm is None and self.prediction is not None:
            self._pred_norm = normalize_answer(self.prediction)
        return self._pred_norm, self.normalized_answers

    def exact_match(self) -> int:
        """EM of the prediction (0 without one), computed once per context."""
        p, golds = self._norms()
        return int(p is not None and p in golds)

    def substring_match(self) -> int:
        p, golds = self._norms()
        return int(p is not None and any(g in p for g in golds))

    def token_f1(self) -> float:
        if self._f1 is None:
            p, golds = self._norms()
            if p is None:
                self._f1 = 0.0
            elif p in golds:  # exact match: F1 is 1 (also for yes/no/noanswer)
                self._f1 = 1.0
            else:
                words = set(p.split())
                self._f1 = max((f1_normalized(p, g) for g in golds if not words.isdisjoint(g.split())),
                               default=0.0)
        return self._f1


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
