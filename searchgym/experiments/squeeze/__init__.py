"""The squeeze experiment (``searchgym squeeze``): RL vs SFT on the embedded world.

==================  =========================================================================================
``config``          :class:`SqueezeConfig` (every knob, the ``--quick`` preset, per-arm RL arguments)
``stages``          world, tiny LM, demonstrations, warm start, evaluation, the RL and SFT arms
``strategy_policy`` the model organism: a policy over heuristic query strategies, exact and fast
``strategy_stage``  the organism as the experiment's first stage (its summary block, table and plots)
``organism``        the organism on a mixed train split (a minority family with its own best strategy)
``passk``           pass@k up to large k
``summary``         ``summary.json``; ``stats``: comparisons with CIs; ``plots``; ``report``: report.md / html
``worlds``          the LM comparison pooled over world seeds (``squeeze --worlds``)
``experiment``      :func:`run` (all stages in order) and :func:`headline`
``commands``        the ``searchgym squeeze`` command
==================  =========================================================================================

Names load lazily (torch and transformers import only when used)::

    from searchgym.experiments.squeeze import SqueezeConfig, run, headline
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "SqueezeConfig": ("searchgym.experiments.squeeze.config", "SqueezeConfig"),
    "run": ("searchgym.experiments.squeeze.experiment", "run"),
    "headline": ("searchgym.experiments.squeeze.experiment", "headline"),
    "StrategyConfig": ("searchgym.experiments.squeeze.strategy_policy", "StrategyConfig"),
    "run_strategy_experiment": ("searchgym.experiments.squeeze.strategy_policy", "run_strategy_experiment"),
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(mod), attr)
    raise AttributeError(f"module 'searchgym.experiments.squeeze' has no attribute {name!r}")
