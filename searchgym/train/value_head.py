"""The PPO value head: a scalar linear head on the policy's last hidden state.

It lives apart from :mod:`searchgym.train.ppo` (PPO's argument preset) so that the shared loop in
:mod:`searchgym.train.rl` and the preset import in one direction only (``ppo -> rl -> value_head``).
"""

from __future__ import annotations

from typing import Any


def make_value_head(hidden_size: int, seed: int = 0) -> Any:
    """A zero-initialised ``Linear(hidden_size, 1)`` (initial values 0: the first advantages are the returns)."""
    import torch

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        head = torch.nn.Linear(hidden_size, 1)
        torch.nn.init.zeros_(head.weight)
        torch.nn.init.zeros_(head.bias)
    return head


def values_from_hidden(head: Any, hidden: Any) -> Any:
    """``[B, T, H] -> [B, T]`` (float32)."""
    return head(hidden.float()).squeeze(-1)
