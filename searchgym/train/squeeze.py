"""``searchgym squeeze``: does RL squeeze a search agent's query strategies more than SFT does?

The experiment, end to end on the embedded world (CPU, minutes) or with any HF causal LM (GPU):

1. build the procedural world and its BM25 index;
2. train a tokenizer and a tiny LM on the world (or load ``--model``);
3. record demonstrations from the ``diverse`` heuristic agent (a seeded mix of query strategies) against the
   real environment, keep the successful ones, and warm-start the LM with SFT on them;
4. from that checkpoint run the arms, each with >= 1 seed: continued SFT on fresh diverse demonstrations,
   GRPO, GRPO + KL-Cov (and GRPO + Clip-Cov, GRPO + entropy bonus in the default budget). Every arm's
   rollouts feed a ``DiversityTracker``;
5. evaluate the SFT start and every arm on the train split and the shift splits (k samples per question:
   success, pass@k, success per family, query-template entropy);
6. write ``report.md`` / ``report.html`` with plots, and ``summary.json`` with the headline numbers
   (:func:`headline` turns it into the README's markdown).

Every stage writes its outputs atomically and is skipped by ``--resume`` when done; an RL or SFT arm that was
interrupted continues from its last checkpoint.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.errors import ConfigError
from searchgym.train.rl import RLArgs
from searchgym.train.sft import SFTArgs
from searchgym.train.tiny_lm import TinyLMConfig

SHIFT_SPLITS = ("shift_phrasing", "shift_family", "shift_type")
TINY_PROMPT = "Question: {question}\n"
ARM_LABELS = {
    "sft": "SFT (continued, diverse demos)",
    "grpo": "GRPO",
    "grpo_klcov": "GRPO + KL-Cov",
    "grpo_clipcov": "GRPO + Clip-Cov",
    "grpo_ent": "GRPO + entropy bonus",
    "rloo": "RLOO",
    "ppo": "PPO-clip",
}


@dataclass
class SqueezeConfig:
    out: str = "runs/squeeze"             # output directory
    quick: bool = False                   # the <= 3 minute version
    seeds: int = 2                        # seeds per arm
    arms: tuple[str, ...] = ("sft", "grpo", "grpo_klcov", "grpo_clipcov", "grpo_ent")
    model: str | None = None              # HF model name/path; None = train a tiny LM on the world
    device: str = "cpu"                   # cpu | cuda
    threads: int | None = None            # torch intra-op threads (None: 1 for the tiny LM on CPU, where more
    #                                       threads gain little and lose a lot on a busy machine; else torch's)
    world_seed: int = 0                   # seed of the procedural world
    n_entities: int = 400                 # world size
    max_turns: int = 2                    # searches per episode
    top_k: int = 3                        # passages per search
    passage_chars: int = 90               # observation budget per passage (characters)
    demo_passes: int = 4                  # diverse-agent passes over the train questions (different strategies)
    demo_success_only: bool = True        # SFT on successful demonstrations only (rejection sampling)
    tiny: TinyLMConfig = field(default_factory=lambda: TinyLMConfig(vocab_size=2048, hidden_size=128,
                                                                    num_layers=3, num_heads=4,
                                                                    intermediate_size=384))
    sft: SFTArgs = field(default_factory=lambda: SFTArgs(learning_rate=3e-3, max_steps=500, batch_size=16,
                                                         micro_batch_size=16, warmup_steps=20,
                                                         context_loss_weight=0.5))
    rl: RLArgs = field(default_factory=lambda: RLArgs(total_steps=40, prompts_per_step=8, group_size=8,
                                                      learning_rate=2e-4, max_new_tokens=20,
                                                      micro_batch_size=32, checkpoint_every=10,
                                                      max_context=1024))
    sft_arm_steps_per_step: int = 1       # continued-SFT optimizer steps per tracked step (batch 32 episodes)
    kl_cov_ratio: float = 2e-3            # KL-Cov k (released 7B script: k_percent 0.2 = 2e-3)
    clip_cov_ratio: float = 2e-4          # Clip-Cov r (released default)
    ent_coef: float = 0.01                # entropy-bonus arm coefficient
    eval_questions: int = 64              # train-split questions: the RL/tracking question pool, evaluated per model
    eval_shift_questions: int = 32        # questions per shift split
    eval_samples: int = 8                 # samples per question (pass@k up to this k)
    eval_temperature: float = 1.0         # sampling temperature for evaluation
    resume: bool = False                  # skip finished stages, continue interrupted arms

    @classmethod
    def preset(cls, quick: bool = False, **overrides: Any) -> SqueezeConfig:
        if quick:
            base = cls(quick=True, seeds=1, arms=("sft", "grpo", "grpo_klcov"), n_entities=300, demo_passes=4,
                       passage_chars=90,
                       tiny=TinyLMConfig(vocab_size=1536, hidden_size=96, num_layers=3, num_heads=3,
                                         intermediate_size=288, max_positions=768),
                       sft=SFTArgs(learning_rate=3e-3, max_steps=140, batch_size=16, micro_batch_size=16,
                                   warmup_steps=10, context_loss_weight=0.5),
                       rl=RLArgs(total_steps=18, prompts_per_step=8, group_size=8, learning_rate=3e-4,
                                 max_new_tokens=20, micro_batch_size=32, checkpoint_every=10, max_context=768),
                       eval_questions=32, eval_shift_questions=12, eval_samples=4)
        else:
            base = cls()
        for k, v in overrides.items():
            if v is None:
                continue
            if not hasattr(base, k):
                raise ConfigError(f"unknown squeeze option {k!r}")
            setattr(base, k, v)
        return base

    def validate(self) -> None:
        bad = [a for a in self.arms if a not in ARM_LABELS]
        if bad:
            raise ConfigError(f"unknown arm(s) {bad}; choose from {sorted(ARM_LABELS)}")
        if self.seeds < 1:
            raise ConfigError("seeds must be >= 1")
        if self.eval_samples < 1:
            raise ConfigError("eval_samples must be >= 1")
        self.rl.validate()
        self.sft.validate()

    def arm_args(self, arm: str, seed: int) -> RLArgs:
        base = replace(self.rl, seed=seed, device=self.device)
        if arm == "grpo":
            return base
        if arm == "grpo_klcov":
            return replace(base, policy_loss="kl_cov", kl_cov_ratio=self.kl_cov_ratio, kl_cov_coef=1.0)
        if arm == "grpo_clipcov":  # released scripts: PPO clip ranges 1 (ratio clamped to [0, 2])
            return replace(base, policy_loss="clip_cov", clip_cov_ratio=self.clip_cov_ratio, clip_low=1.0,
                           clip_high=1.0)
        if arm == "grpo_ent":
            return replace(base, ent_coef=self.ent_coef)
        if arm == "rloo":
            return replace(base, algo="rloo")
        if arm == "ppo":
            return replace(base, algo="ppo", group_size=1,
                           prompts_per_step=base.prompts_per_step * base.group_size, update_epochs=2,
                           num_minibatches=2)
        raise ConfigError(f"arm {arm!r} is not an RL arm")


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
        self.world = World.generate(seed=cfg.world_seed, n_entities=cfg.n_entities)
        self.retriever = CachedRetriever(build_retriever(self.world.passages, kind="bm25"))
        self.prompt = TINY_PROMPT if cfg.model is None else "search_r1"

    def write_meta(self, model_dir: Path) -> None:
        """Save the prompt and env settings next to a model, for ``searchgym rollout --agent MODEL_DIR``."""
        from searchgym.train.model_meta import write_prompt_meta

        c = self.cfg
        write_prompt_meta(model_dir, self.prompt, max_turns=c.max_turns, top_k=c.top_k,
                          passage_chars=c.passage_chars)

    def envs(self, n: int, split: str = "train") -> list[Any]:
        from searchgym.envs.env import SearchEnv

        c = self.cfg
        return [SearchEnv(dataset=self.world.split(split), retriever=self.retriever, split=split,
                          top_k=c.top_k, max_turns=c.max_turns, prompt_template=self.prompt,
                          passage_chars=c.passage_chars) for _ in range(n)]


# ------------------------------------------------------------------------------------------------ stages
def make_demos(ctx: Context, tokenizer: Any, passes: int, seed: int) -> tuple[list[Any], dict[str, float]]:
    """Diverse-agent demonstrations on every train question, ``passes`` times with different seeds."""
    from searchgym.agents.heuristics import DiverseAgent
    from searchgym.agents.reader import Reader
    from searchgym.train.rollout import AgentPolicy, run_episodes

    train = ctx.world.split("train")
    envs = ctx.envs(len(train))
    episodes = []
    reader = Reader(ctx.world)
    for p in range(passes):
        agent = DiverseAgent(seed=seed * 1000 + p, think=False, reader=reader, max_searches=ctx.cfg.max_turns)
        eps = run_episodes(AgentPolicy(agent, tokenizer), envs, [None] * len(envs),
                           options=[{"index": i} for i in range(len(envs))], agent_name="diverse")
        episodes.extend(eps)
    stats = {"demos": len(episodes), "demo_em": float(np.mean([e.em for e in episodes]))}
    if ctx.cfg.demo_success_only:
        good = [e for e in episodes if e.em > 0]
        if len(good) >= 32:
            episodes = good
    stats["demos_kept"] = len(episodes)
    return episodes, stats


def question_pool(ctx: Context, split: str, n: int) -> list[int]:
    """A fixed subset of a split's question indices (the train pool is what the arms train and are evaluated
    on; the shift pools are only evaluated)."""
    exs = ctx.world.split(split)
    perm = np.random.default_rng([ctx.cfg.world_seed, 99, len(split)]).permutation(len(exs))
    return [int(i) for i in perm[:min(n, len(exs))]]


def evaluate(ctx: Context, model: Any, tokenizer: Any, *, seed: int, name: str,
             out_dir: Path | None = None) -> dict[str, Any]:
    """Sample ``eval_samples`` episodes per question on the train split (a fixed subset) and each shift split;
    returns success, pass@k, success per family, template entropy (slot/string), token entropy."""
    import torch

    from searchgym.diversity import Templater, mean_pass_at_k
    from searchgym.diversity.core import analyze_episodes, episode_from_trajectory
    from searchgym.train.rollout import LMPolicy, run_episodes
    from searchgym.trajectory import write_trajectories

    c = ctx.cfg
    k = c.eval_samples
    res: dict[str, Any] = {"name": name, "k": k}
    templater = Templater(ctx.world.titles)
    all_trajs = []
    for split in ("train", *SHIFT_SPLITS):
        exs = ctx.world.split(split)
        nq = min(len(exs), c.eval_questions if split == "train" else c.eval_shift_questions)
        idx = question_pool(ctx, split, nq)
        envs = ctx.envs(nq * k, split)
        gen = torch.Generator(device=c.device).manual_seed(seed * 7919 + len(split))
        pol = LMPolicy(model, tokenizer, temperature=c.eval_temperature, max_new_tokens=c.rl.max_new_tokens,
                       device=c.device, generator=gen)
        eps = run_episodes(pol, envs, [None] * len(envs), options=[{"index": idx[i // k]} for i in range(len(envs))],
                           groups=[i // k for i in range(len(envs))], max_context=c.rl.max_context,
                           max_new_tokens=c.rl.max_new_tokens, agent_name=name)
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
            "answered": float(np.mean([e.trajectory.prediction is not None for e in eps])),
            "episodes": len(eps),
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
    pool = question_pool(ctx, "train", c.eval_questions)
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

    hist = train_rl(model, tok, envs, args, out_dir=out_dir, resume=c.resume, questions=questions,
                    on_rollouts=on_rollouts, log=log)
    tracker.close()
    model.save_pretrained(out_dir / "final_model")
    tok.save_pretrained(out_dir / "final_model")
    ctx.write_meta(out_dir / "final_model")
    return hist


def run_sft_arm(ctx: Context, seed: int, start_dir: Path, out_dir: Path) -> list[dict]:
    """Continued SFT on fresh diverse demonstrations; every ``sft_arm_steps_per_step`` optimizer steps the
    current policy is sampled on the same questions the RL arms see, and those rollouts feed the tracker."""
    import torch

    from searchgym.diversity import DiversityTracker
    from searchgym.train.rl import _torch_gen, step_seeds
    from searchgym.train.rollout import LMPolicy, run_episodes
    from searchgym.train.sft import train_sft
    from searchgym.train.tiny_lm import load_lm

    c = ctx.cfg
    rl = c.rl
    model, tok = load_lm(start_dir, device=c.device)
    demos, _ = make_demos(ctx, tok, max(1, c.demo_passes), seed=1000 + seed)
    n = rl.prompts_per_step * rl.group_size
    envs = ctx.envs(n)
    pool = question_pool(ctx, "train", c.eval_questions)
    tracker = DiversityTracker(levels=("string", "slot"), log_dir=out_dir, titles=ctx.world.titles,
                               tensorboard=False)
    k = max(1, c.sft_arm_steps_per_step)
    G = rl.group_size

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
        row.update(_tracker_extra(m))
        ctx.log(f"  [sft s{seed}] step {step:3d}  reward {row['charts/reward']:.3f}  "
                f"tok-H {row['charts/token_entropy']:.3f}  slot-H {_n(row.get('diversity/slot/entropy'))}")
        return row

    args = replace(c.sft, seed=seed, max_steps=rl.total_steps * k, log_every=k, checkpoint_every=max(k, 10),
                   device=c.device, learning_rate=c.sft.learning_rate * 0.5, warmup_steps=1,
                   context_loss_weight=0.0)
    hist = train_sft(model, tok, demos, args, out_dir=out_dir, resume=c.resume, eval_fn=track)
    tracker.close()
    model.save_pretrained(out_dir / "final_model")
    tok.save_pretrained(out_dir / "final_model")
    ctx.write_meta(out_dir / "final_model")
    # rows in the RL arms' shape: one per tracked step
    rows = []
    for r in hist:
        if "charts/tracked_step" in r:
            rr = dict(r)
            rr["step"] = int(r["charts/tracked_step"])
            rows.append(rr)
    return rows


def run(cfg: SqueezeConfig, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the whole experiment; returns the summary (also written to ``out/summary.json``)."""
    import torch

    from searchgym.train.checkpoint import cleanup_partial
    from searchgym.train.sft import train_sft
    from searchgym.train.tiny_lm import count_parameters, create_tiny_lm, load_lm, world_texts

    cfg.validate()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    elif cfg.model is None and cfg.device == "cpu":
        torch.set_num_threads(1)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    t_start = time.time()
    out = Path(cfg.out)
    if out.exists() and not cfg.resume:
        # a fresh run: remove what an older run left (only our own sub-directories and files)
        for name in ("base_model", "sft", "arms", "start_eval", "plots", "summary.json", "report.md",
                     "report.html", "config.json", "stages.json"):
            p = out / name
            if p.is_dir():
                shutil.rmtree(p)
            elif p.exists():
                p.unlink()
    out.mkdir(parents=True, exist_ok=True)
    for d in [out, out / "sft", *(out / "arms").glob("*/*")]:
        cleanup_partial(d)
    stages_path = out / "stages.json"
    stages: dict[str, Any] = json.loads(stages_path.read_text()) if (cfg.resume and stages_path.exists()) else {}

    prior_s = float(stages.get("_elapsed_s", 0.0))  # time spent by interrupted earlier invocations

    def mark(stage: str, info: Any) -> None:
        stages[stage] = info
        stages["_elapsed_s"] = prior_s + time.time() - t_start
        _write_json(stages_path, stages)

    _write_json(out / "config.json", asdict(cfg))
    log(f"[1/6] world: {cfg.n_entities} entities, BM25 index")
    t0 = time.time()
    ctx = Context(cfg, log)
    log(f"      {len(ctx.world.passages)} passages, {len(ctx.world.split('train'))} train questions "
        f"({time.time() - t0:.1f}s)")

    # ---- 2. the model
    base_dir = out / "base_model"
    stage2 = "[2/6]"  # the stage label is printed once: on the first line of the stage
    if cfg.model is None:
        if not (base_dir / "config.json").exists():
            log(f"{stage2} tiny LM: training a tokenizer on the world, building the model")
            stage2 = "     "
            tmp = out / ".base_model.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            create_tiny_lm(world_texts(ctx.world, prompts=[TINY_PROMPT]), tmp, cfg.tiny, seed=cfg.world_seed)
            ctx.write_meta(tmp)
            os.replace(tmp, base_dir)
        start_src: str | Path = base_dir
    else:
        start_src = cfg.model
    model, tok = load_lm(start_src, device=cfg.device)
    n_params = count_parameters(model)
    log(f"{stage2} model: {start_src} ({n_params / 1e6:.2f}M parameters)")

    # ---- 3. demonstrations + SFT warm start
    sft_dir = out / "sft"
    sft_model = sft_dir / "model"
    if not (cfg.resume and stages.get("sft")):
        log("[3/6] demonstrations (diverse heuristic agent) and SFT warm start")
        t0 = time.time()
        demos, dstats = make_demos(ctx, tok, cfg.demo_passes, seed=0)
        log(f"      {dstats['demos']} demos, EM {dstats['demo_em']:.3f}, kept {dstats['demos_kept']} "
            f"({time.time() - t0:.1f}s)")
        from searchgym.trajectory import write_trajectories

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
        tmp = sft_dir / ".model.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        ctx.write_meta(tmp)
        shutil.rmtree(sft_model, ignore_errors=True)
        os.replace(tmp, sft_model)
        mark("sft", {**dstats, "steps": len(hist), "final_loss": hist[-1]["losses/sft"],
                     "time_s": time.time() - t0})
        log(f"      SFT {len(hist)} steps, loss {hist[0]['losses/sft']:.3f} -> {hist[-1]['losses/sft']:.3f} "
            f"({time.time() - t0:.1f}s)")

    # ---- 4. evaluate the SFT start
    start_eval_path = out / "start_eval" / "eval.json"
    if cfg.resume and start_eval_path.exists():
        start_eval = json.loads(start_eval_path.read_text())
    else:
        log("[4/6] evaluating the SFT start (train + shift splits)")
        t0 = time.time()
        m0, t0k = load_lm(sft_model, device=cfg.device)
        start_eval = evaluate(ctx, m0, t0k, seed=0, name="sft_start", out_dir=out / "start_eval")
        log(f"      train success {_n(start_eval['train']['success'])}  slot-H "
            f"{_n(start_eval['train']['slot_entropy'])}  ({time.time() - t0:.1f}s)")

    # ---- 5. arms
    arm_results: dict[str, list[dict[str, Any]]] = {}
    n_runs, i_run = len(cfg.arms) * cfg.seeds, 0
    for arm in cfg.arms:
        for s in range(cfg.seeds):
            seed = s + 1
            d = out / "arms" / arm / f"seed{seed}"
            done_path = d / "eval.json"
            key = f"arm:{arm}:{seed}"
            i_run += 1
            if cfg.resume and stages.get(key) and done_path.exists():
                ev = json.loads(done_path.read_text())
            else:
                log(f"[5/6] arm {i_run}/{n_runs}: {ARM_LABELS[arm]} (seed {seed})")
                t0 = time.time()
                d.mkdir(parents=True, exist_ok=True)
                if arm == "sft":
                    run_sft_arm(ctx, seed, sft_model, d)
                else:
                    run_rl_arm(ctx, arm, seed, sft_model, d)
                t_train = time.time() - t0
                fm, ftok = load_lm(d / "final_model", device=cfg.device)
                ev = evaluate(ctx, fm, ftok, seed=seed, name=f"{arm}-s{seed}", out_dir=d)
                ev["train_time_s"] = t_train
                _write_json(done_path, ev)
                mark(key, {"time_s": time.time() - t0})
                log(f"      train success {_n(start_eval['train']['success'])} -> {_n(ev['train']['success'])}, "
                    f"slot-H {_n(start_eval['train']['slot_entropy'])} -> {_n(ev['train']['slot_entropy'])} "
                    f"({time.time() - t0:.1f}s)")
            arm_results.setdefault(arm, []).append(ev)

    # ---- 6. report
    log("[6/6] report")
    from searchgym.train.report import build_summary, write_report

    summary = build_summary(cfg, out, start_eval, arm_results, n_params=n_params,
                            wall_s=prior_s + time.time() - t_start, stages=stages)
    summary["resumed"] = bool(prior_s)
    _write_json(out / "summary.json", summary)
    write_report(summary, out)
    summary["wall_s"] = prior_s + time.time() - t_start
    _write_json(out / "summary.json", summary)
    log(f"done in {summary['wall_s']:.0f}s: {out / 'report.md'}")
    return summary


def headline(summary: dict[str, Any] | str | Path) -> str:
    """The README headline (markdown) from a ``summary.json`` (path or dict)."""
    from searchgym.train.report import headline_markdown

    if not isinstance(summary, dict):
        p = Path(summary)
        if p.is_dir():
            p = p / "summary.json"
        summary = json.loads(p.read_text())
    return headline_markdown(summary)


README_BEGIN = "<!-- HEADLINE: written by `searchgym squeeze --readme README.md`; do not edit by hand -->"
README_END = "<!-- /HEADLINE -->"


def write_readme_headline(readme: str | Path, markdown: str) -> None:
    """Put ``markdown`` between the headline markers of ``readme`` (atomically), replacing what was there.

    The README carries the markers once; a bare legacy ``<!-- HEADLINE -->`` line is accepted as the place."""
    from searchgym.train.checkpoint import atomic_write_text

    path = Path(readme)
    if not path.exists():
        raise ConfigError(f"{path} does not exist; pass the README to update with --readme")
    text = path.read_text(encoding="utf-8")
    block = f"{README_BEGIN}\n{markdown.rstrip()}\n{README_END}"
    if README_BEGIN in text and README_END in text:
        head, rest = text.split(README_BEGIN, 1)
        _, tail = rest.split(README_END, 1)
        new = head + block + tail
    elif "<!-- HEADLINE -->" in text:
        new = text.replace("<!-- HEADLINE -->", block, 1)
    else:
        raise ConfigError(f"{path} has no headline markers; add a line `{README_BEGIN}` followed by a line "
                          f"`{README_END}` where the headline goes")
    atomic_write_text(path, new)


def seeds_list(n: int) -> Sequence[int]:
    return list(range(1, n + 1))
