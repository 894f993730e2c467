"""Trainers: rollouts with token-level loss masks, SFT, RL (GRPO / RLOO / PPO-clip with the entropy controls:
entropy bonus, KL to a reference, Clip-Cov, KL-Cov, DAPO clip-higher), atomic checkpoints with exact resume,
a tiny from-scratch LM for CPU runs. (The RL-vs-SFT ``squeeze`` experiment is :mod:`searchgym.experiments.squeeze`;
its names here are kept for old imports.)

Public API (loaded lazily; torch/transformers import only when used)::

    from searchgym.train import (RLArgs, train_rl, SFTArgs, train_sft, run_episodes, LMPolicy, AgentPolicy,
                                 create_tiny_lm, load_lm, SqueezeConfig, run_squeeze, headline)
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "RLArgs": ("searchgym.train.rl", "RLArgs"),
    "train_rl": ("searchgym.train.rl", "train_rl"),
    "ppo_args": ("searchgym.train.ppo", "ppo_args"),
    "SFTArgs": ("searchgym.train.sft", "SFTArgs"),
    "train_sft": ("searchgym.train.sft", "train_sft"),
    "Episode": ("searchgym.train.rollout", "Episode"),
    "run_episodes": ("searchgym.train.rollout", "run_episodes"),
    "LMPolicy": ("searchgym.train.rollout", "LMPolicy"),
    "AgentPolicy": ("searchgym.train.rollout", "AgentPolicy"),
    "collate": ("searchgym.train.rollout", "collate"),
    "TinyLMConfig": ("searchgym.train.tiny_lm", "TinyLMConfig"),
    "create_tiny_lm": ("searchgym.train.tiny_lm", "create_tiny_lm"),
    "load_lm": ("searchgym.train.tiny_lm", "load_lm"),
    "save_checkpoint": ("searchgym.train.checkpoint", "save_checkpoint"),
    "load_checkpoint": ("searchgym.train.checkpoint", "load_checkpoint"),
    "SqueezeConfig": ("searchgym.experiments.squeeze.config", "SqueezeConfig"),  # moved; kept for old imports
    "run_squeeze": ("searchgym.experiments.squeeze.experiment", "run"),
    "headline": ("searchgym.experiments.squeeze.experiment", "headline"),
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(mod), attr)
    raise AttributeError(f"module 'searchgym.train' has no attribute {name!r}")
