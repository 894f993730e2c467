"""Environments: SearchEnv (Gymnasium), action parsing, prompts, vector envs, wrappers.

Names load on first use: ``import searchgym`` only needs :mod:`searchgym.envs.registration` (and Gymnasium's
registry) to register the env ids; Ray loads only with ``RayVectorEnv``.
"""

from __future__ import annotations

import importlib
from typing import Any

from searchgym.envs.registration import ENV_IDS, register_envs

_LAZY = {
    "SearchEnv": "searchgym.envs.env",
    "ResetNeeded": "searchgym.envs.env",
    "SearchAction": "searchgym.envs.actions",
    "AnswerAction": "searchgym.envs.actions",
    "ParsedAction": "searchgym.envs.actions",
    "parse_action": "searchgym.envs.actions",
    "SearchVectorEnv": "searchgym.envs.vector",
    "RayVectorEnv": "searchgym.envs.ray_vector",
    "RecordTrajectory": "searchgym.envs.wrappers",
    "trajectory_from_infos": "searchgym.envs.wrappers",
    "UnicodeText": "searchgym.envs.spaces",
}

__all__ = ["ENV_IDS", "AnswerAction", "ParsedAction", "RayVectorEnv", "RecordTrajectory", "ResetNeeded",
           "SearchAction", "SearchEnv", "SearchVectorEnv", "UnicodeText", "parse_action", "register_envs",
           "trajectory_from_infos"]


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'searchgym.envs' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value
