"""The strategy policy: the squeeze experiment's model organism, exact and fast (issue 13 §2).

A small torch policy picks one heuristic query strategy per question from surface features of the
question (a bag of its words plus a bias; never the gold family); the chosen strategy and the shared reader
execute it in the real ``SearchEnv`` under an env preset (default ``squeeze``). Because the heuristic
strategies are deterministic given the question, each (question, strategy) outcome is computed ONCE by
rolling the strategy out on the batched vector env (one ``batch_search`` per step) and looked up afterwards,
so every arm x seed trains in well under a second and every success figure is an exact expectation under the
policy (``sum_a pi(a|x) * EM(x, a)``), not a sample.

One "token" is one strategy choice, so the LM trainer's token-level losses apply unchanged
(``searchgym.train.losses``): GRPO advantages (group-normalised), PPO-clip, KL to the SFT reference, entropy
bonus, Clip-Cov and KL-Cov, with ``num_minibatches`` optimizer steps per rollout batch so that the
probability ratio moves and the Clip-Cov / KL-Cov corrections can act. Arms:

=================  =================================================================================
sft                continued SFT on fresh demonstrator choices (same optimizer steps as an RL arm)
grpo               GRPO (PPO-clip, group mean/std advantages, zero-advantage groups left out)
grpo_kl            GRPO + ``kl_coef`` * KL(pi || SFT start) (low-variance k3 at the sampled choice, as the LM)
grpo_ent           GRPO + entropy bonus (exact entropy of the softmax) on every sampled choice
grpo_clipcov       GRPO with Clip-Cov (PPO clip ranges 1, as released)
grpo_klcov         GRPO with KL-Cov
grpo_count         GRPO on r + c * min(1, 1/sqrt(N(x, a))) (outcome-based exploration, UCB-style; the
                   outcome is the strategy, N counts its choices for the question so far, this group included)
grpo_darling       DARLING: r * Div, Div = (n - |class|) / (n - 1) floored at 0.1 (class = same strategy),
                   mean-centred advantages (no std), as released
grpo_sft_refresh   GRPO + ``refresh_steps`` SFT steps on demonstrations every ``refresh_every`` RL steps
rs_sft             rejection-sampling SFT: sample the policy as GRPO does, cross-entropy on the successful
                   samples only (the data RL rewards, without RL's negative samples and baselines)
grpo_majority      positive control: GRPO on a reward that pays only ``majority`` (the best strategy of the
                   majority families): collapse onto it is known to happen, so the instrument must see it
grpo_critique      Critique-GRPO: a failed choice gets the env's critique as an input cue (which one: the
                   question's ``critique`` kind, e.g. "the subject is a nickname never resolved") and one
                   refinement choice; both enter the group (needs ``Outcomes.critique`` and critique inputs)
supervised         the learnability control: cross-entropy on the best strategy of each sampled question (the
                   outcome table's label, see :func:`best_labels`), the same questions and optimizer steps as an
                   RL step; no sampling, no reward: can these features and this policy class learn the routing?
=================  =================================================================================

Caveat: ``random`` draws its words from a seeded RNG; its outcome is the one of seed 0 (so it is treated as
deterministic like the others).
"""

from __future__ import annotations

import functools
import math
import random
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from searchgym.errors import ConfigError
from searchgym.experiments.squeeze.parallel import ordered_map

ARMS = ("sft", "grpo", "grpo_kl", "grpo_ent", "grpo_clipcov", "grpo_klcov", "grpo_count", "grpo_darling",
        "grpo_sft_refresh")
# Arms of the contextual organism (issue 21 §2, §4, §6), runnable here too:
EXTRA_ARMS = ("rs_sft", "grpo_majority", "grpo_critique", "supervised")  # appended: ALL_ARMS.index seeds the arms
ALL_ARMS = ARMS + EXTRA_ARMS
REGULARISED = ("grpo_kl", "grpo_ent", "grpo_klcov")  # arms with a term that acts on every sampled choice
EVAL_SPLITS = ("train", "test", "shift_phrasing", "shift_family", "shift_type", "shift_strategy")
EVAL_SPLITS_V3 = (*EVAL_SPLITS, "shift_renamed", "shift_homonym")  # generator version >= 3: former names


def eval_splits(world_version: int | None) -> tuple[str, ...]:
    """The evaluated splits of a world of this generator version (None: the embedded default world's)."""
    return EVAL_SPLITS_V3 if (world_version or 0) >= 3 else EVAL_SPLITS


@dataclass
class StrategyConfig:
    # --- world and env
    world_seed: int = 0                 # seed of the world
    n_entities: int | None = None       # None: the embedded default world (gym.make's); else a generated world
    world_version: int | None = None    # generator version of a generated world (None: World.generate's default;
    #                                     the squeeze experiment passes 3, its world with shift_homonym)
    preset: str = "squeeze"             # env settings (searchgym.envs.presets)
    num_envs: int = 32                  # vector-env slots for the outcome precompute
    splits: tuple[str, ...] = EVAL_SPLITS  # train first; the others are evaluated only
    # --- policy
    min_df: int = 3                     # a word is a feature if it occurs in >= min_df train questions
    hidden: int = 0                     # 0: linear softmax; > 0: one tanh hidden layer of this width
    # --- demonstrator / SFT start
    demo_weights: dict[str, float] | None = None  # None: the `diverse` demonstrator's DEFAULT_WEIGHTS
    demo_samples: int = 4               # demonstrator choices per train question (SFT data)
    sft_steps: int = 150                # full-batch Adam steps of the SFT start
    sft_lr: float = 0.05
    # --- RL
    seeds: int = 20                     # seeds per arm (each seed: its own SFT start, sampling, demos)
    first_seed: int = 0                 # seeds are first_seed .. first_seed + seeds - 1
    arms: tuple[str, ...] = ARMS
    steps: int = 60                     # RL steps (one rollout batch each)
    prompts_per_step: int = 16          # train questions per step
    group_size: int = 8                 # strategy samples per question
    lr: float = 0.05                    # Adam learning rate of the RL / continued-SFT updates
    num_minibatches: int = 4            # optimizer steps per rollout batch (the ratio moves after the first)
    clip: float = 0.2                   # PPO clip range (grpo arms)
    norm_adv_by_std: bool = True        # GRPO std normalisation (DARLING: always off, as released)
    kl_coef: float = 0.1                # grpo_kl
    ent_coef: float = 0.02              # grpo_ent
    clip_cov_ratio: float = 0.05        # grpo_clipcov: share of choices whose gradient is detached
    clip_cov_lb: float = 1.0
    clip_cov_ub: float = 5.0
    kl_cov_ratio: float = 0.05          # grpo_klcov: share of top-covariance choices with |log ratio| penalty
    kl_cov_coef: float = 1.0
    count_coef: float = 0.5             # grpo_count: bonus scale c
    refresh_every: int = 10             # grpo_sft_refresh: SFT steps every N RL steps
    refresh_steps: int = 5
    eval_every: int = 10                # history of shares / success every N steps
    threads: int = 1                    # torch threads

    def check(self) -> None:
        bad = [a for a in self.arms if a not in ALL_ARMS]
        if bad:
            raise ConfigError(f"unknown arm(s) {bad}; choose from {list(ALL_ARMS)}")
        if not self.splits or self.splits[0] != "train":
            raise ConfigError(f"splits must start with 'train', got {self.splits}")
        for name in ("seeds", "steps", "prompts_per_step", "num_minibatches", "demo_samples", "sft_steps",
                     "eval_every", "refresh_every", "threads", "num_envs"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.group_size < 2:
            raise ConfigError(f"group_size must be >= 2 (group baselines), got {self.group_size}")
        if (self.prompts_per_step * self.group_size) % self.num_minibatches:
            raise ConfigError(f"prompts_per_step * group_size = {self.prompts_per_step * self.group_size} does not "
                              f"split into num_minibatches={self.num_minibatches}")


# --------------------------------------------------------------------------------------------------
# Outcomes: every (question, strategy) once, in the real env


@dataclass
class Outcomes:
    strategies: tuple[str, ...]
    questions: dict[str, list[str]]      # split -> question texts
    em: dict[str, np.ndarray]            # split -> [n_questions, n_strategies] EM in {0, 1}
    seconds: float = 0.0
    families: dict[str, list[str]] = field(default_factory=dict)  # split -> question family (metadata)
    critique: dict[str, list[int]] = field(default_factory=dict)  # split -> critique kind of a failure (index)


def _world(cfg: StrategyConfig) -> Any:
    return _world_of(cfg.world_seed, cfg.n_entities, cfg.world_version, _embedded(cfg))


@functools.lru_cache(maxsize=2)
def _world_of(seed: int, n_entities: int | None, version: int | None, embedded: bool) -> Any:
    """The world (cached: a worker process computing several splits' outcomes generates it once)."""
    from searchgym.data import World, default_world

    if embedded:
        return default_world(seed)
    from searchgym.data.world.world import DEFAULT_N_ENTITIES, GENERATOR_VERSION

    return World.generate(seed=seed, n_entities=n_entities or DEFAULT_N_ENTITIES, version=version or GENERATOR_VERSION)


def _embedded(cfg: StrategyConfig) -> bool:
    from searchgym.data.world.world import GENERATOR_VERSION

    return cfg.n_entities is None and cfg.world_version in (None, GENERATOR_VERSION)


def _vector_env(cfg: StrategyConfig, world: Any, split: str, n: int) -> Any:
    from searchgym.envs.presets import get_preset
    from searchgym.envs.vector import SearchVectorEnv

    kw = get_preset(cfg.preset)
    if _embedded(cfg):
        return SearchVectorEnv(num_envs=min(cfg.num_envs, n), split=split, world_seed=cfg.world_seed, **kw)
    return SearchVectorEnv(num_envs=min(cfg.num_envs, n), dataset=list(world.split(split)),
                           retriever=_retriever_for(world), split=split, **kw)


_RETRIEVERS: dict[str, Any] = {}


def _retriever_for(world: Any) -> Any:
    key = world.fingerprint()
    if key not in _RETRIEVERS:
        from searchgym.retrieval import build_retriever

        _RETRIEVERS[key] = build_retriever(world.passages, kind="bm25")
    return _RETRIEVERS[key]


def compute_outcomes(cfg: StrategyConfig, strategies: Sequence[str] | None = None, jobs: int | Executor = 1
                     ) -> Outcomes:
    """EM of every strategy on every question of ``cfg.splits`` under ``cfg.preset`` (one rollout each); the
    splits in ``jobs`` worker processes (the same table: each split is rolled out on its own env and agents)."""
    from searchgym.agents.heuristics import STRATEGIES

    strategies = tuple(strategies or STRATEGIES)
    t0 = time.perf_counter()
    world = _world(cfg)
    sizes = {split: len(world.split(split)) for split in cfg.splits}
    empty = [s for s, n in sizes.items() if not n]
    if empty:
        raise ConfigError(f"split {empty[0]!r} of this world has no questions")
    order = sorted(cfg.splits, key=lambda s: -sizes[s])  # the longest first, so the workers finish together
    tables = dict(zip(order, ordered_map(functools.partial(_split_outcomes, cfg, strategies), order, jobs)))
    questions = {s: tables[s][0] for s in cfg.splits}
    families = {s: tables[s][1] for s in cfg.splits}
    em = {s: tables[s][2] for s in cfg.splits}
    return Outcomes(strategies, questions, em, time.perf_counter() - t0, families)


def _split_outcomes(cfg: StrategyConfig, strategies: tuple[str, ...], split: str
                    ) -> tuple[list[str], list[str], np.ndarray]:
    """One split's (question texts, families, [n_questions, n_strategies] EM table)."""
    from searchgym.agents.heuristics import HeuristicAgent
    from searchgym.agents.rollout import rollout

    world = _world(cfg)
    qs = list(world.split(split))
    pos = {q.id: i for i, q in enumerate(qs)}
    table = np.zeros((len(qs), len(strategies)), dtype=np.float64)
    seen = np.zeros_like(table, dtype=bool)
    vec = _vector_env(cfg, world, split, len(qs))
    try:
        for j, s in enumerate(strategies):
            for t in rollout(HeuristicAgent(s, seed=0), vec, len(qs), seed=0, progress=False):
                i = pos[t.question_id]
                table[i, j], seen[i, j] = float(t.em), True
    finally:
        vec.close()
    if not seen.all():  # pragma: no cover - rollout covers every question once when n == len(split)
        raise RuntimeError(f"outcome table of {split} is incomplete")
    return [q.question for q in qs], [str(q.metadata.get("family", "?")) for q in qs], table


_OUTCOMES: dict[tuple[Any, ...], Outcomes] = {}


def outcomes_for(cfg: StrategyConfig, jobs: int | Executor = 1) -> Outcomes:
    """:func:`compute_outcomes` of the fields that make the table, cached (the four latest) in this process, so
    the strategy and the contextual stage of one run compute it once."""
    key = (cfg.world_seed, cfg.n_entities, cfg.preset, tuple(cfg.splits), cfg.num_envs, cfg.world_version)
    if key not in _OUTCOMES:
        if len(_OUTCOMES) >= 4:
            del _OUTCOMES[next(iter(_OUTCOMES))]
        base = StrategyConfig(world_seed=key[0], n_entities=key[1], preset=key[2], splits=key[3], num_envs=key[4],
                              world_version=key[5])
        _OUTCOMES[key] = compute_outcomes(base, jobs=jobs)
    return _OUTCOMES[key]


# --------------------------------------------------------------------------------------------------
# Features and policy


def _tokens(question: str) -> set[str]:
    from searchgym.agents.analysis import words

    return {w.lower() for w in words(question)}


class Featurizer:
    """Binary bag of question words (vocabulary: words in >= ``min_df`` train questions) plus a bias."""

    def __init__(self, train_questions: Sequence[str], min_df: int):
        df: Counter[str] = Counter()
        for q in train_questions:
            df.update(_tokens(q))
        self.vocab = {w: i for i, w in enumerate(sorted(w for w, c in df.items() if c >= min_df))}
        self.dim = len(self.vocab) + 1

    def __call__(self, questions: Sequence[str]) -> Any:
        import torch

        x = torch.zeros(len(questions), self.dim)
        x[:, -1] = 1.0
        for i, q in enumerate(questions):
            for w in _tokens(q):
                j = self.vocab.get(w)
                if j is not None:
                    x[i, j] = 1.0
        return x


def make_policy(dim: int, n_actions: int, hidden: int) -> Any:
    import torch

    if hidden <= 0:
        return torch.nn.Linear(dim, n_actions)
    return torch.nn.Sequential(torch.nn.Linear(dim, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, n_actions))


def _entropy(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def policy_stats(policy: Any, x: Any, em: np.ndarray) -> dict[str, Any]:
    """Exact success, conditional strategy entropy and the marginal strategy distribution of a policy."""
    import torch

    with torch.no_grad():
        logits = policy(x)
        logp = torch.log_softmax(logits, dim=-1)
        p = logp.exp()
        ent = -(p * logp).sum(-1)
    pn = p.double().numpy()
    marginal = pn.mean(0)
    return {"success": float((pn * em).sum(1).mean()), "strategy_entropy": float(ent.mean().item()),
            "marginal_entropy": _entropy(marginal), "shares": marginal}


# --------------------------------------------------------------------------------------------------
# Training


def _demo_targets(n: int, strategies: Sequence[str], weights: dict[str, float], k: int, rng: random.Random
                  ) -> list[int]:
    names = [s for s in strategies if weights.get(s, 0) > 0]
    w = [weights[s] for s in names]
    idx = {s: i for i, s in enumerate(strategies)}
    return [idx[c] for _ in range(k) for c in rng.choices(names, weights=w, k=n)]


def _sft_steps(policy: Any, opt: Any, x: Any, targets: Any, steps: int) -> None:
    import torch.nn.functional as F

    for _ in range(steps):
        loss = F.cross_entropy(policy(x), targets)
        opt.zero_grad()
        loss.backward()
        opt.step()


@dataclass
class _Ctx:
    cfg: StrategyConfig
    strategies: tuple[str, ...]
    x: dict[str, Any]                   # split -> features
    em: dict[str, np.ndarray]
    weights: dict[str, float]
    demo_x: Any = None                  # train features repeated per demonstrator sample
    extra: dict[str, Any] = field(default_factory=dict)
    majority: int = 0                   # grpo_majority: the strategy its reward pays
    critique: Any = None                # grpo_critique: [n_train] critique-kind column of each train question


def _evaluate(ctx: _Ctx, policy: Any, rng_seed: int) -> dict[str, Any]:
    import torch

    out: dict[str, Any] = {}
    for split in ctx.cfg.splits:
        st = policy_stats(policy, ctx.x[split], ctx.em[split])
        out[split] = {"success": st["success"], "strategy_entropy": st["strategy_entropy"],
                      "marginal_entropy": st["marginal_entropy"], "shares": st["shares"].tolist()}
    # the empirical choice distribution: one sampled strategy per train question
    g = torch.Generator().manual_seed(rng_seed)
    with torch.no_grad():
        p = torch.softmax(policy(ctx.x["train"]), -1)
    picks = torch.multinomial(p, 1, generator=g).squeeze(1).numpy()
    counts = np.bincount(picks, minlength=len(ctx.strategies)) / len(picks)
    out["train"]["choice_entropy"] = _entropy(counts)
    return out


def sft_start(ctx: _Ctx, seed: int) -> tuple[Any, dict[str, Any]]:
    """A policy fitted (cross-entropy) to the demonstrator's choices on the train questions."""
    import torch

    torch.manual_seed(seed)
    cfg = ctx.cfg
    n = ctx.x["train"].shape[0]
    policy = make_policy(ctx.x["train"].shape[1], len(ctx.strategies), cfg.hidden)
    picks = torch.tensor(_demo_targets(n, ctx.strategies, ctx.weights, cfg.demo_samples,
                                       random.Random(f"demo/{seed}"))).reshape(cfg.demo_samples, n)
    # cross-entropy over the demo_samples choices of each question = against their empirical distribution
    soft = torch.nn.functional.one_hot(picks, len(ctx.strategies)).float().mean(0)
    opt = torch.optim.Adam(policy.parameters(), lr=cfg.sft_lr)
    _sft_steps(policy, opt, ctx.x["train"], soft, cfg.sft_steps)
    return policy, _evaluate(ctx, policy, seed)


def _shaped_rewards(arm: str, cfg: StrategyConfig, r: np.ndarray, acts: np.ndarray, qidx: np.ndarray,
                    counts: dict[tuple[int, int], int]) -> np.ndarray:
    G = cfg.group_size
    if arm == "grpo_count":
        out = r.copy()
        for i in range(len(r)):
            counts[(int(qidx[i]), int(acts[i]))] = counts.get((int(qidx[i]), int(acts[i])), 0) + 1
        for i in range(len(r)):
            out[i] += cfg.count_coef * min(1.0, 1.0 / math.sqrt(counts[(int(qidx[i]), int(acts[i]))]))
        return out
    if arm == "grpo_darling":
        out = r.copy()
        for g0 in range(0, len(r), G):
            a = acts[g0:g0 + G]
            for i in range(G):
                size = int((a == a[i]).sum())
                div = max(0.1, (G - size) / (G - 1))
                out[g0 + i] = r[g0 + i] * div
        return out
    return r


def _with_refinements(ctx: _Ctx, policy: Any, gen: Any, xb: Any, qidx: np.ndarray, acts_t: Any, old_logp: Any,
                      rt: Any, G: int, norm_by_std: bool) -> tuple[Any, Any, Any, Any, Any]:
    """Critique-GRPO's group: every failed first choice gets the env's critique (a one-hot input column, its
    kind per question in ``ctx.critique``) and one refinement choice from the same policy; first choices and
    refinements of a question form one group for the advantages. Returns the enlarged batch."""
    import torch

    if ctx.critique is None:
        from searchgym.errors import ConfigError

        raise ConfigError("grpo_critique needs critique inputs (the contextual organism provides them)")
    failed = torch.nonzero(rt == 0, as_tuple=True)[0]
    xr = xb[failed].clone()
    xr[torch.arange(len(failed)), torch.from_numpy(ctx.critique[qidx[failed.numpy()]])] = 1.0
    with torch.no_grad():
        lr_all = torch.log_softmax(policy(xr), -1)
        ar = torch.multinomial(lr_all.exp(), 1, generator=gen).squeeze(1) if len(failed) else \
            torch.zeros(0, dtype=torch.long)
        olp_r = lr_all.gather(1, ar[:, None]).squeeze(1)
    rr = torch.tensor(ctx.em["train"][qidx[failed.numpy()], ar.numpy()], dtype=torch.float32)
    group = torch.cat([torch.arange(len(rt)) // G, failed // G])
    r_all = torch.cat([rt, rr])
    adv = torch.zeros_like(r_all)
    keep = torch.zeros_like(r_all)
    for g in torch.unique(group):
        m = group == g
        rg = r_all[m]
        a = rg - rg.mean()
        if norm_by_std:
            a = a / (rg.std() + 1e-6)
        adv[m] = a
        keep[m] = float(rg.std() > 0)
    return (torch.cat([xb, xr]), torch.cat([acts_t, ar]), torch.cat([old_logp, olp_r]), adv, keep)


@dataclass
class _ArmRun:
    """One arm-seed's training state: the policy, its frozen start (KL reference), optimizer, random streams and
    what the controls did (``ctl`` sums, ``step_log`` per RL step)."""

    ctx: _Ctx
    arm: str
    seed: int
    policy: Any
    ref: Any
    opt: Any
    rng: Any                            # numpy: the questions of each step
    gen: Any                            # torch: sampled choices, minibatch order, Clip-Cov's draws
    demo_rng: random.Random             # continued SFT's (and the refresh's) demonstrator choices
    counts: dict[tuple[int, int], int] = field(default_factory=dict)
    ctl: Counter = field(default_factory=Counter)
    n_updates: int = 0
    step_log: list[dict[str, float]] = field(default_factory=list)


def _arm_run(ctx: _Ctx, arm: str, seed: int, start: Any) -> _ArmRun:
    import copy

    import torch

    torch.manual_seed(seed * 1000 + ALL_ARMS.index(arm))
    policy = copy.deepcopy(start)
    ref = copy.deepcopy(start).requires_grad_(False)
    return _ArmRun(ctx, arm, seed, policy, ref, torch.optim.Adam(policy.parameters(), lr=ctx.cfg.lr),
                   np.random.default_rng([seed, ALL_ARMS.index(arm)]),
                   torch.Generator().manual_seed(seed * 7919 + ALL_ARMS.index(arm)),
                   random.Random(f"demo-arm/{arm}/{seed}"))


def _continued_sft_step(st: _ArmRun, xb: Any) -> None:
    """Continued SFT: as many optimizer steps as an RL step, on fresh demonstrator choices."""
    import torch

    cfg, ctx = st.ctx.cfg, st.ctx
    P, G = cfg.prompts_per_step, cfg.group_size
    t = torch.tensor(_demo_targets(P * G, ctx.strategies, ctx.weights, 1, st.demo_rng))
    mb = P * G // cfg.num_minibatches
    for k in range(cfg.num_minibatches):
        _sft_steps(st.policy, st.opt, xb[k * mb:(k + 1) * mb], t[k * mb:(k + 1) * mb], 1)
        st.n_updates += 1


def _rs_sft_step(st: _ArmRun, xb: Any, qidx: np.ndarray) -> None:
    """Rejection-sampling SFT: SFT on the policy's own successful samples (the data RL rewards)."""
    import torch

    cfg = st.ctx.cfg
    with torch.no_grad():
        acts_t = torch.multinomial(torch.softmax(st.policy(xb), -1), 1, generator=st.gen).squeeze(1)
    ok = torch.from_numpy(st.ctx.em["train"][qidx, acts_t.numpy()] > 0)
    _sft_on_kept(st, xb[ok], acts_t[ok], cfg.num_minibatches)


def _sft_on_kept(st: _ArmRun, xs: Any, ts: Any, minibatches: int) -> None:
    """Cross-entropy on the kept rows ``xs`` toward ``ts``, in ``minibatches`` optimizer steps (an empty one is
    skipped); counts the rows as the arm's tokens."""
    import torch

    st.ctl["tokens"] += float(len(ts))
    for xm, tm in zip(torch.tensor_split(xs, minibatches), torch.tensor_split(ts, minibatches)):
        if len(tm):
            _sft_steps(st.policy, st.opt, xm, tm, 1)
            st.n_updates += 1


def best_labels(em: np.ndarray, prefer: int = 0) -> np.ndarray:
    """The best strategy of each question from its outcome row: a strategy that solves it, ``prefer`` (the
    majority strategy) when that one does, else the solving strategy with the highest success over all
    questions; -1 where none solves it (left out of the supervised loss)."""
    rank = em.mean(0) + 2.0 * (np.arange(em.shape[1]) == prefer)  # ties between solvers go to the higher rank
    best = np.argmax(np.where(em > 0, rank[None, :], -np.inf), axis=1)
    return np.where((em > 0).any(1), best, -1)


def _supervised_step(st: _ArmRun, xb: Any, qidx: np.ndarray) -> None:
    """The supervised routing fit: cross-entropy on the outcome table's best strategy of each row (an RL step's
    rows and optimizer steps; rows no strategy solves are left out)."""
    import torch

    cfg, ctx = st.ctx.cfg, st.ctx
    t = torch.from_numpy(best_labels(ctx.em["train"], ctx.majority)[qidx])
    ok = t >= 0
    _sft_on_kept(st, xb[ok], t[ok], cfg.num_minibatches)


def _rl_batch(st: _ArmRun, xb: Any, qidx: np.ndarray) -> tuple[Any, Any, Any, Any, Any]:
    """Sample one choice per row, reward (and shape) it, group advantages; returns
    ``(xb, actions, old log-probs, advantages, keep)`` (Critique-GRPO: with its refinements)."""
    import torch

    from searchgym.train.losses import grpo_advantages

    ctx, cfg, arm = st.ctx, st.ctx.cfg, st.arm
    G = cfg.group_size
    with torch.no_grad():
        old_logits = st.policy(xb)
        acts_t = torch.multinomial(torch.softmax(old_logits, -1), 1, generator=st.gen).squeeze(1)
        old_logp = torch.log_softmax(old_logits, -1).gather(1, acts_t[:, None]).squeeze(1)
    acts = acts_t.numpy()
    r = ctx.em["train"][qidx, acts]
    if arm == "grpo_majority":  # the positive control: only the majority strategy is paid
        r = r * (acts == ctx.majority)
    r = _shaped_rewards(arm, cfg, r, acts, qidx, st.counts)
    rt = torch.tensor(r, dtype=torch.float32)
    adv = grpo_advantages(rt, G, norm_by_std=cfg.norm_adv_by_std and arm != "grpo_darling")
    # zero-advantage groups leave the policy-gradient term only; the regularisers (KL, entropy,
    # KL-Cov's penalty) act on every sampled choice, all-tied groups included
    keep = (rt.reshape(-1, G).std(1) > 0).repeat_interleave(G).float()
    if arm == "grpo_critique":
        return _with_refinements(ctx, st.policy, st.gen, xb, qidx, acts_t, old_logp, rt, G, cfg.norm_adv_by_std)
    return xb, acts_t, old_logp, adv, keep


def _minibatch_loss(st: _ArmRun, x: Any, a_t: Any, olp: Any, a: Any, m: Any) -> tuple[Any, Any]:
    """The arm's loss on one minibatch; returns ``(loss, log-probs of the taken choices)``."""
    import torch

    from searchgym.train.losses import clip_cov_loss, kl_cov_loss, kl_penalty, masked_mean, ppo_clip_loss

    cfg, arm = st.ctx.cfg, st.arm
    m_all = torch.ones_like(m)
    logp_all = torch.log_softmax(st.policy(x), -1)
    logp = logp_all.gather(1, a_t[:, None])
    if arm == "grpo_clipcov":
        loss, stats = clip_cov_loss(logp, olp, a, m, clip_cov_ratio=cfg.clip_cov_ratio, clip_cov_lb=cfg.clip_cov_lb,
                                    clip_cov_ub=cfg.clip_cov_ub, clip_low=1.0, clip_high=1.0, generator=st.gen)
        st.ctl["selected"] += stats["n_cov_selected"]
    elif arm == "grpo_klcov":
        loss, stats = kl_cov_loss(logp, olp, a, m_all, kl_cov_ratio=cfg.kl_cov_ratio, kl_coef=cfg.kl_cov_coef,
                                  pg_mask=m)
        st.ctl["selected"] += stats["n_cov_selected"]
    else:
        loss, stats = ppo_clip_loss(logp, olp, a, m, clip_low=cfg.clip, clip_high=cfg.clip)
    st.ctl["clipfrac"] += stats.get("clipfrac", 0.0) * float(m.sum())
    if arm == "grpo_kl":
        ref_logp = torch.log_softmax(st.ref(x), -1).gather(1, a_t[:, None])
        loss = loss + cfg.kl_coef * masked_mean(kl_penalty(logp, ref_logp, "low_var_kl"), m_all)
    if arm == "grpo_ent":
        ent = -(logp_all.exp() * logp_all).sum(-1, keepdim=True)
        loss = loss - cfg.ent_coef * masked_mean(ent, m_all)
    return loss, logp


def _rl_step(st: _ArmRun, step: int, xb: Any, qidx: np.ndarray) -> None:
    """One RL step: a rollout batch, ``num_minibatches`` optimizer steps on it, what the controls did."""
    import torch

    cfg = st.ctx.cfg
    before = Counter(st.ctl)
    xb, acts_t, old_logp, adv, keep = _rl_batch(st, xb, qidx)
    regularised = st.arm in REGULARISED
    perm = torch.randperm(len(acts_t), generator=st.gen)
    for ix in torch.tensor_split(perm, cfg.num_minibatches):
        m = keep[ix][:, None]
        if m.sum() == 0 and not regularised:
            continue
        olp = old_logp[ix][:, None]
        loss, logp = _minibatch_loss(st, xb[ix], acts_t[ix], olp, adv[ix][:, None], m)
        st.opt.zero_grad()
        loss.backward()
        st.opt.step()
        st.ctl["abs_log_ratio"] += float(((logp.detach() - olp).abs() * m).sum())
        st.ctl["tokens"] += float(m.sum())
        st.n_updates += 1
    d = {k: st.ctl[k] - before[k] for k in ("clipfrac", "abs_log_ratio", "selected", "tokens")}
    tk = max(d["tokens"], 1.0)
    st.step_log.append({"step": step, "tokens": d["tokens"], "clip_fraction": d["clipfrac"] / tk,
                        "mean_abs_log_ratio": d["abs_log_ratio"] / tk, "selected_share": d["selected"] / tk})
    if st.arm == "grpo_sft_refresh" and step % cfg.refresh_every == 0:
        ctx = st.ctx
        t = torch.tensor(_demo_targets(ctx.x["train"].shape[0], ctx.strategies, ctx.weights, 1, st.demo_rng))
        _sft_steps(st.policy, st.opt, ctx.x["train"], t, cfg.refresh_steps)


def _arm_controls(st: _ArmRun) -> dict[str, Any]:
    """What the arm's controls did over the run (rs_sft: ``tokens`` = successful samples trained on)."""
    tok = max(st.ctl["tokens"], 1.0)
    controls: dict[str, Any] = {"updates": float(st.n_updates), "clip_fraction": st.ctl["clipfrac"] / tok,
                                "mean_abs_log_ratio": st.ctl["abs_log_ratio"] / tok,
                                "selected_share": st.ctl["selected"] / tok}
    if st.arm in ("grpo_clipcov", "grpo_klcov"):
        controls["acted"] = float(controls["selected_share"] > 0 and controls["mean_abs_log_ratio"] > 1e-4)
    controls["per_step"] = st.step_log
    return controls


def train_arm(ctx: _Ctx, arm: str, seed: int, start: Any) -> tuple[Any, list[dict[str, Any]], dict[str, Any]]:
    """Train a copy of the SFT start with one arm; returns (policy, history, control stats)."""
    import torch

    cfg = ctx.cfg
    st = _arm_run(ctx, arm, seed, start)
    x_tr, em_tr = ctx.x["train"], ctx.em["train"]
    n = x_tr.shape[0]
    P, G = cfg.prompts_per_step, cfg.group_size
    history: list[dict[str, Any]] = []

    def record(step: int) -> None:
        ps = policy_stats(st.policy, x_tr, em_tr)
        history.append({"step": step, "train_success": ps["success"], "strategy_entropy": ps["strategy_entropy"],
                        "shares": ps["shares"].tolist()})

    record(0)
    for step in range(1, cfg.steps + 1):
        qidx = np.repeat(st.rng.choice(n, size=P, replace=n < P), G)
        xb = x_tr[torch.from_numpy(qidx)]
        if arm == "sft":
            _continued_sft_step(st, xb)
        elif arm == "rs_sft":
            _rs_sft_step(st, xb, qidx)
        elif arm == "supervised":
            _supervised_step(st, xb, qidx)
        else:
            _rl_step(st, step, xb, qidx)
        if step % cfg.eval_every == 0 or step == cfg.steps:
            record(step)
    return st.policy, history, _arm_controls(st)


# --------------------------------------------------------------------------------------------------
# Statistics and the experiment


def _seed_runs(ctx: _Ctx, seed: int) -> tuple[dict[str, Any], list[tuple[dict[str, Any], list[dict[str, Any]],
                                                                         dict[str, Any]]]]:
    """One seed: its SFT start's evaluation, and (evaluation, history, controls) of every arm trained from it."""
    start, start_eval = sft_start(ctx, seed)
    runs = []
    for arm in ctx.cfg.arms:
        pol, hist, ctl = train_arm(ctx, arm, seed, start)
        runs.append((_evaluate(ctx, pol, seed), hist, ctl))
    return start_eval, runs


def mean_ci(xs: Sequence[float]) -> dict[str, Any]:
    """Mean, its 95% t-interval ``ci: [lo, hi]`` over seeds (the LM arms' form) and the interval's half-width
    ``half`` (a zero-width interval for one value)."""
    a = np.asarray(xs, dtype=np.float64)
    m = float(a.mean()) if len(a) else float("nan")
    half = 0.0
    if len(a) >= 2:
        from scipy import stats

        half = float(stats.t.ppf(0.975, len(a) - 1) * a.std(ddof=1) / math.sqrt(len(a)))
    return {"mean": m, "ci": [m - half, m + half], "half": half}


def _summary(evals: list[dict[str, Any]], splits: Sequence[str], strategies: Sequence[str]) -> dict[str, Any]:
    shift = [s for s in splits if s.startswith("shift_")]
    return {
        "seeds": len(evals),
        "strategy_entropy": mean_ci([e["train"]["strategy_entropy"] for e in evals]),
        "marginal_entropy": mean_ci([e["train"]["marginal_entropy"] for e in evals]),
        "choice_entropy": mean_ci([e["train"]["choice_entropy"] for e in evals]),
        "train_success": mean_ci([e["train"]["success"] for e in evals]),
        **({"test_success": mean_ci([e["test"]["success"] for e in evals])} if "test" in splits else {}),
        "shift_success": {s: mean_ci([e[s]["success"] for e in evals]) for s in shift},
        "shares": dict(zip(strategies, np.mean([e["train"]["shares"] for e in evals], axis=0).round(4).tolist())),
    }


def run_strategy_experiment(cfg: StrategyConfig | None = None, outcomes: Outcomes | None = None,
                            jobs: int | Executor = 1) -> dict[str, Any]:
    """SFT start + every arm x ``cfg.seeds`` seeds; per arm mean +- 95% CI over seeds of every figure.

    Returns ``{"config", "strategies", "oracle", "per_strategy", "start", "arms": {ARM: {..., "controls",
    "control_steps", "history"}}, "seeds", "seconds"}`` (``history``: per seed, train success / strategy
    entropy / shares every ``eval_every`` steps; ``control_steps``: per seed, each RL step's clip fraction,
    mean |log ratio| and share of choices Clip-Cov / KL-Cov selected). ``outcomes`` (from :func:`compute_outcomes`) skips the precompute.
    ``jobs`` > 1 (or a process pool) runs the seeds (and the outcome table's splits) in worker processes: the
    same result.
    """
    import torch

    cfg = cfg or StrategyConfig()
    cfg.check()
    from searchgym.agents.heuristics import DEFAULT_WEIGHTS

    t0 = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        out = outcomes if outcomes is not None else outcomes_for(cfg, jobs)
        missing = [s for s in cfg.splits if s not in out.em]
        if missing:
            raise ConfigError(f"outcomes lack split(s) {missing}")
        weights = dict(DEFAULT_WEIGHTS if cfg.demo_weights is None else cfg.demo_weights)
        unknown = sorted(set(weights) - set(out.strategies))
        if unknown or sum(weights.values()) <= 0 or any(v < 0 for v in weights.values()):
            raise ConfigError(f"demo_weights must be >= 0 over {list(out.strategies)} with a positive sum; "
                              f"got {weights}")
        feat = Featurizer(out.questions["train"], cfg.min_df)
        ctx = _Ctx(cfg, out.strategies, {s: feat(out.questions[s]) for s in cfg.splits},
                   {s: out.em[s] for s in cfg.splits}, weights)
        seeds = range(cfg.first_seed, cfg.first_seed + cfg.seeds)
        per_seed = ordered_map(functools.partial(_seed_runs, ctx), seeds, jobs, cfg.threads)
        start_evals = [ev for ev, _ in per_seed]
        arms: dict[str, Any] = {}
        for i, arm in enumerate(cfg.arms):
            evals, hist, ctls = (list(x) for x in zip(*(runs[i] for _, runs in per_seed)))
            summ = _summary(evals, cfg.splits, out.strategies)
            summ["controls"] = {k: float(np.mean([c[k] for c in ctls])) for k in ctls[0] if k != "per_step"}
            summ["control_steps"] = [c["per_step"] for c in ctls]  # per seed, per RL step
            if "acted" in summ["controls"]:
                summ["controls"]["acted"] = bool(summ["controls"]["acted"] == 1.0)
            summ["history"] = hist
            arms[arm] = summ
        per_strategy = {s: {sp: float(out.em[sp][:, j].mean()) for sp in cfg.splits}
                        for j, s in enumerate(out.strategies)}
        oracle = {sp: float(out.em[sp].max(1).mean()) for sp in cfg.splits}
        demo = np.array([weights.get(s, 0.0) for s in out.strategies])
        demo = demo / demo.sum()
        return {"config": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(cfg).items()},
                "strategies": list(out.strategies), "demo_distribution": dict(zip(out.strategies, demo.tolist())),
                "features": feat.dim, "per_strategy": per_strategy, "oracle": oracle,
                "start": _summary(start_evals, cfg.splits, out.strategies), "arms": arms, "seeds": cfg.seeds,
                "outcome_seconds": out.seconds, "seconds": time.perf_counter() - t0}
    finally:
        torch.set_num_threads(threads)


def with_overrides(cfg: StrategyConfig, **kw: Any) -> StrategyConfig:
    unknown = sorted(set(kw) - set(asdict(cfg)))
    if unknown:
        raise ConfigError(f"unknown StrategyConfig field(s) {unknown}")
    return replace(cfg, **kw)


__all__ = [
    "ALL_ARMS",
    "ARMS",
    "EVAL_SPLITS",
    "EVAL_SPLITS_V3",
    "EXTRA_ARMS",
    "Featurizer",
    "Outcomes",
    "StrategyConfig",
    "best_labels",
    "compute_outcomes",
    "eval_splits",
    "mean_ci",
    "policy_stats",
    "run_strategy_experiment",
    "with_overrides",
]
