"""SearchVectorEnv: many SearchEnv episodes stepped together, all queries of a step in ONE batch_search."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from searchgym.envs.actions import SEARCH, ParsedAction
from searchgym.envs.env import ResetNeeded, SearchEnv
from searchgym.errors import ConfigError, QueryError
from searchgym.trajectory import Trajectory

_PRIMITIVE = {bool: np.bool_, int: np.int64, float: np.float64}


def stack_infos(infos: Sequence[dict[str, Any] | None], num_envs: int) -> dict[str, Any]:
    """Gymnasium's dict-of-arrays info: ``info[key][i]`` for env ``i``, and a mask ``info["_key"]``.

    A key whose values are all bool / int / float gets an array of that dtype; dict values are stacked
    recursively; anything else (strings, lists, None mixed in) an object array. Unlike
    ``VectorEnv._add_info`` the dtype does not depend on which environment reported first. Envs whose infos
    share one key set are gathered together (``itemgetter`` + ``zip``), so the cost is per key, not per
    (key, env).
    """
    out: dict[str, Any] = {}
    masks: dict[int, np.ndarray] = {}  # keys present in the same envs share one mask computation
    for k, parts in _columns_by_key(infos).items():
        if len(parts) == 1:
            idx, col = parts[0]
            full = len(idx) == num_envs
        else:
            idx = [i for ix, _ in parts for i in ix]
            col = tuple(v for _, c in parts for v in c)
            full = False  # pieces are grouped by key set, not in env order
        m = masks.get(id(idx)) if len(parts) == 1 else None
        if m is None:
            m = np.zeros(num_envs, dtype=np.bool_)
            m[idx] = True
            if len(parts) == 1:
                masks[id(idx)] = m
        out[k] = _stack_column(idx, col, full, num_envs)
        out["_" + k] = m.copy()
    return out


def _columns_by_key(infos: Sequence[dict[str, Any] | None]) -> dict[str, list[tuple[list[int], tuple]]]:
    """key -> [(env indices, their values)], one piece per set of envs that report the same key set."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, d in enumerate(infos):
        if d:
            keys = tuple(d)
            g = groups.get(keys)
            if g is None:
                groups[keys] = [i]
            else:
                g.append(i)
    pieces: dict[str, list[tuple[list[int], tuple]]] = {}
    for keys, idx in groups.items():
        rows = [infos[i] for i in idx]
        if len(keys) == 1:
            cols = [tuple(d[keys[0]] for d in rows)]  # type: ignore[index]
        else:
            cols = list(zip(*map(itemgetter(*keys), rows)))
        for k, col in zip(keys, cols):
            p = pieces.get(k)
            if p is None:
                pieces[k] = [(idx, col)]
            else:
                p.append((idx, col))
    return pieces


def _stack_column(idx: list[int], col: tuple, full: bool, num_envs: int) -> Any:
    """One key's values (``col``, of envs ``idx``) as a length-``num_envs`` array of their common primitive
    dtype, a nested dict of arrays, or an object array."""
    types = set(map(type, col))
    t = types.pop() if len(types) == 1 else None
    if t is dict:
        sub: list[Any] = [None] * num_envs
        for i, v in zip(idx, col):
            sub[i] = v
        return stack_infos(sub, num_envs)
    if t in _PRIMITIVE:
        if full:
            return np.array(col, dtype=_PRIMITIVE[t])
        arr = np.zeros(num_envs, dtype=_PRIMITIVE[t])
        arr[idx] = col
        return arr
    arr = np.empty(num_envs, dtype=object)
    arr[idx] = np.fromiter(col, dtype=object, count=len(col))
    return arr


def search_plans(envs: Sequence[SearchEnv], plans: Sequence[ParsedAction | None], retriever: Any,
                 top_k: int) -> list[Any]:
    """The retrieval half of a batched step: the queries of every search plan (``plans[i]`` from
    ``envs[i].plan``; None for an env not stepped) go to **one** ``retriever.batch_search(queries, top_k)``.

    Returns, per env, what :meth:`SearchEnv.finish` takes: its hits (one list per query), or None when it did
    not search. One bad query must not sink the batch: on a QueryError the searches are retried per env
    (``envs[i].search``), so only its owner sees the error (as the message string, as ``SearchEnv.step`` does).
    """
    queries: list[str] = []
    spans: list[tuple[int, int] | None] = [None] * len(plans)
    for i, p in enumerate(plans):
        if p is not None and p.kind == SEARCH:
            start = len(queries)
            queries.extend(p.queries)
            spans[i] = (start, len(queries))
    out: list[Any] = [None] * len(plans)
    if not queries:
        return out
    try:
        results = retriever.batch_search(queries, top_k)
    except QueryError:
        for i, sp in enumerate(spans):
            if sp is not None:
                out[i] = envs[i].search(queries[sp[0]:sp[1]])
        return out
    for i, sp in enumerate(spans):
        if sp is not None:
            out[i] = results[sp[0]:sp[1]]
    return out


def batchable(env: Any) -> bool:
    """Whether :func:`step_batched` may step ``env``: a SearchEnv (not wrapped) whose ``step`` is SearchEnv's
    own ``plan`` + ``search`` + ``finish``."""
    return isinstance(env, SearchEnv) and type(env).step is SearchEnv.step


def step_batched(envs: Sequence[SearchEnv], actions: Sequence[Any]) -> list[tuple[str, float, bool, bool, dict[str, Any]]]:
    """``[env.step(a) for env, a in zip(envs, actions)]`` with the retrieval batched: the envs that share a
    retriever (and ``top_k``) send all their queries of this step in one ``batch_search``
    (:func:`search_plans`). Every env must be :func:`batchable`; the results equal the per-env steps'.
    All actions are parsed before any env is stepped, so an env that needs a reset raises before any step."""
    plans = [env.plan(a) for env, a in zip(envs, actions)]
    by_retriever: dict[tuple[int, int], list[int]] = {}
    for i, (env, p) in enumerate(zip(envs, plans)):
        if p.kind == SEARCH:
            by_retriever.setdefault((id(env.retriever), env.top_k), []).append(i)
    hits: list[Any] = [None] * len(envs)
    for idx in by_retriever.values():
        first = envs[idx[0]]
        for i, h in zip(idx, search_plans([envs[i] for i in idx], [plans[i] for i in idx], first.retriever,
                                          first.top_k)):
            hits[i] = h
    return [env.finish(p, h) for env, p, h in zip(envs, plans, hits)]


def trajectory_nbytes(traj: Trajectory) -> int:
    """A cheap estimate of a trajectory's memory: its text (4 bytes per character, CPython's worst case) plus
    a fixed cost per record and per step."""
    chars = len(traj.question) + sum(len(a) for a in traj.answers) + len(traj.prediction or "")
    for s in traj.steps:
        chars += len(s.action) + sum(len(q) for q in (s.queries or ())) + len(s.query or "")
        chars += sum(len(d) for d in s.doc_ids) + sum(len(str(t)) for t in (s.titles or ()))
    return 4 * chars + 512 + 256 * len(traj.steps)



class FinishedTrajectories:
    """Finished trajectories waiting to be popped, bounded in count and in (estimated) bytes.

    Beyond either bound the oldest are dropped and counted in ``dropped``, so a loop that never pops cannot
    grow without bound. ``max_count=0`` keeps none."""

    def __init__(self, max_count: int = 10_000, max_bytes: int = 256 << 20):
        self._items: deque[Trajectory] = deque(maxlen=max(0, int(max_count)))
        self._sizes: deque[int] = deque()
        self.nbytes = 0
        self.max_bytes = max(0, int(max_bytes))
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._items)

    def _drop_oldest(self) -> None:
        self._items.popleft()
        self.nbytes -= self._sizes.popleft()
        self.dropped += 1

    def add(self, traj: Trajectory) -> None:
        if not self._items.maxlen:
            return
        size = trajectory_nbytes(traj)
        if len(self._items) == self._items.maxlen:
            self._drop_oldest()
        while self._items and self.nbytes + size > self.max_bytes:
            self._drop_oldest()
        self._items.append(traj)
        self._sizes.append(size)
        self.nbytes += size

    def pop_all(self) -> list[Trajectory]:
        out = list(self._items)
        self._items.clear()
        self._sizes.clear()
        self.nbytes = 0
        return out


class SearchVectorEnv(VectorEnv):
    """``num_envs`` SearchEnv episodes in one process, sharing one retriever, batched per step.

    Every ``step(actions)`` parses all actions, sends **all queries of the step to one**
    ``retriever.batch_search`` call, and hands each environment its hits. Observations are a tuple of
    strings (the batched space is a ``Tuple`` of ``Text``), rewards/terminations/truncations numpy arrays,
    infos a dict of arrays with ``_key`` masks (Gymnasium's convention).

    Autoreset follows Gymnasium 1.x's default, ``AutoresetMode.NEXT_STEP``: the step after a sub-env
    terminates or truncates resets it (its action is ignored; reward 0; its info is the reset info).
    ``autoreset_mode="same_step"`` (final obs/info in ``info["final_obs"]``/``info["final_info"]``) and
    ``"disabled"`` (reset done envs with ``reset(options={"reset_mask": mask})``) are also available.

    Finished episodes are kept as :class:`~searchgym.trajectory.Trajectory` records: take them with
    :meth:`pop_finished_trajectories`. At most ``max_finished`` (default 10,000) trajectories and
    ``max_finished_bytes`` (default 256 MB, estimated from their text) wait there; older ones are dropped (and
    counted in ``dropped_trajectories``) so that a loop that never pops does not grow without bound.
    ``max_finished=0`` keeps none.

    Example::

        vec = gymnasium.make_vec("searchgym/SearchQA-v0", num_envs=64, vectorization_mode="vector_entry_point")
        obs, infos = vec.reset(seed=0)
        obs, rewards, terms, truncs, infos = vec.step(["<search> ... </search>"] * 64)
        trajs = vec.pop_finished_trajectories()

    All keyword arguments other than ``num_envs``/``autoreset_mode`` are SearchEnv's.
    """

    def __init__(self, num_envs: int = 1, *, autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
                 render_mode: str | None = None, max_finished: int = 10_000,
                 max_finished_bytes: int = 256 << 20, **env_kwargs: Any):
        if not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise ConfigError(f"num_envs must be a positive integer, got {num_envs!r}")
        self.autoreset_mode = AutoresetMode(autoreset_mode) if not isinstance(autoreset_mode, AutoresetMode) \
            else autoreset_mode
        self.metadata = {"autoreset_mode": self.autoreset_mode, "render_modes": SearchEnv.metadata["render_modes"]}
        self.num_envs = int(num_envs)
        self.render_mode = render_mode
        first = SearchEnv(render_mode=render_mode, **env_kwargs)
        self.envs: list[SearchEnv] = [first]
        for _ in range(1, self.num_envs):
            e = SearchEnv(render_mode=render_mode, **env_kwargs)
            # Share the per-process pieces (the formatted-passage cache above all).
            e.formatter, e.reward_fn, e.prompt = first.formatter, first.reward_fn, first.prompt
            e._norm_cache = first._norm_cache
            self.envs.append(e)
        self.retriever = first.retriever
        self.top_k = first.top_k
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._needs_reset = np.zeros(self.num_envs, dtype=np.bool_)
        self._finished = FinishedTrajectories(max_finished, max_finished_bytes)
        self._agent: str | None = None
        self._policy_step: int | None = None

    # -- reset -------------------------------------------------------------------------------------------
    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[tuple[str, ...], dict[str, Any]]:
        """Reset all sub-envs (or those in ``options["reset_mask"]``). An int seed gives env ``i`` seed+i.

        ``options["per_env"]`` may hold one options dict per sub-env (e.g. ``{"index": j}``).
        """
        obs, infos = self.reset_lists(seed=seed, options=options)
        return tuple(obs), stack_infos(infos, self.num_envs)

    def reset_lists(self, *, seed: int | Sequence[int | None] | None = None,
                    options: dict[str, Any] | None = None) -> tuple[list[str], list[dict[str, Any] | None]]:
        """``reset`` with per-env info dicts instead of stacked arrays."""
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        if seed is None:
            seeds: list[int | None] = [None] * self.num_envs
        elif isinstance(seed, (int, np.integer)):
            seeds = [int(seed) + i for i in range(self.num_envs)]
            self._np_random_seed = int(seed)
            self._np_random = np.random.default_rng(int(seed))
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ConfigError(f"reset got {len(seeds)} seeds for {self.num_envs} environments")
        per_env = options.pop("per_env", None)
        if per_env is not None and len(per_env) != self.num_envs:
            raise ConfigError(f"options['per_env'] has {len(per_env)} entries for {self.num_envs} environments")
        obs: list[str] = [""] * self.num_envs
        infos: list[dict[str, Any] | None] = [None] * self.num_envs
        for i, env in enumerate(self.envs):
            if mask is not None and not mask[i]:
                continue
            opts = per_env[i] if per_env is not None else (options or None)
            obs[i], infos[i] = env.reset(seed=seeds[i], options=opts)
            self._needs_reset[i] = False
        return obs, infos

    # -- step --------------------------------------------------------------------------------------------
    def step_lists(self, actions: Sequence[Any]) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray,
                                                         list[dict[str, Any] | None]]:
        """``step`` with per-env info dicts instead of stacked arrays (what Ray workers send back)."""
        n = self.num_envs
        if len(actions) != n:
            raise ConfigError(f"step got {len(actions)} actions for {n} environments")
        obs: list[str] = [""] * n
        rewards = np.zeros(n, dtype=np.float64)
        terms = np.zeros(n, dtype=np.bool_)
        truncs = np.zeros(n, dtype=np.bool_)
        infos: list[dict[str, Any] | None] = [None] * n
        plans: list[Any] = [None] * n
        for i, env in enumerate(self.envs):
            if self._needs_reset[i]:
                if self.autoreset_mode is AutoresetMode.NEXT_STEP:
                    obs[i], infos[i] = env.reset()
                    self._needs_reset[i] = False
                    continue
                raise ResetNeeded(f"sub-environment {i} has ended; with autoreset disabled, reset it with "
                                  "reset(options={'reset_mask': mask}) before stepping it")
            plans[i] = env.plan(actions[i])
        results = search_plans(self.envs, plans, self.retriever, self.top_k)
        for i, p in enumerate(plans):
            if p is None:
                continue
            env = self.envs[i]
            o, rew, te, tr, info = env.finish(p, results[i])
            if te or tr:
                self._keep_finished(env.trajectory(self._agent, self._policy_step))
                if self.autoreset_mode is AutoresetMode.SAME_STEP:
                    info = dict(info, final_obs=o, final_info=dict(info))
                    o, reset_info = env.reset()
                    info.update(reset_info)
                else:
                    self._needs_reset[i] = True
            obs[i], rewards[i], terms[i], truncs[i], infos[i] = o, rew, te, tr, info
        return obs, rewards, terms, truncs, infos

    def step(self, actions: Sequence[Any]) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray,
                                                   dict[str, Any]]:
        obs, rewards, terms, truncs, infos = self.step_lists(actions)
        return tuple(obs), rewards, terms, truncs, stack_infos(infos, self.num_envs)

    # -- trajectories and helpers ----------------------------------------------------------------------
    def set_agent(self, agent: str | None = None, policy_step: int | None = None) -> None:
        """Label the trajectories of episodes finished from now on."""
        self._agent, self._policy_step = agent, policy_step

    def _keep_finished(self, traj: Trajectory) -> None:
        self._finished.add(traj)

    @property
    def dropped_trajectories(self) -> int:
        """Finished trajectories dropped because nobody popped them in time (count or byte cap)."""
        return self._finished.dropped

    @property
    def finished_bytes(self) -> int:
        """Estimated bytes of the trajectories waiting in :meth:`pop_finished_trajectories`."""
        return self._finished.nbytes

    def pop_finished_trajectories(self) -> list[Trajectory]:
        """The Trajectory of every episode finished since the last call, in finishing order."""
        return self._finished.pop_all()

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        out = []
        for env in self.envs:
            attr = getattr(env, name)
            out.append(attr(*args, **kwargs) if callable(attr) else attr)
        return tuple(out)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return tuple(getattr(env, name) for env in self.envs)

    def set_attr(self, name: str, values: Any) -> None:
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        for env, v in zip(self.envs, values):
            setattr(env, name, v)

    def render(self) -> tuple[Any, ...] | None:
        if self.render_mode is None:
            return None
        return tuple(env.render() for env in self.envs)

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()
