"""``searchgym squeeze``: does RL squeeze a search agent's query strategies more than SFT does?

The experiment, end to end on the embedded world (CPU, minutes) or with any HF causal LM (GPU):

0. the strategy policy (:mod:`~searchgym.experiments.squeeze.strategy_policy`, seconds; ``cfg.strategy_seeds`` seeds, 0
   skips it): a small policy picks one heuristic query strategy per question, SFT start vs every arm, exact
   success and strategy entropy with 95% CIs (``strategy_policy.json``, the summary's ``strategy_policy``);
1. build the procedural world and its BM25 index;
2. train a tokenizer and a tiny LM on the world (or load ``--model``), and pretrain the tiny LM as a causal LM
   on the world's passages and train question/answer text (``cfg.pretrain``);
3. record demonstrations from the ``diverse`` heuristic agent (a seeded mix of query strategies) against the
   real environment, keep the successful ones, and warm-start the LM with SFT on them;
4. evaluate the SFT start on the train pool, unseen test questions and every shift split (held-out splits at
   one equal size); the competence gate (test success >= ``cfg.competence_gate``) decides whether the LM
   findings are usable (the run goes on either way, and says so);
5. from that checkpoint run the arms (``config.ARM_LABELS``), each with >= 1 seed: continued SFT (the
   warm start's recipe, as many optimizer steps as an RL arm), GRPO, + KL to the SFT start, + KL-Cov,
   + Clip-Cov, + entropy bonus (opt-in: DARLING, count bonus, periodic SFT refresh, RLOO, PPO). Every RL arm
   takes ``cfg.minibatches`` optimizer steps per rollout batch so the ratio-based controls act; every arm's
   rollouts feed a ``DiversityTracker``; each arm is evaluated like the start;
6. write ``report.md`` / ``report.html`` with plots, and ``summary.json`` (whether each control acted, the
   competence gate, CIs over seeds); :func:`headline` turns it into markdown (the CLI can put it in a README).

Stages live in :mod:`~searchgym.experiments.squeeze.stages`, the configuration in
:mod:`~searchgym.experiments.squeeze.config`.

Every stage writes its outputs atomically and is skipped by ``--resume`` when done; an RL or SFT arm that was
interrupted continues from its last checkpoint.
"""


from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

from searchgym.errors import CompetenceGateError
from searchgym.experiments.squeeze.config import ARM_LABELS, SHIFT_SPLITS, TINY_PROMPT, SqueezeConfig
from searchgym.experiments.squeeze.controls import SFT_CONTROLS, run_sft_control
from searchgym.experiments.squeeze.passk import passk_seed_wanted, passk_stage
from searchgym.experiments.squeeze.progress import STAGE
from searchgym.experiments.squeeze.stages import (
    Context,
    _n,
    _write_json,
    evaluate,
    make_demos,
    question_pool,
    run_rl_arm,
    run_sft_arm,
    warm_start,
)

__all__ = ["ARM_LABELS", "SHIFT_SPLITS", "TINY_PROMPT", "Context", "SqueezeConfig", "evaluate", "headline",
           "make_demos", "question_pool", "run", "short_headline"]


_OWN_OUTPUTS = ("base_model", "pretrain", "sft", "arms", "start_eval", "plots", "summary.json", "report.md",
                "report.html", "config.json", "stages.json", "strategy_policy.json", "organism_contextual.json")


class _Run:
    """One invocation's bookkeeping: the output folder, ``stages.json`` (each finished stage and the time spent,
    with the time of interrupted earlier invocations) and the progress log."""

    def __init__(self, cfg: SqueezeConfig, log: Callable[[str], None]):
        self.cfg = cfg
        self.log = log
        self.out = Path(cfg.out)
        self.t_start = time.time()
        path = self.out / "stages.json"
        self.stages: dict[str, Any] = json.loads(path.read_text()) if (cfg.resume and path.exists()) else {}
        self.prior_s = float(self.stages.get("_elapsed_s", 0.0))  # time spent by interrupted earlier invocations

    def mark(self, stage: str, info: Any) -> None:
        self.stages[stage] = info
        self.stages["_elapsed_s"] = self.elapsed()
        _write_json(self.out / "stages.json", self.stages)

    def elapsed(self) -> float:
        return self.prior_s + time.time() - self.t_start

    def done(self, stage: str) -> bool:
        return bool(self.cfg.resume and self.stages.get(stage))


def run(cfg: SqueezeConfig, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the whole experiment; returns the summary (also written to ``out/summary.json``)."""
    from searchgym.experiments.squeeze.progress import Progress, planned_stages

    cfg.validate()
    _torch_setup(cfg)
    with Progress(log, planned_stages(cfg)) as prog:
        return _run(cfg, prog)


def _torch_setup(cfg: SqueezeConfig) -> None:
    import torch
    from transformers.utils import logging as hf_logging

    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    elif cfg.model is None and cfg.device == "cpu":
        torch.set_num_threads(cfg.arm_jobs())  # the sequential stages use the cores the arm workers share
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def _prepare_out(cfg: SqueezeConfig, log: Callable[[str], None]) -> _Run:
    """A fresh run removes what an older run left (only our own sub-directories and files); a resumed one keeps
    it, less any half-written checkpoint."""
    from searchgym.train.checkpoint import cleanup_partial

    out = Path(cfg.out)
    if out.exists() and not cfg.resume:
        for name in _OWN_OUTPUTS:
            p = out / name
            if p.is_dir():
                shutil.rmtree(p)
            elif p.exists():
                p.unlink()
    out.mkdir(parents=True, exist_ok=True)
    for d in [out, out / "pretrain", out / "sft", *(out / "arms").glob("*/*")]:
        cleanup_partial(d)
    return _Run(cfg, log)


def _run(cfg: SqueezeConfig, log: Callable[[str], None]) -> dict[str, Any]:
    from searchgym.train.tiny_lm import count_parameters, load_lm

    r = _prepare_out(cfg, log)
    _write_json(r.out / "config.json", asdict(cfg))
    # ---- 0. the strategy policy: exact and fast, so first (reused on --resume when its settings match)
    from searchgym.experiments.squeeze.strategy_stage import run_organism_stages

    strategy_res, contextual_res = (None, None) if cfg.only_start else run_organism_stages(cfg, r.out, log)
    log(f"{STAGE}world: {cfg.n_entities} entities, BM25 index")
    t0 = time.time()
    ctx = Context(cfg, log)
    log(f"      {len(ctx.world.passages)} passages, {len(ctx.world.split('train'))} train questions "
        f"({time.time() - t0:.1f}s)")
    sft_model, shipped = _sft_start(r, ctx)
    model, tok = load_lm(sft_model, device=cfg.device)
    n_params = count_parameters(model)
    del model, tok
    start_eval, gate_rec = _gate_stage(r, ctx, sft_model, shipped)
    if cfg.only_start:
        from searchgym.experiments.squeeze.summary import competence

        return only_start_summary(cfg, ctx, r.out, sft_model, start_eval, competence(cfg, start_eval), r.stages,
                                  log)
    start_in_pool = start_eval is None and cfg.arm_jobs() > 1 and bool(gate_rec.get("questions"))
    if not start_in_pool:
        start_eval, _ = start_stage(ctx, sft_model, gate_rec, start_eval)
    _log_competence(cfg, start_eval if start_eval is not None else {"gate": gate_rec}, log)
    results, start_eval = _arms_stage(r, ctx, sft_model, gate_rec, start_eval)
    arm_results: dict[str, list[dict[str, Any]]] = {}
    for arm in cfg.arms:
        arm_results[arm] = [results[(arm, s + 1)] for s in range(cfg.seeds)]
    return _report_stage(r, start_eval, arm_results, n_params, strategy_res, contextual_res)


def _sft_start(r: _Run, ctx: Context) -> tuple[Path, Path | None]:
    """Stages 2-3, the SFT start: the shipped one (package data) when asked for and it fits, a given path, or
    built here (the tiny LM: tokenizer, pretraining, demonstrations and SFT; a real LM: demonstrations and SFT).
    Returns ``(the start's model directory, the shipped start or None)``."""
    cfg, log = r.cfg, r.log
    sft_model = r.out / "sft" / "model"
    shipped = None
    if cfg.start_from == "shipped":
        shipped = _shipped_start(r, ctx)
        sft_model = shipped or sft_model
    elif not cfg.trains_start():
        sft_model = Path(str(cfg.start_from))
        log(f"{STAGE}SFT start: {sft_model}")
        r.mark("start", {"source": "path", "path": str(sft_model)})
    if cfg.model is None and sft_model == r.out / "sft" / "model":
        if not r.done("sft"):
            from searchgym.experiments.squeeze.start import build_start

            log(f"{STAGE}tiny LM: training a tokenizer on the world, building and pretraining the model")
            _, built = build_start(ctx, r.out, log)
            for k, v in built.items():
                r.mark(k, v)
        r.mark("start", {"source": "trained", "path": str(sft_model)})
    elif cfg.model is not None and cfg.trains_start():
        _train_model_start(r, ctx)
    return sft_model, shipped


def _shipped_start(r: _Run, ctx: Context) -> Path | None:
    """The shipped SFT start when it fits this run (its figures go into ``stages.json``), else None (warned)."""
    from searchgym.experiments.squeeze.start import read_manifest, shipped_start

    shipped, why = shipped_start(r.cfg, ctx.world)
    if shipped is None:
        r.log(f"WARNING: not using the shipped SFT start: {why}. Training this run's own start instead "
              "(pretraining + SFT; minutes, not the demo's seconds).")
        return None
    r.log(f"{STAGE}SFT start: the shipped one ({shipped}; {why})")
    built = (read_manifest(shipped) or {}).get("build") or {}
    if "sft" in built:  # the demonstrations' figures (summary "demos", world.demo_share) come with it
        r.mark("sft", {**built["sft"], "time_s": 0.0, "source": "shipped"})
    r.mark("start", {"source": "shipped", "path": str(shipped)})
    return shipped


def _train_model_start(r: _Run, ctx: Context) -> None:
    """A real LM's SFT start: demonstrations and SFT from ``cfg.model``."""
    from searchgym.train.tiny_lm import count_parameters, load_lm

    cfg = r.cfg
    model, tok = load_lm(cfg.model, device=cfg.device)
    r.log(f"{STAGE}model: {cfg.model} ({count_parameters(model) / 1e6:.2f}M parameters)")
    if not r.done("sft"):
        r.log(f"{STAGE}demonstrations (diverse heuristic agent) and SFT warm start")
        r.mark("sft", warm_start(ctx, model, tok, r.out / "sft"))


def _gate_stage(r: _Run, ctx: Context, sft_model: Path, shipped: Path | None
                ) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """Stage 4: the SFT start's competence gate (measured, read from the shipped manifest, or reused on
    ``--resume``), and the start's saved evaluation on ``--resume``. Raises :class:`CompetenceGateError` with
    ``--stop-on-failed-gate``. Returns ``(the saved evaluation or None, the gate record)``; with ``--only-start``
    the evaluation is the gate alone."""
    from searchgym.experiments.squeeze.summary import competence

    cfg = r.cfg
    start_dir = r.out / "start_eval"
    start_eval_path, gate_path = start_dir / "eval.json", start_dir / "gate.json"
    saved = json.loads(start_eval_path.read_text()) if cfg.resume and start_eval_path.exists() else None
    # --only-start saves the gate alone: a run with arms that resumes from it still evaluates the start
    start_eval: dict[str, Any] | None = saved if saved and "train" in saved else None
    if saved and saved.get("gate"):
        gate_rec = saved["gate"]
    elif cfg.resume and gate_path.exists():
        gate_rec = json.loads(gate_path.read_text())
    else:
        r.log(f"{STAGE}the SFT start's competence gate")
        gate_rec = start_gate(ctx, sft_model, shipped)
        start_dir.mkdir(parents=True, exist_ok=True)
        _write_json(gate_path, gate_rec)
    if cfg.stop_on_failed_gate and not cfg.only_start and not competence(cfg, {"gate": gate_rec})["passed"]:
        raise CompetenceGateError(
            f"the SFT start fails the competence gate: test success {_n(gate_rec.get('success'))} on "
            f"{gate_rec.get('questions')} questions, 95% Wilson lower bound {_n(gate_rec.get('lower_bound'))} < "
            f"{cfg.competence_gate}; stopped before the arms (--stop-on-failed-gate). The gate: {gate_path}")
    if cfg.only_start:  # the gate alone (the full evaluation belongs to a run with arms)
        start_eval = {"gate": gate_rec}
        _write_json(start_eval_path, start_eval)
    return start_eval, gate_rec


def _log_competence(cfg: SqueezeConfig, start_eval: dict[str, Any], log: Callable[[str], None]) -> None:
    from searchgym.experiments.squeeze.summary import competence

    comp = competence(cfg, start_eval)
    ts, lb, gate = comp["test_success"], comp["lower_bound"], comp["gate"]
    if not comp["passed"]:
        bar = "!" * 100
        log(f"{bar}\n COMPETENCE GATE FAILED: the SFT start's success on unseen test questions is "
            f"{_n(ts)} (95% Wilson lower bound {_n(lb)}) < {gate}.\n The run goes on, but its LM findings are "
            f"unusable (marked so in the report).\n{bar}")
    else:
        log(f"      competence gate passed: test success {_n(ts)}, 95% Wilson lower bound {_n(lb)} >= {gate}")


def _arms_todo(r: _Run) -> tuple[list[tuple[str, int]], dict[tuple[str, int], dict[str, Any]],
                                 list[tuple[int, str, int]]]:
    """Every (arm, seed) run, those finished by an earlier invocation (``--resume``), and those to run."""
    cfg = r.cfg
    # seed-major: a run stopped part-way (for time) has every arm at the seeds it finished, not some arms only
    runs = [(arm, s + 1) for s in range(cfg.seeds) for arm in cfg.arms]
    results: dict[tuple[str, int], dict[str, Any]] = {}
    todo = []
    for i, (arm, seed) in enumerate(runs, 1):
        done_path = r.out / "arms" / arm / f"seed{seed}" / "eval.json"
        if r.done(f"arm:{arm}:{seed}") and done_path.exists():
            results[(arm, seed)] = json.loads(done_path.read_text())
            if passk_seed_wanted(cfg, seed) and not (done_path.parent / "passk.json").exists():
                todo.append((i, arm, seed))  # only pass@k is missing; run_arm_seed reuses the arm's eval
        else:
            todo.append((i, arm, seed))
    return runs, results, todo


def _arms_stage(r: _Run, ctx: Context, sft_model: Path, gate_rec: dict[str, Any],
                start_eval: dict[str, Any] | None) -> tuple[dict[tuple[str, int], dict[str, Any]], dict[str, Any]]:
    """Stage 5: the arms (arm-seed runs are independent: with ``cfg.jobs > 1`` they run in that many worker
    processes, with the start's evaluation beside them when it is still to do). Returns the evaluations by
    (arm, seed) and the start's evaluation."""
    runs, results, todo = _arms_todo(r)

    def finished(arm: str, seed: int, ev: dict[str, Any], t: float) -> None:
        results[(arm, seed)] = ev
        r.mark(f"arm:{arm}:{seed}", {"time_s": t})
        r.log(f"      {arm} seed {seed}: train success {_n(ev['train']['success'])}, test "
              f"{_n(ev['test']['success'])} ({t:.1f}s)")

    jobs = r.cfg.arm_jobs()
    start_in_pool = start_eval is None
    if jobs <= 1 or len(todo) + start_in_pool <= 1:
        if start_in_pool:
            start_eval, _ = start_stage(ctx, sft_model, gate_rec)
        r.log(f"{STAGE}arms: {len(todo)} arm-seed runs in this process")
        for i, arm, seed in todo:
            r.log(f"      arm {i}/{len(runs)}: {ARM_LABELS[arm]} (seed {seed})")
            t0 = time.time()
            finished(arm, seed, run_arm_seed(ctx, arm, seed, sft_model), time.time() - t0)
    else:
        start_eval = _arms_in_pool(r, sft_model, gate_rec, start_eval, todo, finished)
    assert start_eval is not None
    return results, start_eval


# Arms whose arm-seed runs take longest (measured in `--quick --arms all`: sft_kl 140 s, continued SFT 62 s, PPO and
# Critique-GRPO 45 s against GRPO's 36 s): the pool starts them first, so no worker idles at the end while the
# other finishes one long run.
_SLOWEST_ARMS = ("sft_kl", "rs_sft", "sft", "ppo", "grpo_critique", "grpo_sft_refresh")


def _seed_then_longest(job: tuple[int, str, int]) -> tuple[int, int, int]:
    """Seed by seed (a run stopped for time has every arm at the seeds it finished), the slowest arms of a seed
    first."""
    i, arm, seed = job
    return (seed, _SLOWEST_ARMS.index(arm) if arm in _SLOWEST_ARMS else len(_SLOWEST_ARMS), i)


def _arms_in_pool(r: _Run, sft_model: Path, gate_rec: dict[str, Any], start_eval: dict[str, Any] | None,
                  todo: list[tuple[int, str, int]], finished: Callable[..., None]) -> dict[str, Any]:
    """The arm-seed runs (and the start's evaluation when ``start_eval`` is None) in ``cfg.arm_jobs()`` worker
    processes, one torch thread each. Returns the start's evaluation."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    jobs = r.cfg.arm_jobs()
    start_in_pool = start_eval is None
    r.log(f"{STAGE}arms: {len(todo)} arm-seed runs{' and the SFT start evaluation' if start_in_pool else ''} in "
          f"{jobs} worker processes (1 torch thread each)")
    t_all = time.time()
    with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn"),
                             initializer=_worker_init, initargs=(r.cfg,)) as pool:
        start_fut = pool.submit(_worker_start, str(sft_model), gate_rec) if start_in_pool else None
        futs = {pool.submit(_worker_run, arm, seed, str(sft_model)): (arm, seed)
                for _, arm, seed in sorted(todo, key=_seed_then_longest)}
        for f in as_completed([*futs, *([start_fut] if start_fut else [])]):
            if f is start_fut:
                start_eval, t = f.result()
                r.mark("start_eval", {"time_s": t})
                r.log(f"      SFT start: train success {_n(start_eval['train']['success'])}, test "
                      f"{_n(start_eval['test']['success'])} ({t:.1f}s)")
                continue
            arm, seed = futs[f]
            ev, t = f.result()
            finished(arm, seed, ev, t)
    r.log(f"      arms done in {time.time() - t_all:.0f}s")
    assert start_eval is not None
    return start_eval


def _report_stage(r: _Run, start_eval: dict[str, Any], arm_results: dict[str, list[dict[str, Any]]], n_params: int,
                  strategy_res: dict[str, Any] | None, contextual_res: dict[str, Any] | None) -> dict[str, Any]:
    """Stage 6: ``summary.json``, ``report.md`` / ``report.html``."""
    from searchgym.experiments.squeeze.endpoints import endpoints_block
    from searchgym.experiments.squeeze.report import write_report
    from searchgym.experiments.squeeze.strategy_stage import strategy_block
    from searchgym.experiments.squeeze.summary import build_summary

    r.log(f"{STAGE}report")
    summary = build_summary(r.cfg, r.out, start_eval, arm_results, n_params=n_params, wall_s=r.elapsed(),
                            stages=r.stages)
    summary["resumed"] = bool(r.prior_s)
    endpoints_block(summary, start_eval, arm_results)  # issue 31's endpoints (endpoints.py)
    block = strategy_block(strategy_res)
    if block is not None:
        summary["strategy_policy"] = block
    if contextual_res is not None:
        summary["organism"] = {"contextual": contextual_res}
    summary["world"].update(world_block(strategy_res, r.stages))
    _write_json(r.out / "summary.json", summary)
    write_report(summary, r.out)
    summary["wall_s"] = r.elapsed()
    _write_json(r.out / "summary.json", summary)
    r.log(f"done in {summary['wall_s']:.0f}s: {r.out / 'report.md'}")
    return summary


def start_gate(ctx: Context, sft_model: Path, shipped: Path | None) -> dict[str, Any]:
    """The competence gate's figures on ``cfg.gate_questions`` test questions: re-measured, or, for the shipped
    start evaluated the same way when it was built (same questions, samples, temperature and seed), read from
    its manifest (the figures are a function of the model and that seed)."""
    from searchgym.experiments.squeeze.start import gate_eval, read_manifest

    c = ctx.cfg
    if shipped is not None:
        g = (read_manifest(shipped) or {}).get("gate") or {}
        if (g.get("questions") == min(c.gate_questions, len(ctx.world.split("test"))) and g.get("samples") ==
                c.gate_samples and g.get("temperature") == c.eval_temperature and c.gate_questions_from_manifest):
            return {**g, "source": "shipped start's manifest (measured when it was built)"}
    t0 = time.time()
    g = gate_eval(ctx, sft_model, questions=c.gate_questions, samples=c.gate_samples)
    ctx.log(f"      gate: {g['successes']:.2f}/{g['questions']} test questions, 95% Wilson lower bound "
            f"{g['lower_bound']:.3f} ({time.time() - t0:.1f}s)")
    return {**g, "source": "measured in this run"}


def start_stage(ctx: Context, sft_model: Path, gate_rec: dict[str, Any],
                start_eval: dict[str, Any] | None = None) -> tuple[dict[str, Any], float]:
    """The SFT start's evaluation (the arms' baseline; unless ``start_eval`` is given, e.g. on ``--resume``), with
    its gate record, in ``OUT/start_eval/eval.json``, and its pass@k (reused on ``--resume``). Returns the
    evaluation and the seconds taken."""
    from searchgym.train.tiny_lm import load_lm

    t0 = time.time()
    out_dir = Path(ctx.cfg.out) / "start_eval"
    load = partial(load_lm, sft_model, device=ctx.cfg.device)
    if start_eval is None:
        ctx.log(f"{STAGE}evaluating the SFT start (train + shift splits)")
        start_eval = evaluate(ctx, *load(), seed=0, name="sft_start", out_dir=out_dir)
        start_eval["gate"] = gate_rec
        _write_json(out_dir / "eval.json", start_eval)
        ctx.log(f"      SFT start: train success {_n(start_eval['train']['success'])}  slot-H "
                f"{_n(start_eval['train']['slot_entropy'])}  ({time.time() - t0:.1f}s)")
    passk_stage(ctx, out_dir, load, seed=0, name="sft_start")
    return start_eval, time.time() - t0


def only_start_summary(cfg: SqueezeConfig, ctx: Context, out: Path, sft_model: Path, start_eval: dict[str, Any],
                       comp: dict[str, Any], stages: dict[str, Any], log: Callable[[str], None]) -> dict[str, Any]:
    """``--only-start``: the SFT start, its evaluation and gate in ``out/start.json``; with ``cfg.ship_start``
    copied into the package (:func:`searchgym.experiments.squeeze.start.ship`)."""
    from searchgym.experiments.squeeze.start import ship, start_key

    key = start_key(cfg, ctx.world)
    res = {"model": str(sft_model), "key": key, "gate": start_eval.get("gate"), "competence": comp,
           "stages": stages}
    if cfg.ship_start:
        if not comp["passed"]:
            log("WARNING: shipping an SFT start that FAILS the competence gate")
        build = {k: v for k, v in stages.items() if k in ("base_model", "pretrain", "sft")}
        dest = ship(sft_model, key, start_eval.get("gate"), build=build)
        res["shipped"] = str(dest)
        log(f"shipped the SFT start to {dest}")
    _write_json(out / "start.json", res)
    log(f"SFT start: {sft_model} (gate {'passed' if comp['passed'] else 'FAILED'}: test success "
        f"{_n(comp['test_success'])} on {comp['questions']} questions, Wilson lower bound {_n(comp['lower_bound'])})")
    return res


def run_arm_seed(ctx: Context, arm: str, seed: int, sft_model: Path) -> dict[str, Any]:
    """Train one arm from the SFT start with one seed, evaluate it (``eval.json``) and, for the first
    ``passk_seeds`` seeds, its pass@k (``passk.json``); an arm whose ``eval.json`` exists is only evaluated for
    pass@k (resume). Returns the evaluation."""
    from searchgym.train.tiny_lm import load_lm

    cfg = ctx.cfg
    d = Path(cfg.out) / "arms" / arm / f"seed{seed}"
    done_path = d / "eval.json"
    if cfg.resume and done_path.exists() and (d / "final_model" / "config.json").exists():
        ev = json.loads(done_path.read_text())
    else:
        t0 = time.time()
        d.mkdir(parents=True, exist_ok=True)
        if arm == "sft":
            run_sft_arm(ctx, seed, sft_model, d)
        elif arm in SFT_CONTROLS:
            run_sft_control(ctx, arm, seed, sft_model, d)
        else:
            run_rl_arm(ctx, arm, seed, sft_model, d)
        t_train = time.time() - t0
        fm, ftok = load_lm(d / "final_model", device=cfg.device)
        ev = evaluate(ctx, fm, ftok, seed=seed, name=f"{arm}-s{seed}", out_dir=d)
        ev["train_time_s"] = t_train
        _write_json(done_path, ev)
    if passk_seed_wanted(cfg, seed):  # pass@k for the first cfg.passk_seeds seeds (reused on --resume)
        passk_stage(ctx, d, partial(load_lm, d / "final_model", device=cfg.device), seed=seed, name=f"{arm}-s{seed}")
    return ev


_WORKER_CTX: Context | None = None


def _worker_init(cfg: SqueezeConfig) -> None:
    """A worker process of the arms stage: one torch thread, its own world and index (seconds)."""
    global _WORKER_CTX
    import torch
    from transformers.utils import logging as hf_logging

    torch.set_num_threads(1)
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    _WORKER_CTX = Context(cfg, lambda msg: print(msg, flush=True))


def _worker_run(arm: str, seed: int, sft_model: str) -> tuple[dict[str, Any], float]:
    assert _WORKER_CTX is not None
    t0 = time.time()
    ev = run_arm_seed(_WORKER_CTX, arm, seed, Path(sft_model))
    return ev, time.time() - t0


def _worker_start(sft_model: str, gate_rec: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """The SFT start's evaluation and pass@k (:func:`start_stage`), as a job of the arms' pool."""
    assert _WORKER_CTX is not None
    return start_stage(_WORKER_CTX, Path(sft_model), gate_rec)


def world_block(strategy_res: dict[str, Any] | None, stages: dict[str, Any]) -> dict[str, Any]:
    """What the run's world offers its strategies: ``em[SPLIT][STRATEGY]`` (heuristic EM of every strategy on
    every split under the strategy stage's env preset; absent when that stage is off) and
    ``demo_share[STRATEGY]`` (share of the SFT demonstrations each strategy produced)."""
    out: dict[str, Any] = {}
    if strategy_res is not None:
        per = strategy_res["per_strategy"]
        splits = list(next(iter(per.values()))) if per else []
        out["em"] = {sp: {s: per[s][sp] for s in per} for sp in splits}
        out["preset"] = strategy_res["config"]["preset"]
        out["version"] = strategy_res["config"].get("world_version")
    share = (stages.get("sft") or {}).get("demo_share")
    if share is not None:
        out["demo_share"] = share
    return out


def _load(summary: dict[str, Any] | str | Path) -> dict[str, Any]:
    if isinstance(summary, dict):
        return summary
    p = Path(summary)
    if p.is_dir():
        p = p / "summary.json"
    return dict(json.loads(p.read_text()))


def headline(summary: dict[str, Any] | str | Path, worlds: dict[str, Any] | None = None) -> str:
    """The full results block (markdown: tables and findings) from a ``summary.json`` (path or dict), with
    ``worlds`` (:func:`~searchgym.experiments.squeeze.worlds.worlds_block`) also pooled over world seeds; it goes
    into docs/squeeze.md between the SQUEEZE-RESULTS markers."""
    from searchgym.experiments.squeeze.report import headline_markdown

    return headline_markdown(_load(summary), worlds)


def short_headline(summary: dict[str, Any] | str | Path, worlds: dict[str, Any] | None = None) -> str:
    """The README's <= 8-line summary from a ``summary.json`` (path or dict) and, optionally, the worlds block."""
    from searchgym.experiments.squeeze.report import headline_summary

    return headline_summary(_load(summary), worlds)

