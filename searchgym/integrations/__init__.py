"""Adapters that put :class:`~searchgym.envs.SearchEnv` inside outside trainers.

One module per framework, each an optional extra (``pip install searchgym[trl]`` ...):

* :mod:`searchgym.integrations.trl`: ``SearchgymToolEnv`` for ``GRPOTrainer(environment_factory=...)``,
  ``make_dataset`` and ``diversity_reward`` (logs ``diversity/*`` through ``log_metric``);
* :mod:`searchgym.integrations.verl`: ``SearchgymSearchTool`` (a ``BaseTool``), the tool-config YAML
  ``searchgym_tool_config.yaml`` and ``compute_score``;
* :mod:`searchgym.integrations.openenv`: typed Action / Observation / State, an OpenEnv ``Environment``
  and ``searchgym serve-openenv``;
* :mod:`searchgym.integrations.skyrl`: ``SearchgymTextEnv`` (a SkyRL ``BaseTextEnv``) whose
  ``aggregate_metrics`` returns query-diversity figures;
* :mod:`searchgym.integrations.gem`: ``register()`` registers the env with ``gem``.

Every adapter steps the same ``SearchEnv``: parsing, retrieval, budgets and rewards live there only.
Nothing here imports a framework at package import time.
"""

from __future__ import annotations

from searchgym.integrations._common import SUPPORTED, require

__all__ = ["SUPPORTED", "require"]
