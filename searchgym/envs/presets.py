"""Named env settings: ``get_preset("squeeze")`` gives the ``SearchEnv`` keyword arguments of an experiment.

``searchgym rollout/eval --preset NAME`` and the experiment code read the same dict, so a table made with a
preset is reproduced cell by cell from the command line.
"""

from __future__ import annotations

from typing import Any

from searchgym.errors import ConfigError

PRESETS: dict[str, dict[str, Any]] = {
    # The squeeze experiment (issue 13): 3 passages per search, 4 searches, exact-match reward. Under these
    # settings two strategies (decompose, hops) are within 0.05 EM on the train families, and on
    # shift_strategy the train-best loses >= 0.3 EM to entity lookup (scripts/strategy_table.py).
    "squeeze": {"top_k": 3, "max_turns": 4, "reward": "em"},
    # The squeeze experiment's env since issue 21 (its default world: generator version 3, n_entities 4000):
    # exactly the LM's env (SqueezeConfig top_k, max_turns, passage_chars), so the heuristic table, the SFT
    # demonstrations and the LM arms see one env. Under it `decompose` and `hops` are the two best strategies
    # on train, within 0.03 EM; hops loses >= 0.5 EM to decompose on shift_homonym and decompose loses >= 0.5
    # to hops on shift_strategy (scripts/strategy_table.py, docs/squeeze.md "The world").
    "squeeze2": {"top_k": 2, "max_turns": 3, "passage_chars": 200, "reward": "em"},
}


def get_preset(name: str) -> dict[str, Any]:
    """A copy of the preset's env kwargs; an unknown name raises ConfigError listing the known ones."""
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; available: {', '.join(sorted(PRESETS))}")
    return dict(PRESETS[name])


__all__ = ["PRESETS", "get_preset"]
