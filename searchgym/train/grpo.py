"""Compatibility shim: the RL trainer lives in :mod:`searchgym.train.rl` (GRPO, RLOO and PPO in one loop)."""

from searchgym.train.rl import (  # noqa: F401
    ALGOS,
    POLICY_LOSSES,
    RLArgs,
    _torch_gen,
    compute_advantages,
    policy_loss,
    step_seeds,
    train_rl,
)
