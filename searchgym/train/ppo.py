"""PPO-clip's extra parts: a scalar value head on the policy's last hidden state, and a preset of arguments.

The training loop itself is the shared policy-gradient loop in :mod:`searchgym.train.rl` (``algo="ppo"``):
advantages come from token-level GAE over the agent's tokens (observations are skipped, not time steps), the
value head is trained with a clipped value loss, and the policy with the same clipped surrogate as GRPO.
"""

from __future__ import annotations

from typing import Any


def make_value_head(hidden_size: int, seed: int = 0) -> Any:
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


def ppo_args(**overrides: Any) -> Any:
    """RLArgs preset for PPO-clip with a value head (GAE with gamma = lambda = 1 on the outcome reward)."""
    from searchgym.train.rl import RLArgs

    base = {"algo": "ppo", "group_size": 1, "update_epochs": 2, "num_minibatches": 2, "vf_coef": 0.5,
            "gamma": 1.0, "gae_lambda": 1.0}
    base.update(overrides)
    return RLArgs(**base)
