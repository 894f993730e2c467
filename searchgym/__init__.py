"""searchgym: a Gymnasium training environment and gym for LLM search agents.

``import searchgym`` registers the environments with Gymnasium (``searchgym/SearchQA-v0`` and its
variants) and stays light: torch, faiss and ray load only when a part that needs them is used.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# Public names, loaded on first use so that importing searchgym stays fast.
_LAZY = {
    "Trajectory": "searchgym.trajectory",
    "Step": "searchgym.trajectory",
    "read_trajectories": "searchgym.trajectory",
    "load_trajectories": "searchgym.trajectory",
    "TrajectoryWriter": "searchgym.trajectory",
    "Passage": "searchgym.retrieval.base",
    "Hit": "searchgym.retrieval.base",
    "Retriever": "searchgym.retrieval.base",
    "load_index": "searchgym.retrieval",
    "build_index": "searchgym.retrieval",
    "QAExample": "searchgym.data.qa",
    "World": "searchgym.data",
    "SearchEnv": "searchgym.envs",
    "DiversityTracker": "searchgym.diversity",
}

__all__ = [  # noqa: RUF022 - grouped as in _LAZY
    "__version__", "Trajectory", "Step", "read_trajectories", "load_trajectories", "TrajectoryWriter",
    "Passage", "Hit", "Retriever", "load_index", "build_index", "QAExample", "World", "SearchEnv",
    "DiversityTracker",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'searchgym' has no attribute {name!r}")


def _register_envs() -> None:
    from searchgym.envs.registration import register_envs

    register_envs()


_register_envs()
