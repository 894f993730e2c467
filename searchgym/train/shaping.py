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
