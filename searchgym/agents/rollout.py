"""Rolling agents out on environments: the loop behind ``searchgym rollout`` / ``eval`` and the trainers.

:func:`rollout` runs ``n`` questions x ``samples`` episodes of an agent on a searchgym vector env (an env
id, built with ``gymnasium.make_vec(..., vectorization_mode="vector_entry_point")``, or a
``SearchVectorEnv``), or on any single ``gymnasium.Env`` that speaks the text grammar. On the vector env
every step sends the actions of all busy slots at once (one ``batch_search`` per step), and a slot that
finishes gets the next question at once. The ``samples`` episodes of one question run side by side.

Each finished episode is written to ``out`` as one flushed JSONL line, so an interrupt or a dead policy
server leaves a valid file of the episodes finished so far.
"""

from __future__ import annotations

import inspect
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.errors import ConfigError
from searchgym.trajectory import Step, Trajectory, TrajectoryWriter

DEFAULT_ENV = "searchgym/SearchQA-v0"


class _Interrupt:
    """Ctrl-C handling: the first SIGINT is deferred to the next step boundary (so it never lands inside a
    numba/torch kernel or a half-written line); a second one interrupts at once."""

    def __init__(self) -> None:
        self.requested = False
        self._old: Any = None

    def __enter__(self):  # returns self
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            self._old = signal.getsignal(signal.SIGINT)

            def handler(signum: int, frame: Any) -> None:
                if self.requested:
                    raise KeyboardInterrupt
                self.requested = True

            signal.signal(signal.SIGINT, handler)
        return self

    def check(self) -> None:
        if self.requested:
            raise KeyboardInterrupt

    def __exit__(self, *exc: object) -> None:
        if self._old is not None:
            import signal

            signal.signal(signal.SIGINT, self._old)


def _accepts_indices(agent: Any) -> bool:
    try:
        return "indices" in inspect.signature(agent.act).parameters
    except (TypeError, ValueError):
        return False


def _agent_name(agent: Any) -> str:
    return str(getattr(agent, "name", None) or type(agent).__name__)


def _pick_questions(num_examples: int, n: int, seed: int) -> list[int]:
    """``n`` question indices: a seeded permutation, repeated (reshuffled) when ``n`` exceeds the dataset."""
    rng = np.random.default_rng(seed)
    out: list[int] = []
    while len(out) < n:
        out.extend(int(i) for i in rng.permutation(num_examples)[: n - len(out)])
    return out


def _step_stats(agent: Any, count: int) -> list[dict[str, float]] | None:
    """Per-action token stats of an LM agent's last call (mean log-prob, mean entropy, tokens)."""
    outs = getattr(agent, "last_outputs", None)
    if not outs or len(outs) != count:
        return None
    stats = []
    for o in outs:
        n = len(o.token_ids)
        stats.append({"num_tokens": n,
                      "logprob_mean": float(sum(o.logprobs) / n) if n else 0.0,
                      "entropy_mean": float(sum(o.entropies) / n) if n else 0.0})
    return stats


def _finish_record(traj: Trajectory, *, agent: str, sample: int, supporting: Sequence[str] | None,
                   step_stats: list[dict[str, float]] | None) -> Trajectory:
    traj.agent = traj.agent or agent
    traj.extra["sample"] = sample
    if supporting:
        gold = {str(s) for s in supporting}
        got = {d for s in traj.steps for d in s.doc_ids}
        traj.extra["supporting_ids"] = sorted(gold)
        traj.extra["gold_recall"] = len(gold & got) / len(gold)
    if step_stats and len(step_stats) == len(traj.steps):
        for s, st in zip(traj.steps, step_stats):
            s.extra.update(st)
    return traj


class _Progress:
    def __init__(self, total: int, enabled: bool, label: str):
        self.bar = None
        if enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("EM {task.fields[em]:.3f}"), TimeElapsedColumn(), transient=False)
            self.task = self.bar.add_task(label, total=total, em=0.0)
            self.bar.start()
        self.done = 0
        self.em = 0

    def advance(self, trajs: Sequence[Trajectory]) -> None:
        self.done += len(trajs)
        self.em += sum(int(t.em) for t in trajs)
        if self.bar is not None and trajs:
            self.bar.update(self.task, advance=len(trajs), em=self.em / max(1, self.done))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def rollout(
    agent: Any,
    env: Any = DEFAULT_ENV,
    n: int = 100,
    *,
    samples: int = 1,
    split: str | None = None,
    out: str | Path | None = None,
    seed: int = 0,
    num_envs: int = 32,
    progress: bool = True,
    env_kwargs: dict[str, Any] | None = None,
    policy_step: int | None = None,
    on_episode: Callable[[Trajectory], None] | None = None,
    append: bool = False,
) -> list[Trajectory]:
    """Run ``n`` questions x ``samples`` episodes of ``agent`` and return their trajectories.

    Args:
        agent: anything with ``act(observations, infos) -> actions`` and ``reset(indices)``.
        env: an env id (default ``searchgym/SearchQA-v0``), a ``SearchVectorEnv``, or a ``gymnasium.Env``.
        n: number of questions, drawn from the env's dataset with ``seed`` (the whole set is cycled
            through, reshuffled, when ``n`` exceeds it).
        samples: episodes per question (for pass@k), run side by side.
        split: the world split (env ids only; default: the env's own default, ``train``).
        out: JSONL file; each finished episode is appended and flushed at once.
        num_envs: parallel slots of the vector env (capped at ``n * samples``).
        env_kwargs: extra ``SearchEnv`` arguments (env ids only).
        on_episode: called with each finished trajectory (e.g. a diversity tracker).
    Returns the trajectories in finishing order. ``KeyboardInterrupt`` and agent errors propagate after
    the output file is closed, with every finished episode on disk.
    """
    if n < 1 or samples < 1:
        raise ConfigError(f"n and samples must be >= 1, got n={n}, samples={samples}")
    total = n * samples
    owned = False
    if isinstance(env, str):
        import gymnasium as gym

        import searchgym  # noqa: F401  (registers the env ids)

        kw = dict(env_kwargs or {})
        if split is not None:
            kw["split"] = split
        try:
            env = gym.make_vec(env, num_envs=max(1, min(num_envs, total)), vectorization_mode="vector_entry_point",
                               **kw)
        except gym.error.Error as exc:
            raise ConfigError(f"cannot make a vector env for {env!r}: {exc}") from exc
        owned = True
    elif split is not None or env_kwargs:
        raise ConfigError("split and env_kwargs apply to env ids only; configure the env object yourself")

    writer = TrajectoryWriter(out, mode="a" if append else "w") if out is not None else None
    bar = _Progress(total, progress, f"rollout {_agent_name(agent)}")
    results: list[Trajectory] = []

    def emit(trajs: list[Trajectory]) -> None:
        for t in trajs:
            if writer is not None:
                writer.write(t)
            if on_episode is not None:
                on_episode(t)
        results.extend(trajs)
        bar.advance(trajs)

    try:
        with _Interrupt() as intr:
            _dispatch(agent, env, n, samples, seed, policy_step, emit, intr)
    finally:
        bar.close()
        if writer is not None:
            writer.close()
        if owned:
            env.close()
    return results


def _dispatch(agent: Any, env: Any, n: int, samples: int, seed: int, policy_step: int | None,
              emit: Callable[[list[Trajectory]], None], intr: _Interrupt) -> None:
    def checked(trajs: list[Trajectory]) -> None:
        emit(trajs)
        intr.check()

    if hasattr(env, "num_envs") and hasattr(env, "pop_finished_trajectories"):
        _rollout_vector(agent, env, n, samples, seed, policy_step, checked)
    elif hasattr(env, "num_envs") and not hasattr(env, "unwrapped"):
        raise ConfigError("rollout takes a searchgym vector env (SearchVectorEnv, RayVectorEnv), an env id, or a "
                          f"single gymnasium.Env; got {type(env).__name__}")
    else:
        _rollout_single(agent, env, n, samples, seed, policy_step, checked)


def unstack_infos(infos: dict[str, Any], num_envs: int) -> list[dict[str, Any]]:
    """Gymnasium's dict-of-arrays infos (with ``_key`` masks) back to one dict per env."""
    out: list[dict[str, Any]] = [{} for _ in range(num_envs)]
    for key, val in infos.items():
        if key.startswith("_") and key[1:] in infos:
            continue
        mask = infos.get("_" + key)
        if isinstance(val, dict):
            sub = unstack_infos(val, num_envs)
            for i in range(num_envs):
                if mask is None or mask[i]:
                    out[i][key] = sub[i]
            continue
        for i in range(num_envs):
            if mask is None or mask[i]:
                v = val[i]
                out[i][key] = v.item() if isinstance(v, np.generic) else v
    return out


def _examples_of(vec: Any) -> list[Any] | None:
    envs = getattr(vec, "envs", None)
    if envs:
        return getattr(envs[0], "examples", None)
    try:
        return list(vec.get_attr("examples")[0]) if hasattr(vec, "get_attr") else None
    except Exception:  # noqa: BLE001 - a vector env that cannot tell
        return None


def _list_api(vec: Any) -> tuple[Callable[..., tuple], Callable[[list[Any]], tuple]]:
    """``reset_lists`` / ``step_lists`` of ``vec``: its own, or the standard API with its infos unstacked (e.g.
    RayVectorEnv)."""
    if hasattr(vec, "reset_lists") and hasattr(vec, "step_lists"):
        return vec.reset_lists, vec.step_lists
    B = vec.num_envs

    def reset_lists(**kw: Any) -> tuple[list[str], list[dict[str, Any]]]:
        o, inf = vec.reset(**kw)
        return list(o), unstack_infos(inf, B)

    def step_lists(actions: list[Any]) -> tuple:
        o, r, te, tr, inf = vec.step(actions)
        return list(o), r, te, tr, unstack_infos(inf, B)

    return reset_lists, step_lists


class _VectorRollout:
    """Episodes of a vector env: each slot takes the next (question, sample) job when its episode ends; the
    finished trajectories go to ``emit`` step by step."""

    def __init__(self, agent: Any, vec: Any, n: int, samples: int, seed: int, policy_step: int | None,
                 emit: Callable[[list[Trajectory]], None]) -> None:
        self.agent, self.vec, self.seed, self.emit = agent, vec, seed, emit
        self.B = B = vec.num_envs
        self.examples = _examples_of(vec)
        if not self.examples:
            raise ConfigError("the vector env does not expose its dataset (envs[0].examples); cannot pick questions")
        self.reset_lists, self.step_lists = _list_api(vec)
        order = _pick_questions(len(self.examples), n, seed)
        self.jobs = [(qi, s) for qi in order for s in range(samples)]
        self.jobs.reverse()  # pop() from the end keeps question order
        self.name = _agent_name(agent)
        if hasattr(vec, "set_agent"):
            vec.set_agent(self.name, policy_step)
        self.use_idx = _accepts_indices(agent)
        self.slot_job: list[tuple[int, int] | None] = [None] * B
        self.slot_episode: list[str | None] = [None] * B
        self.by_episode: dict[str, tuple[int, int, list[dict[str, float]]]] = {}
        self.obs: list[str] = [""] * B
        self.infos: list[dict[str, Any]] = [{} for _ in range(B)]
        self.counter = 0

    def run(self) -> None:
        self.assign(list(range(self.B)))
        while any(j is not None for j in self.slot_job):
            finished = self.step()
            if finished:
                self.assign(finished)

    def assign(self, free: list[int]) -> None:
        """Give the free slots their next jobs and reset them (idle slots too, so they can be stepped with "")."""
        mask = np.zeros(self.B, dtype=bool)
        per_env: list[dict[str, Any] | None] = [None] * self.B
        seeds: list[int | None] = [None] * self.B
        for i in free:
            mask[i] = True
            if not self.jobs:
                self.slot_job[i] = None
                self.slot_episode[i] = None
                continue
            qi, s = self.jobs.pop()
            self.slot_job[i] = (qi, s)
            per_env[i] = {"index": qi}
            seeds[i] = self.seed + self.counter
            self.counter += 1
        if not mask.any():
            return
        self.agent.reset(list(free))
        o, inf = self.reset_lists(seed=seeds, options={"reset_mask": mask, "per_env": per_env})
        for i in np.flatnonzero(mask):
            self.obs[i], self.infos[i] = o[i], dict(inf[i] or {})
            job = self.slot_job[i]
            if job is None:
                continue
            ep = str(self.infos[i].get("episode_id"))
            self.slot_episode[i] = ep
            self.by_episode[ep] = (job[0], job[1], [])

    def step(self) -> list[int]:
        """One step of every busy slot; emits the finished trajectories and returns the slots that ended."""
        active = [i for i in range(self.B) if self.slot_job[i] is not None]
        ob = [self.obs[i] for i in active]
        inf = [self.infos[i] for i in active]
        acts = self.agent.act(ob, inf, indices=active) if self.use_idx else self.agent.act(ob, inf)
        if len(acts) != len(active):
            raise ConfigError(f"agent {self.name!r} returned {len(acts)} actions for {len(active)} observations")
        stats = _step_stats(self.agent, len(active))
        actions: list[Any] = [""] * self.B
        for k, i in enumerate(active):
            actions[i] = acts[k]
            if stats is not None:
                self.by_episode[self.slot_episode[i]][2].append(stats[k])  # type: ignore[index]
        o, _r, te, tr, inf2 = self.step_lists(actions)
        finished: list[int] = []
        for i in range(self.B):
            self.obs[i], self.infos[i] = o[i], dict(inf2[i] or {})
            if te[i] or tr[i]:
                finished.append(i)
        self.emit(self._finished_records())
        return finished

    def _finished_records(self) -> list[Trajectory]:
        done = []
        for t in self.vec.pop_finished_trajectories():
            job = self.by_episode.pop(t.episode_id, None)
            if job is None:  # an idle slot's background episode
                continue
            qi, s, st = job
            done.append(_finish_record(t, agent=self.name, sample=s, supporting=self.examples[qi].supporting_ids,
                                       step_stats=st))
        return done


def _rollout_vector(agent: Any, vec: Any, n: int, samples: int, seed: int, policy_step: int | None,
                    emit: Callable[[list[Trajectory]], None]) -> None:
    _VectorRollout(agent, vec, n, samples, seed, policy_step, emit).run()


def _info_step(action: str, info: dict[str, Any]) -> Step:
    kind = str(info.get("kind") or "invalid")
    return Step(action=action, kind=kind if kind in ("search", "answer", "invalid") else "invalid",
                query=info.get("query"), doc_ids=[str(x) for x in info.get("doc_ids") or []],
                gold_hit=info.get("gold_hit"), reward=0.0, queries=[str(q) for q in info.get("queries") or []],
                titles=[str(t) for t in info.get("titles") or []])


def _rollout_single(agent: Any, env: Any, n: int, samples: int, seed: int, policy_step: int | None,
                    emit: Callable[[list[Trajectory]], None]) -> None:
    """Any gymnasium.Env with text actions, one episode at a time."""
    import uuid

    base = getattr(env, "unwrapped", env)
    examples = getattr(base, "examples", None)
    order: list[int | None] = list(_pick_questions(len(examples), n, seed)) if examples else [None] * n
    name = _agent_name(agent)
    use_idx = _accepts_indices(agent)
    counter = 0
    for qi in order:
        for s in range(samples):
            agent.reset([0])
            opts = {"index": qi} if qi is not None else None
            obs, info = env.reset(seed=seed + counter, options=opts)
            counter += 1
            info = dict(info or {})
            start = dict(info)
            steps: list[Step] = []
            stats_all: list[dict[str, float]] = []
            total_r, done = 0.0, False
            while not done:
                acts = agent.act([obs], [info], indices=[0]) if use_idx else agent.act([obs], [info])
                st = _step_stats(agent, 1)
                if st:
                    stats_all.extend(st)
                obs, r, term, trunc, info = env.step(acts[0])
                info = dict(info or {})
                total_r += float(r)
                step = _info_step(acts[0], info)
                step.reward = float(r)
                steps.append(step)
                done = bool(term or trunc)
            if hasattr(base, "trajectory"):
                traj = base.trajectory(name, policy_step)
            else:
                traj = Trajectory(
                    episode_id=str(start.get("episode_id") or uuid.uuid4().hex[:16]),
                    question_id=str(start.get("question_id", "")), question=str(start.get("question", "")),
                    answers=list(info.get("answers") or []), family=start.get("family"), split=start.get("split"),
                    agent=name, policy_step=policy_step, seed=seed + counter - 1, steps=steps,
                    prediction=info.get("prediction"), reward=total_r, em=int(info.get("em") or 0),
                    f1=float(info.get("f1") or 0.0), num_searches=int(info.get("num_searches") or 0))
            sup = examples[qi].supporting_ids if examples and qi is not None else None
            emit([_finish_record(traj, agent=name, sample=s, supporting=sup, step_stats=stats_all)])


# --------------------------------------------------------------------------------------------------
# Summaries


def _row(trajs: Sequence[Trajectory]) -> dict[str, float | None]:
    n = len(trajs)
    if n == 0:
        return {"episodes": 0, "em": 0.0, "f1": 0.0, "recall": 0.0, "searches": 0.0, "invalid": 0.0}
    steps = sum(len(t.steps) for t in trajs)
    invalid = sum(1 for t in trajs for s in t.steps if s.kind == "invalid")
    recalls = []
    for t in trajs:
        r = t.extra.get("gold_recall")
        if r is None:  # no supporting ids: whether any search hit a gold passage
            hits = [s.gold_hit for s in t.steps if s.gold_hit is not None]
            r = float(any(hits)) if hits else None
        if r is not None:
            recalls.append(float(r))
    return {"episodes": n, "em": sum(t.em for t in trajs) / n, "f1": sum(t.f1 for t in trajs) / n,
            "recall": (sum(recalls) / len(recalls)) if recalls else None,  # unknown: no gold passages known
            "searches": sum(t.num_searches for t in trajs) / n, "invalid": invalid / steps if steps else 0.0}


def summarize(trajs: Sequence[Trajectory]) -> dict[str, dict[str, float | None]]:
    """EM, F1, gold-passage recall, searches per episode and invalid-action rate: ``{"all": ..., family: ...}``.

    Recall is the share of an episode's supporting passages retrieved by any of its searches (or, when
    the records carry no supporting ids, whether any search hit a gold passage), averaged over episodes;
    None when no episode knows its gold passages (the CLI prints ``-``, JSON ``null``).
    The invalid-action rate is per action.
    """
    fams: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajs:
        fams[str(t.family) if t.family is not None else "-"].append(t)
    out = {"all": _row(trajs)}
    for f in sorted(fams):
        out[f] = _row(fams[f])
    return out


def pass_at_k_table(trajs: Sequence[Trajectory], ks: Sequence[int] | None = None
                    ) -> tuple[list[int], dict[str, dict[int, float]]]:
    """Unbiased pass@k per family (and ``"all"``) from the samples of each question (success = EM 1)."""
    from searchgym.diversity import pass_at_k

    by_q: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajs:
        by_q[t.question_id].append(t)
    if not by_q:
        return [], {}
    n_min = min(len(v) for v in by_q.values())
    if ks is None:
        ks = [1 << i for i in range(n_min.bit_length()) if (1 << i) <= n_min]
    ks = [k for k in ks if 1 <= k <= n_min]
    groups: dict[str, list[list[Trajectory]]] = defaultdict(list)
    for v in by_q.values():
        groups["all"].append(v)
        groups[str(v[0].family) if v[0].family is not None else "-"].append(v)
    table: dict[str, dict[int, float]] = {}
    for g, qs in groups.items():
        table[g] = {k: float(np.mean([pass_at_k(len(v), sum(int(t.em) for t in v), k) for v in qs]))
                    for k in ks}
    return list(ks), table
