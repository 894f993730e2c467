"""RayVectorEnv: the SearchVectorEnv API with the sub-environments spread over Ray actors.

Each actor holds a :class:`~searchgym.envs.vector.SearchVectorEnv` over its share of the sub-envs (so its
queries still go to one ``batch_search`` per step) and builds its own retriever. ``step`` sends each actor
its slice of the actions and gathers the results; the observations, arrays and infos are exactly those of
a SearchVectorEnv with the same number of envs.

Ray is started on first use when it is not running: a local single-node Ray (``ray.init(num_cpus=...,
include_dashboard=False)``; Ray 2.x no longer supports ``local_mode``), or a cluster when ``address=`` is
given (``"auto"`` or ``"ray://host:10001"``). A Ray this class started is shut down by ``close()``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from searchgym.envs.env import MAX_ACTION_CHARS, MAX_OBSERVATION_CHARS
from searchgym.envs.spaces import UnicodeText
from searchgym.envs.vector import FinishedTrajectories, stack_infos
from searchgym.errors import ConfigError
from searchgym.trajectory import Trajectory


class _Worker:
    """Runs inside a Ray actor: a SearchVectorEnv over a slice of the sub-envs."""

    def __init__(self, num_envs: int, autoreset_mode: str, env_kwargs: dict[str, Any]):
        from searchgym.envs.vector import SearchVectorEnv

        self.error: Exception | None = None
        try:
            self.vec = SearchVectorEnv(num_envs, autoreset_mode=autoreset_mode, **env_kwargs)
        except Exception as exc:  # noqa: BLE001 - handed to the driver by ready(), typed as raised
            self.error = exc

    def ready(self) -> Exception | None:
        return self.error

    def reset(self, seeds: list[int | None], options: dict[str, Any] | None) -> Any:
        return self.vec.reset_lists(seed=seeds, options=options)

    def step(self, actions: list[Any]) -> Any:
        obs, rewards, terms, truncs, infos = self.vec.step_lists(actions)
        return obs, rewards, terms, truncs, infos, self.vec.pop_finished_trajectories()

    def set_agent(self, agent: str | None, policy_step: int | None) -> None:
        self.vec.set_agent(agent, policy_step)

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        return self.vec.call(name, *args, **kwargs)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return self.vec.get_attr(name)


class RayVectorEnv(VectorEnv):
    """SearchVectorEnv's API over Ray actors.

    Args:
        num_envs: number of sub-environments.
        num_workers: number of Ray actors (default ``min(num_envs, 2)``); sub-envs are split evenly.
        address: Ray cluster address; ``None`` starts (or joins the already running) local Ray.
        ray_init_kwargs: extra ``ray.init`` arguments when this class starts Ray.
        worker_options: ``.options()`` of each actor (default ``{"num_cpus": 0}`` so that actors never
            wait for free CPUs on a small machine; ask for real CPUs on a cluster).
        autoreset_mode: as SearchVectorEnv (default next-step).
        max_finished, max_finished_bytes: finished trajectories kept for ``pop_finished_trajectories``, at
            most this many and this many (estimated) bytes; the oldest are dropped beyond (``dropped_trajectories``).
        **env_kwargs: SearchEnv's arguments (must be picklable; Ray uses cloudpickle).

    Example::

        vec = RayVectorEnv(num_envs=8, num_workers=2)
        obs, infos = vec.reset(seed=0)
        obs, rewards, terms, truncs, infos = vec.step(["<search> q </search>"] * 8)
        vec.close()
    """

    def __init__(self, num_envs: int = 1, *, num_workers: int | None = None, address: str | None = None,
                 ray_init_kwargs: dict[str, Any] | None = None, worker_options: dict[str, Any] | None = None,
                 autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP, max_finished: int = 10_000,
                 max_finished_bytes: int = 256 << 20, **env_kwargs: Any):
        import ray

        if not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise ConfigError(f"num_envs must be a positive integer, got {num_envs!r}")
        self.num_envs = int(num_envs)
        num_workers = min(self.num_envs, 2) if num_workers is None else int(num_workers)
        if not 1 <= num_workers <= self.num_envs:
            raise ConfigError(f"num_workers must be between 1 and num_envs ({self.num_envs}), got {num_workers}")
        mode = AutoresetMode(autoreset_mode) if not isinstance(autoreset_mode, AutoresetMode) else autoreset_mode
        self.metadata = {"autoreset_mode": mode, "render_modes": []}
        self._started_ray = False
        if not ray.is_initialized():
            kw: dict[str, Any] = {"include_dashboard": False, "ignore_reinit_error": True,
                                  "log_to_driver": False}
            if address is None:  # a Ray of its own, even where another cluster runs on this machine
                kw.update(address="local", num_cpus=os.cpu_count() or 1)
            else:
                kw["address"] = address
            kw.update(ray_init_kwargs or {})
            ray.init(**kw)
            self._started_ray = True
        self._ray = ray
        # The spaces are SearchEnv's (fixed; no need to build an env in the driver).
        self.single_observation_space = UnicodeText(MAX_OBSERVATION_CHARS)
        self.single_action_space = UnicodeText(MAX_ACTION_CHARS)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

        sizes = [self.num_envs // num_workers + (1 if i < self.num_envs % num_workers else 0)
                 for i in range(num_workers)]
        self._bounds = np.cumsum([0, *sizes]).tolist()
        actor_cls = ray.remote(_Worker).options(**(worker_options or {"num_cpus": 0}))
        self._workers = [actor_cls.remote(n, mode.value, env_kwargs) for n in sizes]
        self._finished = FinishedTrajectories(max_finished, max_finished_bytes)
        self.closed = False
        # Surface construction errors (bad kwargs) here, with their own type, rather than on the first step.
        errors = [e for e in ray.get([w.ready.remote() for w in self._workers]) if e is not None]
        if errors:
            self.close()
            raise errors[0]

    def _split(self, xs: Sequence[Any]) -> list[list[Any]]:
        b = self._bounds
        return [list(xs[b[i]:b[i + 1]]) for i in range(len(self._workers))]

    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[tuple[str, ...], dict[str, Any]]:
        if seed is None:
            seeds: list[int | None] = [None] * self.num_envs
        elif isinstance(seed, (int, np.integer)):
            seeds = [int(seed) + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ConfigError(f"reset got {len(seeds)} seeds for {self.num_envs} environments")
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        per_env = options.pop("per_env", None)
        futures = []
        for i, w in enumerate(self._workers):
            a, b = self._bounds[i], self._bounds[i + 1]
            opts = dict(options)
            if mask is not None:
                opts["reset_mask"] = np.asarray(mask[a:b])
            if per_env is not None:
                opts["per_env"] = list(per_env[a:b])
            futures.append(w.reset.remote(seeds[a:b], opts or None))
        obs: list[str] = []
        infos: list[dict[str, Any] | None] = []
        for o, inf in self._ray.get(futures):
            obs.extend(o)
            infos.extend(inf)
        return tuple(obs), stack_infos(infos, self.num_envs)

    def step(self, actions: Sequence[Any]) -> Any:
        if len(actions) != self.num_envs:
            raise ConfigError(f"step got {len(actions)} actions for {self.num_envs} environments")
        futures = [w.step.remote(chunk) for w, chunk in zip(self._workers, self._split(actions))]
        obs: list[str] = []
        rewards, terms, truncs = [], [], []
        infos: list[dict[str, Any] | None] = []
        for o, r, te, tr, inf, done in self._ray.get(futures):
            obs.extend(o)
            rewards.append(r)
            terms.append(te)
            truncs.append(tr)
            infos.extend(inf)
            for traj in done:
                self._finished.add(traj)
        return (tuple(obs), np.concatenate(rewards), np.concatenate(terms), np.concatenate(truncs),
                stack_infos(infos, self.num_envs))

    def set_agent(self, agent: str | None = None, policy_step: int | None = None) -> None:
        self._ray.get([w.set_agent.remote(agent, policy_step) for w in self._workers])

    def pop_finished_trajectories(self) -> list[Trajectory]:
        return self._finished.pop_all()

    @property
    def dropped_trajectories(self) -> int:
        return self._finished.dropped

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        parts = self._ray.get([w.call.remote(name, args, kwargs) for w in self._workers])
        return tuple(x for p in parts for x in p)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        parts = self._ray.get([w.get_attr.remote(name) for w in self._workers])
        return tuple(x for p in parts for x in p)

    def close_extras(self, **kwargs: Any) -> None:
        for w in getattr(self, "_workers", []):
            with contextlib.suppress(Exception):  # an actor that already died is fine
                self._ray.kill(w)
        self._workers = []
        if self._started_ray and self._ray.is_initialized():
            self._ray.shutdown()
