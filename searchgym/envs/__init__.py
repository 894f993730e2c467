"""Environments: SearchEnv (Gymnasium), action parsing, prompts, vector envs, wrappers.

``SearchVectorEnv`` and ``RayVectorEnv`` load on first use (Ray is optional and heavy).
"""

from __future__ import annotations

import importlib
from typing import Any

from searchgym.envs.actions import AnswerAction, ParsedAction, SearchAction, parse_action
from searchgym.envs.env import ResetNeeded, SearchEnv
from searchgym.envs.registration import ENV_IDS, register_envs

_LAZY = {
    "SearchVectorEnv": "searchgym.envs.vector",
    "RayVectorEnv": "searchgym.envs.ray_vector",
    "RecordTrajectory": "searchgym.envs.wrappers",
}

__all__ = ["ENV_IDS", "AnswerAction", "ParsedAction", "RayVectorEnv", "RecordTrajectory", "ResetNeeded",
           "SearchAction", "SearchEnv", "SearchVectorEnv", "parse_action", "register_envs"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'searchgym.envs' has no attribute {name!r}")
