"""PPO-clip's preset of arguments (the value head is :mod:`searchgym.train.value_head`).

The training loop itself is the shared policy-gradient loop in :mod:`searchgym.train.rl` (``algo="ppo"``):
advantages come from token-level GAE over the agent's tokens (observations are skipped, not time steps), the
value head is trained with a clipped value loss, and the policy with the same clipped surrogate as GRPO.
Imports run one way (``ppo -> rl -> value_head``), so there is no import circle.
"""

from __future__ import annotations

from typing import Any

from searchgym.train.rl import RLArgs
from searchgym.train.value_head import make_value_head, values_from_hidden

__all__ = ["make_value_head", "ppo_args", "values_from_hidden"]


def ppo_args(**overrides: Any) -> RLArgs:
    """RLArgs preset for PPO-clip with a value head (GAE with gamma = lambda = 1 on the outcome reward)."""
    base: dict[str, Any] = {"algo": "ppo", "group_size": 1, "update_epochs": 2, "num_minibatches": 2,
                            "vf_coef": 0.5, "gamma": 1.0, "gae_lambda": 1.0}
    base.update(overrides)
    return RLArgs(**base)
