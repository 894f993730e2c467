"""Reward shaping for the diversity arms (literature.md §5.1): DARLING multiplies an episode's quality by its
distinctness within its rollout group. Pure functions of one step's rollouts, so a resumed run reproduces
the uninterrupted one exactly."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from searchgym.errors import ConfigError


def darling_rewards(rewards: Sequence[float], classes: Sequence[Hashable], group_size: int, *,
                    floor: float = 0.1) -> list[float]:
    """DARLING: ``r_i * Div_i`` with ``Div_i = (n - |class_i|) / (n - 1)`` over the ``n = group_size``
    samples of the question, floored at ``floor`` (a correct answer in a crowded class keeps some reward).
    ``|class_i|`` counts the samples of the group in ``i``'s equivalence class (itself included)."""
    if group_size < 2:
        raise ConfigError(f"DARLING needs group_size >= 2, got {group_size}")
    if len(rewards) != len(classes) or len(rewards) % group_size:
        raise ConfigError(f"{len(rewards)} rewards / {len(classes)} classes do not form groups of {group_size}")
    out = []
    for g0 in range(0, len(rewards), group_size):
        cls = list(classes[g0:g0 + group_size])
        for i in range(group_size):
            size = cls.count(cls[i])
            out.append(float(rewards[g0 + i]) * max(floor, (group_size - size) / (group_size - 1)))
    return out


def query_classes(trajectories: Sequence[object], templater: object, level: str = "slot") -> list[tuple]:
    """An episode's equivalence class for DARLING: the sequence of its queries' templates at ``level``."""
    return [tuple(templater.template(q, level, question=t.question) for q in t.queries)  # type: ignore[attr-defined]
            for t in trajectories]


class CountBonus:
    """Outcome-based exploration, UCB-style (literature.md §5.2, as the strategy policy's ``grpo_count``):
    ``r + coef * min(1, 1/sqrt(N(question, class)))`` where ``N`` counts, over all training so far (this batch
    included), the episodes of that question in that class (here: the sequence of query templates). The counts
    are state: :meth:`state_dict` goes into the RL checkpoint so a resumed run continues them exactly."""

    def __init__(self, coef: float = 0.5):
        if coef <= 0:
            raise ConfigError(f"count bonus coefficient must be > 0, got {coef}")
        self.coef = coef
        self.counts: dict[tuple[str, tuple], int] = {}

    def __call__(self, question_ids: Sequence[str], classes: Sequence[tuple], rewards: Sequence[float]) -> list[float]:
        keys = [(str(q), tuple(c)) for q, c in zip(question_ids, classes)]
        for k in keys:
            self.counts[k] = self.counts.get(k, 0) + 1
        return [float(r) + self.coef * min(1.0, 1.0 / self.counts[k] ** 0.5) for r, k in zip(rewards, keys)]

    def state_dict(self) -> dict:
        return {"coef": self.coef, "counts": [[q, list(c), n] for (q, c), n in self.counts.items()]}

    def load_state_dict(self, d: dict) -> None:
        self.coef = float(d["coef"])
        self.counts = {(str(q), tuple(c)): int(n) for q, c, n in d["counts"]}


class TemplateCountShaper:
    """``train_rl``'s ``shape_rewards`` for the count-bonus arm: classes are the episodes' query-template
    sequences; the counts travel in the checkpoint (``state_dict``)."""

    def __init__(self, templater: object, coef: float = 0.5, level: str = "slot"):
        self.bonus = CountBonus(coef)
        self.templater = templater
        self.level = level

    def __call__(self, step: int, episodes: Sequence[object], rewards: Sequence[float]) -> list[float]:
        trajs = [e.trajectory for e in episodes]  # type: ignore[attr-defined]
        return self.bonus([t.question_id for t in trajs], query_classes(trajs, self.templater, self.level), rewards)

    def state_dict(self) -> dict:
        return self.bonus.state_dict()

    def load_state_dict(self, d: dict) -> None:
        self.bonus.load_state_dict(d)
