"""The squeeze experiment's stages: the shared :class:`Context` (world, retriever, envs), demonstrations,
the SFT warm start, the arms (RL and continued SFT) and the evaluation of a model on the train pool and the
shift splits. :mod:`searchgym.experiments.squeeze.experiment` runs them in order."""

from __future__ import annotations

import json
import math
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.experiments.squeeze.config import HELDOUT_SPLITS, TINY_PROMPT, SqueezeConfig


# ------------------------------------------------------------------------------------------------ helpers
def _write_json(path: Path, obj: Any) -> None:
    from searchgym.train.checkpoint import atomic_write_text

    atomic_write_text(path, json.dumps(obj, indent=1, default=_json_default))


def _json_default(x: Any) -> Any:
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    if isinstance(x, Path):
        return str(x)
    return str(x)


def _read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut by a kill
    return out


class Context:
    """What every stage shares: the world, retriever, env factory and config."""

    def __init__(self, cfg: SqueezeConfig, log: Callable[[str], None]):
        from searchgym.data import World
        from searchgym.retrieval import CachedRetriever, build_retriever

        self.cfg = cfg
        self.log = log
        self.out = Path(cfg.out)
        self.world = World.generate(seed=cfg.world_seed, n_entities=cfg.n_entities, version=cfg.world_version)
        self.retriever = CachedRetriever(build_retriever(self.world.passages, kind="bm25"))
        self.prompt = TINY_PROMPT if cfg.model is None else "search_r1"

    def write_meta(self, model_dir: Path) -> None:
        """Save the prompt and env settings next to a model, for ``searchgym rollout --agent MODEL_DIR``."""
        from searchgym.train.model_meta import write_prompt_meta

        c = self.cfg
        write_prompt_meta(model_dir, self.prompt, max_turns=c.max_turns, top_k=c.top_k,
                          passage_chars=c.passage_chars)

    def save_model(self, model: Any, tok: Any, model_dir: Path) -> None:
        """Save model, tokenizer and prompt settings to ``model_dir`` atomically (a temp dir renamed into place)."""
        import os
        import shutil

        tmp = model_dir.with_name(f".{model_dir.name}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        self.write_meta(tmp)
        shutil.rmtree(model_dir, ignore_errors=True)
        os.replace(tmp, model_dir)

    def envs(self, n: int, split: str = "train") -> list[Any]:
        from searchgym.envs.env import SearchEnv

        c = self.cfg
        return [SearchEnv(dataset=self.world.split(split), retriever=self.retriever, split=split,
                          top_k=c.top_k, max_turns=c.max_turns, prompt_template=self.prompt,
                          passage_chars=c.passage_chars) for _ in range(n)]


# ------------------------------------------------------------------------------------------------ stages
def make_demos(ctx: Context, tokenizer: Any, passes: int, seed: int, questions: list[int] | None = None
               ) -> tuple[list[Any], dict[str, Any]]:
    """Diverse-agent demonstrations on every train question (or on ``questions``, indices into the train split),
    ``passes`` times with different seeds; the stats include ``demo_share``: the share of the KEPT
    demonstrations (the SFT data) per heuristic strategy."""
    from searchgym.agents.heuristics import DiverseAgent
    from searchgym.agents.reader import Reader
    from searchgym.train.rollout import AgentPolicy, run_episodes

    idx = list(range(len(ctx.world.split("train")))) if questions is None else questions
    envs = ctx.envs(len(idx))
    episodes = []
    strategy: list[str] = []
    reader = Reader(ctx.world)
    for p in range(passes):
        agent = DiverseAgent(seed=seed * 1000 + p, think=False, reader=reader, max_searches=ctx.cfg.max_turns)
        eps = run_episodes(AgentPolicy(agent, tokenizer), envs, [None] * len(envs),
                           options=[{"index": i} for i in idx], agent_name="diverse")
        episodes.extend(eps)
        # env i ran one episode this pass; the agent's slot i still holds the strategy it drew for it
        strategy += [(agent.state(i).strategy.name if agent.state(i) is not None else "?") for i in range(len(eps))]
    stats: dict[str, Any] = {"demos": len(episodes), "demo_em": float(np.mean([e.em for e in episodes]))}
    if ctx.cfg.demo_success_only:
        good = [i for i, e in enumerate(episodes) if e.em > 0]
        if len(good) >= 32:
            episodes = [episodes[i] for i in good]
            strategy = [strategy[i] for i in good]
    stats["demos_kept"] = len(episodes)
    counts = Counter(strategy)
    stats["demo_share"] = {s: counts[s] / max(1, len(strategy)) for s in sorted(counts)}
    return episodes, stats


def pretrain_stage(ctx: Context, model: Any, tok: Any, pre_dir: Path) -> dict[str, Any]:
    """Causal-LM pretraining of the tiny LM on the world (resumable); the result goes to ``pre_dir/model``
    (atomically). Returns the stage's record for ``stages.json``."""
    from searchgym.train.pretrain import pretrain_texts, train_pretrain

    cfg, log = ctx.cfg, ctx.log
    t0 = time.time()
    last = {"t": time.time()}

    def plog(row: dict[str, float]) -> None:
        if row["step"] % 50 == 0 or time.time() - last["t"] > 10:
            last["t"] = time.time()
            log(f"      pretrain step {int(row['step'])}  LM loss {row['losses/lm']:.3f}")

    hist = train_pretrain(model, tok, pretrain_texts(ctx.world, TINY_PROMPT, cfg.pretrain.qa), replace(cfg.pretrain, device=cfg.device),
                          out_dir=pre_dir, resume=cfg.resume, log=plog)
    ctx.save_model(model, tok, pre_dir / "model")
    log(f"      pretraining {len(hist)} steps, LM loss {hist[0]['losses/lm']:.3f} -> {hist[-1]['losses/lm']:.3f} "
        f"({time.time() - t0:.1f}s)")
    return {"steps": len(hist), "first_loss": hist[0]["losses/lm"], "final_loss": hist[-1]["losses/lm"],
            "time_s": time.time() - t0}


def warm_start(ctx: Context, model: Any, tok: Any, sft_dir: Path) -> dict[str, Any]:
    """Record the diverse agent's demonstrations and SFT ``model`` on them (resumable); the result goes to
    ``sft_dir/model`` (atomically). Returns the stage's record for ``stages.json``."""
    from searchgym.train.sft import train_sft
    from searchgym.trajectory import write_trajectories

    cfg, log = ctx.cfg, ctx.log
    t0 = time.time()
    demos, dstats = make_demos(ctx, tok, cfg.demo_passes, seed=0)
    log(f"      {dstats['demos']} demos, EM {dstats['demo_em']:.3f}, kept {dstats['demos_kept']} "
        f"({time.time() - t0:.1f}s)")
    sft_dir.mkdir(parents=True, exist_ok=True)
    write_trajectories(sft_dir / "demos.jsonl", [e.trajectory for e in demos])
    t0 = time.time()
    last = {"t": time.time()}

    def sft_log(row: dict[str, float]) -> None:
        if row["step"] % 20 == 0 or time.time() - last["t"] > 10:
            last["t"] = time.time()
            log(f"      sft step {int(row['step'])}  loss {row['losses/sft']:.3f}")

    hist = train_sft(model, tok, demos, replace(cfg.sft, seed=0, device=cfg.device), out_dir=sft_dir,
                     resume=cfg.resume, log=sft_log)
    ctx.save_model(model, tok, sft_dir / "model")
    log(f"      SFT {len(hist)} steps, loss {hist[0]['losses/sft']:.3f} -> {hist[-1]['losses/sft']:.3f} "
        f"({time.time() - t0:.1f}s)")
    return {**dstats, "steps": len(hist), "final_loss": hist[-1]["losses/sft"], "time_s": time.time() - t0}


def split_seed(split: str) -> int:
    """A stable seed from a split's NAME (CRC-32): two splits of one size must not draw one permutation."""
    import zlib

    return zlib.crc32(split.encode("utf-8"))


def question_pool(ctx: Context, split: str, n: int) -> list[int]:
    """A fixed subset of a split's question indices (the train pool is what the arms train and are evaluated
    on; the shift pools are only evaluated)."""
    exs = ctx.world.split(split)
    perm = np.random.default_rng([ctx.cfg.world_seed, 99, split_seed(split)]).permutation(len(exs))
    return [int(i) for i in perm[:min(n, len(exs))]]


def train_pool(ctx: Context) -> list[int]:
    """The questions RL trains on (and continued SFT is tracked on): the whole train split, in a fixed order; the
    train-split evaluation uses its first ``eval_questions``."""
    return question_pool(ctx, "train", len(ctx.world.split("train")))


def sample_questions(ctx: Context, policy: Any, envs: list[Any], questions: list[int], k: int, name: str) -> list[Any]:
    """``k`` episodes of ``policy`` on each of ``questions`` (indices into the envs' split), using the first
    ``len(questions) * k`` of ``envs``; episode ``i`` answers ``questions[i // k]`` and has group ``i // k``."""
    from searchgym.train.rollout import run_episodes

    c = ctx.cfg
    m = len(questions) * k
    return run_episodes(policy, envs[:m], [None] * m, options=[{"index": questions[i // k]} for i in range(m)],
                        groups=[i // k for i in range(m)], max_context=c.rl.max_context,
                        max_new_tokens=c.rl.max_new_tokens, agent_name=name)


RAREFY_N = 128  # queries behind the rarefied plug-in strategy entropy: one n for every arm and split


def strategy_entropies(episodes: list[Any], groups: list[int], templater: Any, *, seed: int,
                       n: int = RAREFY_N, draws: int = 50, labels: Any = None) -> dict[str, Any]:
    """The two strategy-entropy quantities under distinct names (issue 21 §6), from the analysis core's
    per-query strategy classes: ``strategy_entropy_rarefied`` (plug-in entropy of the classes pooled over
    episodes, rarefied: the mean over ``draws`` subsamples of ``n`` queries without replacement, so arms whose
    episodes issue different numbers of queries compare) and ``strategy_entropy_per_question`` (the plug-in
    entropy of each question's own samples' classes, averaged over questions)."""
    from searchgym.diversity.core import label_episodes

    lab = labels or label_episodes(episodes, templater=templater, levels=("slot",), group_by_step=False)
    labels = np.asarray(lab.strategy)

    def h(xs: np.ndarray) -> float:
        _, c = np.unique(xs, return_counts=True)
        p = c / c.sum()
        return float(-(p * np.log(p)).sum())

    out: dict[str, Any] = {"strategy_entropy_rarefied": None, "strategy_entropy_per_question": None,
                           "rarefy_n": n}
    if len(labels) >= n:
        rng = np.random.default_rng([seed, n, 5])
        out["strategy_entropy_rarefied"] = float(np.mean([h(rng.choice(labels, n, replace=False))
                                                          for _ in range(draws)]))
    by_q: dict[int, list[str]] = defaultdict(list)
    for q, e in zip(lab.strategy, lab.ep_of):
        by_q[groups[e]].append(q)
    if by_q:
        out["strategy_entropy_per_question"] = float(np.mean([h(np.asarray(v)) for v in by_q.values()]))
    return out


def evaluate(ctx: Context, model: Any, tokenizer: Any, *, seed: int, name: str,
             out_dir: Path | None = None) -> dict[str, Any]:
    """Sample ``eval_samples`` episodes per question on the train split (a fixed subset), the unseen test
    questions and each shift split (equal numbers of questions for the held-out splits);
    returns success, pass@k, success per family, template entropy (slot/string), token entropy."""
    import torch

    from searchgym.diversity import Templater, mean_pass_at_k
    from searchgym.diversity.core import analyze_episodes, episode_from_trajectory, label_episodes
    from searchgym.experiments.squeeze.endpoints import RENAME_SPLITS, split_measures
    from searchgym.train.rollout import LMPolicy
    from searchgym.trajectory import write_trajectories

    c = ctx.cfg
    k = c.eval_samples
    res: dict[str, Any] = {"name": name, "k": k}
    templater = Templater(ctx.world.titles)
    all_trajs = []
    heldout = [s for s in HELDOUT_SPLITS if s in ctx.world.splits]
    # every held-out split (test and the shifts) at the same number of questions, so their figures compare
    n_heldout = min([c.eval_shift_questions, *(len(ctx.world.split(s)) for s in heldout)])
    for split in ("train", *heldout):
        exs = ctx.world.split(split)
        nq = min(len(exs), c.eval_questions) if split == "train" else n_heldout
        idx = question_pool(ctx, split, nq)
        envs = ctx.envs(nq * k, split)
        gen = torch.Generator(device=c.device).manual_seed(seed * 7919 + split_seed(split))
        pol = LMPolicy(model, tokenizer, temperature=c.eval_temperature, max_new_tokens=c.rl.max_new_tokens,
                       device=c.device, generator=gen)
        eps = sample_questions(ctx, pol, envs, idx, k, name)
        per_q: dict[int, list[float]] = defaultdict(list)
        fam: dict[str, list[float]] = defaultdict(list)
        for e in eps:
            per_q[e.group].append(e.em)
            fam[str(e.info.get("family") or e.trajectory.family)].append(e.em)
        pairs = [(len(v), int(sum(v))) for v in per_q.values()]
        # the one analysis core (the tracker's and `searchgym analyze`'s), over this split's samples
        st = analyze_episodes([episode_from_trajectory(e.trajectory) for e in eps], templater=templater,
                              levels=("string", "slot"), group_by_step=False, n_boot=0, with_series=False,
                              token_entropies=[x for e in eps for x, mm in zip(e.entropies, e.mask) if mm],
                              rewards=[e.reward for e in eps])
        slot, string = st.levels.get("slot"), st.levels.get("string")
        d_eps = [episode_from_trajectory(e.trajectory) for e in eps]
        lab = label_episodes(d_eps, templater=templater, levels=("slot",), group_by_step=False)
        ent2 = strategy_entropies(d_eps, [e.group for e in eps], templater, seed=seed, labels=lab)
        ent2.update(split_measures(d_eps, templater, seed=seed, labels=lab,  # issue 31's endpoints
                                   examples=[exs[idx[e.group]] for e in eps] if split in RENAME_SPLITS else None))
        res[split] = {
            "success": float(np.mean([e.em for e in eps])),
            "f1": float(np.mean([e.f1 for e in eps])),
            "pass_at_k": {str(j): mean_pass_at_k(pairs, j) for j in range(1, k + 1)},
            "per_family": {f: float(np.mean(v)) for f, v in sorted(fam.items())},
            "slot_entropy": slot.entropy if slot else None,
            "slot_effective_number": slot.effective_number if slot else None,
            "string_entropy": string.entropy if string else None,
            "slot_top1_mass": slot.top1_mass if slot else None,
            "queries_per_episode": st.process.queries_per_episode,
            "token_entropy": st.policy.get("token_entropy_mean"),
            "diversity": st.compact(),
            **ent2,
            "answered": float(np.mean([e.trajectory.prediction is not None for e in eps])),
            "episodes": len(eps),
            "questions": len(idx),
        }
        for t in (e.trajectory for e in eps):
            t.split = split
            all_trajs.append(t)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        write_trajectories(out_dir / "eval_trajectories.jsonl", all_trajs)
        _write_json(out_dir / "eval.json", res)
    return res


def _n(x: Any, nd: int = 3) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def _tracker_extra(metrics: dict[str, float]) -> dict[str, float]:
    keep = ("diversity/slot/entropy", "diversity/slot/effective_number", "diversity/string/entropy",
            "diversity/slot/top1_mass", "diversity/moves/entropy", "diversity/process/queries_per_episode",
            "diversity/grounded_share", "diversity/question_copy_rate", "diversity/well_formed/slot/entropy",
            "diversity/slot/mi_question",
            "alarm/collapse")
    return {k: float(metrics[k]) for k in keep if k in metrics and metrics[k] is not None
            and not (isinstance(metrics[k], float) and math.isnan(metrics[k]))}


def run_rl_arm(ctx: Context, arm: str, seed: int, start_dir: Path, out_dir: Path) -> list[dict]:
    from searchgym.diversity import DiversityTracker
    from searchgym.train.rl import step_seeds, train_rl
    from searchgym.train.tiny_lm import load_lm

    c = ctx.cfg
    args = ctx.cfg.arm_args(arm, seed)
    model, tok = load_lm(start_dir, device=c.device)
    n = args.prompts_per_step * args.group_size
    envs = ctx.envs(n)
    pool = train_pool(ctx)
    tracker = DiversityTracker(levels=("string", "slot"), log_dir=out_dir, titles=ctx.world.titles,
                               tensorboard=False)

    def questions(step: int) -> list[tuple[int | None, dict | None]]:
        # same questions for every arm at a given (seed, step): arms differ only in the update
        return [(None, {"index": pool[s % len(pool)]}) for s in step_seeds(seed, step, args.prompts_per_step)]

    def on_rollouts(step: int, episodes: list[Any], row: dict[str, float]) -> dict[str, float]:
        ents = [x for e in episodes for x, m in zip(e.entropies, e.mask) if m]
        m = tracker.update(step, [e.trajectory for e in episodes], token_entropies=ents,
                           rewards=[e.reward for e in episodes])
        return _tracker_extra(m)

    def log(row: dict[str, float]) -> None:
        ctx.log(f"  [{arm} s{seed}] step {int(row['step']):3d}  reward {row['charts/reward']:.3f}  "
                f"tok-H {row['charts/token_entropy']:.3f}  slot-H {_n(row.get('diversity/slot/entropy'))}"
                f"  ({row['charts/time_rollout'] + row['charts/time_update']:.1f}s)")

    shape = None
    if arm == "grpo_darling":  # DARLING: quality x distinctness of the episode's query templates in its group
        from searchgym.diversity import Templater
        from searchgym.train.shaping import darling_rewards, query_classes

        templater = Templater(ctx.world.titles)

        def shape(step: int, episodes: list[Any], rewards: list[float]) -> list[float]:
            return darling_rewards(rewards, query_classes([e.trajectory for e in episodes], templater),
                                   args.group_size)

    if arm == "grpo_count":  # UCB-style bonus on rarely used query-template sequences per question
        from searchgym.diversity import Templater
        from searchgym.train.shaping import TemplateCountShaper

        shape = TemplateCountShaper(Templater(ctx.world.titles), c.count_coef)
    shape = _control_shaper(ctx, arm, seed, out_dir) or shape
    refresh = None
    if arm == "grpo_sft_refresh":
        refresh = sft_refresh(ctx, tok, seed)
    refine = None
    if arm == "grpo_critique":
        from searchgym.experiments.squeeze.critique import critique_refiner

        refine = critique_refiner(ctx.world.split("train"))
    hist = train_rl(model, tok, envs, args, out_dir=out_dir, resume=c.resume, questions=questions,
                    on_rollouts=on_rollouts, log=log, shape_rewards=shape, after_update=refresh, refine=refine)
    tracker.close()
    ctx.save_model(model, tok, out_dir / "final_model")
    return hist


def _control_shaper(ctx: Context, arm: str, seed: int, out_dir: Path) -> Callable[..., list[float]] | None:
    """The reward transformation of the GRPO controls (controls.py): shuffled rewards, the one-template reward."""
    from searchgym.experiments.squeeze import controls

    if arm == "grpo_shuffled":
        return controls.shuffled_rewards(seed)
    if arm == "grpo_positive":
        from searchgym.diversity import Templater

        return controls.OneTemplateReward(Templater(ctx.world.titles), out_dir)
    return None


def arm_demos(ctx: Context, tokenizer: Any, seed: int) -> list[Any]:
    """The fresh demonstrations of an arm that trains on them (continued SFT, the SFT refresh, KL-matched SFT):
    ``arm_demo_passes`` passes over the train questions, or over a fixed subset of ``arm_demo_questions``."""
    c = ctx.cfg
    qs = question_pool(ctx, "train", c.arm_demo_questions) if c.arm_demo_questions else None
    return make_demos(ctx, tokenizer, max(1, c.arm_demo_passes or c.demo_passes), seed=seed, questions=qs)[0]


def continued_sft_args(c: SqueezeConfig) -> Any:
    """The warm start's SFT recipe continued: its loss mix and batch, at the learning rate it ended with,
    constant, no second warm-up (the continued-SFT arm and the periodic SFT refresh)."""
    s = c.sft
    return replace(s, learning_rate=s.learning_rate * s.final_lr_ratio, final_lr_ratio=1.0, warmup_steps=1,
                   device=c.device)


def sft_refresh(ctx: Context, tok: Any, seed: int) -> Callable[[int, Any, Any], dict[str, float] | None]:
    """The periodic-SFT-refresh hook: every ``refresh_every`` RL steps, ``refresh_steps`` SFT steps on fresh
    diverse demonstrations through the RL optimizer (so its state is checkpointed and resume stays exact), at the
    warm start's learning rate and loss mix; the batches are a function of (seed, step)."""
    import torch

    from searchgym.train.sft import sft_backward

    c = ctx.cfg
    demos = [e for e in arm_demos(ctx, tok, 2000 + seed) if sum(e.mask) > 0]
    sargs = continued_sft_args(c)
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0

    def hook(step: int, model: Any, opt: Any) -> dict[str, float] | None:
        if (step + 1) % c.refresh_every:
            return None
        rng = np.random.default_rng([seed, step, 23])
        rl_lrs = [g["lr"] for g in opt.param_groups]
        losses = []
        model.train()
        for g in opt.param_groups:
            g["lr"] = sargs.learning_rate
        for _ in range(c.refresh_steps):
            idx = rng.choice(len(demos), size=min(sargs.batch_size, len(demos)), replace=False)
            opt.zero_grad(set_to_none=True)
            losses.append(sft_backward(model, [demos[int(i)] for i in idx], sargs, pad))
            torch.nn.utils.clip_grad_norm_(model.parameters(), sargs.max_grad_norm)
            opt.step()
        for g, lr in zip(opt.param_groups, rl_lrs):
            g["lr"] = lr
        return {"losses/sft_refresh": float(np.mean(losses)), "charts/sft_refresh_steps": float(c.refresh_steps)}

    return hook


def run_sft_arm(ctx: Context, seed: int, start_dir: Path, out_dir: Path) -> list[dict]:
    """Continued SFT on fresh diverse demonstrations; every ``cfg.sft_steps_per_step()`` optimizer steps the
    current policy is sampled on the same questions the RL arms see, and those rollouts feed the tracker."""
    import torch

    from searchgym.diversity import DiversityTracker
    from searchgym.experiments.squeeze.controls import kl_to_start
    from searchgym.train.rl import _torch_gen, step_seeds
    from searchgym.train.rollout import LMPolicy, run_episodes
    from searchgym.train.sft import train_sft
    from searchgym.train.tiny_lm import load_lm

    c = ctx.cfg
    rl = c.rl
    model, tok = load_lm(start_dir, device=c.device)
    demos = arm_demos(ctx, tok, 1000 + seed)
    n = rl.prompts_per_step * rl.group_size
    envs = ctx.envs(n)
    pool = train_pool(ctx)
    tracker = DiversityTracker(levels=("string", "slot"), log_dir=out_dir, titles=ctx.world.titles,
                               tensorboard=False)
    k = c.sft_steps_per_step()
    G = rl.group_size
    ref, _ = load_lm(start_dir, device=c.device)  # the SFT start: the KL of the tracked rollouts to it
    ref.eval().requires_grad_(False)
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0

    def track(opt_step: int) -> dict[str, float]:
        step = opt_step // k  # tracked step number, aligned with the RL arms' steps
        qs = [(None, {"index": pool[s % len(pool)]}) for s in step_seeds(seed, step - 1, rl.prompts_per_step)]
        t0 = time.time()
        pol = LMPolicy(model, tok, temperature=rl.temperature, max_new_tokens=rl.max_new_tokens, device=c.device,
                       generator=_torch_gen(seed, step - 1, 1, c.device))
        with torch.no_grad():
            eps = run_episodes(pol, envs, [None] * n, options=[qs[i // G][1] for i in range(n)],
                               groups=[i // G for i in range(n)], max_context=rl.max_context,
                               max_new_tokens=rl.max_new_tokens, agent_name="sft", policy_step=step)
        model.train()
        ents = [x for e in eps for x, m in zip(e.entropies, e.mask) if m]
        m = tracker.update(step, [e.trajectory for e in eps], token_entropies=ents)
        row = {"charts/reward": float(np.mean([e.reward for e in eps])),
               "charts/em": float(np.mean([e.em for e in eps])),
               "charts/token_entropy": float(np.mean(ents)) if ents else 0.0,
               "charts/time_rollout": time.time() - t0, "charts/tracked_step": float(step)}
        kl = kl_to_start(ref, eps, pad, c.device, rl.temperature)
        if kl is not None:
            row["charts/kl_to_start"] = kl
        row.update(_tracker_extra(m))
        ctx.log(f"  [sft s{seed}] step {step:3d}  reward {row['charts/reward']:.3f}  "
                f"tok-H {row['charts/token_entropy']:.3f}  slot-H {_n(row.get('diversity/slot/entropy'))}")
        return row

    # the warm start's recipe (learning rate, loss mix, batch) continued without a second warm-up, for as many
    # optimizer steps as an RL arm takes (k per rollout batch)
    args = replace(continued_sft_args(c), seed=seed, max_steps=rl.total_steps * k, log_every=k,
                   checkpoint_every=max(k, 10))
    hist = train_sft(model, tok, demos, args, out_dir=out_dir, resume=c.resume, eval_fn=track)
    tracker.close()
    ctx.save_model(model, tok, out_dir / "final_model")
    # rows in the RL arms' shape: one per tracked step
    rows = []
    for r in hist:
        if "charts/tracked_step" in r:
            rr = dict(r)
            rr["step"] = int(r["charts/tracked_step"])
            rows.append(rr)
    return rows

