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
}


def get_preset(name: str) -> dict[str, Any]:
    """A copy of the preset's env kwargs; an unknown name raises ConfigError listing the known ones."""
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; available: {', '.join(sorted(PRESETS))}")
    return dict(PRESETS[name])


__all__ = ["PRESETS", "get_preset"]
