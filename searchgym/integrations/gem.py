"""GEM: ``register()`` makes ``gem.make("searchgym:SearchQA-v0")`` a multi-turn search env over ``SearchEnv``.

    import gem
    from searchgym.integrations.gem import register
    register()
    env = gem.make("searchgym:SearchQA-v0", split="train")   # any SearchEnv argument
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("<search> capital of Kaitrland </search>")

Unlike GEM's ``ToolEnvWrapper(QaEnv)`` the searches are part of the env (budget, corrective messages and
rewards as ``SearchEnv``), so GEM's observation wrappers and trainers see one ordinary multi-turn env.
"""

from __future__ import annotations

from typing import Any

from searchgym.integrations._common import require

require("gem")

import gem
from gem.core import Env

ENV_ID = "searchgym:SearchQA-v0"


class SearchgymGemEnv(Env):
    """A ``gem.Env`` stepping a searchgym ``SearchEnv`` (constructor arguments as ``SearchEnv``)."""

    def __init__(self, **env_kwargs: Any):
        super().__init__()
        from searchgym.envs import SearchEnv

        self._kwargs = dict(env_kwargs)
        self.env = SearchEnv(**env_kwargs)

    def reset(self, seed: int | None = None, **options: Any) -> tuple[str, dict[str, Any]]:
        """A new question (``index=`` / ``question_id=`` pick one; ``seed`` reshuffles the order)."""
        super().reset(seed=seed)
        return self.env.reset(seed=seed, options=options or None)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return self.env.step(action)

    def sample_random_action(self) -> str:
        return f"<search> {self.env.example.question if self.env.example is not None else 'search'} </search>"

    def spawn(self, same_state: bool = False, **kwargs: Any) -> SearchgymGemEnv:
        if same_state:
            raise NotImplementedError("a searchgym env cannot be cloned mid-episode; spawn a fresh one")
        return SearchgymGemEnv(**{**self._kwargs, **kwargs})

    def trajectory(self) -> Any:
        return self.env.trajectory()


def register(env_id: str = ENV_ID, **default_kwargs: Any) -> str:
    """Register the env with ``gem`` as ``env_id`` (idempotent); ``default_kwargs`` go to ``SearchEnv``."""
    from gem.envs.registration import ENV_REGISTRY

    if env_id not in ENV_REGISTRY:
        gem.register(env_id, entry_point="searchgym.integrations.gem:SearchgymGemEnv", **default_kwargs)
    return env_id


__all__ = ["ENV_ID", "SearchgymGemEnv", "register"]
