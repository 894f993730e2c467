"""Replay the actions of recorded trajectories against the environment (demonstrations from any trajectory
file become token sequences with exact loss masks, with the observations the env returns now)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class ReplayAgent:
    """Slot ``i`` replays ``trajectories[i]``'s actions in order (then answers with its prediction)."""

    name = "replay"

    def __init__(self, trajectories: Sequence[Any]):
        self.trajectories = list(trajectories)
        self._pos: dict[int, int] = {}

    def reset(self, indices: Sequence[int] | None = None) -> None:
        if indices is None:
            self._pos.clear()
        else:
            for i in indices:
                self._pos.pop(int(i), None)

    def act(self, observations: Sequence[str], infos: Sequence[dict] | None = None, *,
            indices: Sequence[int] | None = None) -> list[str]:
        idx = list(indices) if indices is not None else list(range(len(observations)))
        out = []
        for i in idx:
            t = self.trajectories[i]
            j = self._pos.get(i, 0)
            self._pos[i] = j + 1
            if j < len(t.steps):
                out.append(t.steps[j].action)
            else:
                out.append(f"<answer> {t.prediction or ''} </answer>")
        return out
