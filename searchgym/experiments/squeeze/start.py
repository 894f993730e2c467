"""The squeeze experiment's SFT start as a unit: build it (world -> tokenizer + tiny LM -> pretraining -> diverse
demonstrations -> SFT), measure its competence gate, ship it as package data, and find a shipped start that fits
a run.

The default pipeline's start is shipped under ``searchgym/experiments/squeeze/sft_start/`` (a few MB: safetensors,
tokenizer, config) with ``start.json``: the :func:`start_key` it was built under (world seed and size, world
generator version and a fingerprint of the generated world, the demonstrator's strategy weights, the env
settings, the tiny LM, pretraining and SFT recipes, the torch thread count), its gate figures and the SHA-256 of
every file. One command regenerates it (bit-for-bit on one platform and torch version: the build runs with
:data:`BUILD_THREADS` torch threads, since a different thread count changes float summation order)::

    searchgym squeeze --only-start --ship-start --out runs/start

A run that asks for the shipped start (``cfg.start_from == "shipped"``, every preset's for the tiny LM) uses it only when its
own :func:`start_key` equals the recorded one; otherwise it trains its own start and says why
(:func:`shipped_start`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.experiments.squeeze.config import TINY_PROMPT, SqueezeConfig
from searchgym.experiments.squeeze.progress import STAGE

SHIPPED_DIR = Path(__file__).parent / "sft_start"  # package data (pyproject, MANIFEST.in)
MANIFEST = "start.json"
BUILD_THREADS = 1  # torch intra-op threads of the build: part of what makes it reproducible bit-for-bit
MODEL_FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
               "tokenizer_config.json", "special_tokens_map.json", "searchgym_prompt.json")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def world_fingerprint(world: Any) -> str:
    """SHA-256 over the generated world's passages and train questions/answers: what the start learned from,
    whatever knob (seed, size, generator version, preset) produced it."""
    h = hashlib.sha256()
    for p in world.passages:
        h.update(json.dumps([getattr(p, "id", None), getattr(p, "title", None), getattr(p, "text", None)],
                            default=str).encode())
    for ex in world.split("train"):
        h.update(json.dumps([getattr(ex, "question", None), getattr(ex, "answers", getattr(ex, "answer", None))],
                            default=str).encode())
    return h.hexdigest()


def start_key(cfg: SqueezeConfig, world: Any | None = None) -> dict[str, Any]:
    """Everything that determines the SFT start (its bytes), as plain JSON. Two configs whose keys are equal
    build the same start."""
    from searchgym.agents.heuristics import DEFAULT_WEIGHTS

    if world is None:
        from searchgym.data import World

        world = World.generate(seed=cfg.world_seed, n_entities=cfg.n_entities, version=cfg.world_version)
    drop = ("device", "out_dir")
    return {
        "world_seed": cfg.world_seed,
        "n_entities": cfg.n_entities,
        "world_generator_version": cfg.world_version,
        "world_fingerprint": world_fingerprint(world),
        "demo_weights": dict(DEFAULT_WEIGHTS),
        "demo_passes": cfg.demo_passes,
        "demo_success_only": cfg.demo_success_only,
        "env": {"max_turns": cfg.max_turns, "top_k": cfg.top_k, "passage_chars": cfg.passage_chars},
        "prompt": TINY_PROMPT,
        "tiny": asdict(cfg.tiny),
        "pretrain": {k: v for k, v in asdict(cfg.pretrain).items() if k not in drop},
        "sft": {k: v for k, v in asdict(cfg.sft).items() if k not in drop},
        "model_seed": cfg.world_seed,
        "threads": BUILD_THREADS,
    }


def build_start(ctx: Any, out: Path, log: Callable[[str], None] = print) -> tuple[Path, dict[str, Any]]:
    """Tokenizer + tiny LM -> pretraining -> demonstrations + SFT, into ``out/{base_model,pretrain,sft}``
    (the pipeline's stages 2-3, with :data:`BUILD_THREADS` torch threads so the bytes are reproducible).
    Returns the SFT model directory and the stage records for ``stages.json``."""
    import torch

    from searchgym.experiments.squeeze.stages import pretrain_stage, warm_start
    from searchgym.train.tiny_lm import create_tiny_lm, world_texts

    cfg = ctx.cfg
    threads = torch.get_num_threads()
    torch.set_num_threads(BUILD_THREADS)
    try:
        t0 = time.time()
        base = out / "base_model"
        tmp = out / ".base_model.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(base, ignore_errors=True)
        model, tok = create_tiny_lm(world_texts(ctx.world, prompts=[TINY_PROMPT]), tmp, cfg.tiny,
                                    seed=cfg.world_seed)
        ctx.write_meta(tmp)
        os.replace(tmp, base)
        stages: dict[str, Any] = {"base_model": {"time_s": time.time() - t0}}
        if cfg.pretrain.max_steps > 0:
            log(f"      pretraining on the world's passages and train Q/A ({cfg.pretrain.max_steps} steps)")
            stages["pretrain"] = pretrain_stage(ctx, model, tok, out / "pretrain")
        log(f"{STAGE}demonstrations (diverse heuristic agent) and SFT warm start")
        stages["sft"] = warm_start(ctx, model, tok, out / "sft")
    finally:
        torch.set_num_threads(threads)
    return out / "sft" / "model", stages


def gate_eval(ctx: Any, model_dir: Path, *, questions: int, samples: int, seed: int = 0) -> dict[str, Any]:
    """The competence gate's figures: ``samples`` episodes at the eval temperature on each of the first
    ``questions`` of the test pool; ``successes`` is the summed per-question success (a question counts its
    share of solved samples), and the 95% Wilson interval is over questions."""
    import torch

    from searchgym.experiments.squeeze.stages import question_pool, sample_questions, split_seed
    from searchgym.experiments.squeeze.stats import wilson
    from searchgym.train.rollout import LMPolicy
    from searchgym.train.tiny_lm import load_lm

    c = ctx.cfg
    model, tok = load_lm(model_dir, device=c.device)
    idx = question_pool(ctx, "test", questions)
    gen = torch.Generator(device=c.device).manual_seed(seed * 7919 + split_seed("test"))
    pol = LMPolicy(model, tok, temperature=c.eval_temperature, max_new_tokens=c.rl.max_new_tokens,
                   device=c.device, generator=gen)
    eps = sample_questions(ctx, pol, ctx.envs(len(idx) * samples, "test"), idx, samples, "gate")
    per_q = [float(np.mean([e.em for e in eps[q * samples:(q + 1) * samples]])) for q in range(len(idx))]
    s = float(np.sum(per_q))
    lo, hi = wilson(s, len(idx))
    return {"split": "test", "questions": len(idx), "samples": samples, "temperature": c.eval_temperature,
            "successes": s, "success": s / len(idx), "ci": [float(lo), float(hi)], "lower_bound": float(lo),
            "gate": c.competence_gate, "passed": bool(lo >= c.competence_gate)}


def ship(model_dir: Path, key: dict[str, Any], gate: dict[str, Any] | None, dest: Path | None = None,
         *, command: str | None = None, build: dict[str, Any] | None = None) -> Path:
    """Copy the start's files into ``dest`` (the package data) with ``start.json``: its key, gate figures, the
    command that regenerates it, every file's SHA-256 and ``build`` (the build's stage records: demonstration
    shares, losses, times)."""
    dest = Path(dest or SHIPPED_DIR)
    tmp = dest.with_name(f".{dest.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    files = {}
    for name in MODEL_FILES:
        p = Path(model_dir) / name
        if p.exists():
            shutil.copyfile(p, tmp / name)
            files[name] = _sha256(p)
    import torch
    import transformers

    manifest = {"key": key, "gate": gate, "files": files, "build": build or {},
                "command": command or "searchgym squeeze --only-start --ship-start --out runs/start",
                "built_with": {"torch": torch.__version__, "transformers": transformers.__version__}}
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(tmp, dest)
    return dest


def read_manifest(dest: Path | None = None) -> dict[str, Any] | None:
    p = Path(dest or SHIPPED_DIR) / MANIFEST
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def verify_files(dest: Path | None = None, manifest: dict[str, Any] | None = None) -> list[str]:
    """Names of shipped files whose SHA-256 differs from the manifest's (or that are missing)."""
    dest = Path(dest or SHIPPED_DIR)
    m = manifest if manifest is not None else read_manifest(dest)
    if not m:
        return [MANIFEST]
    return [n for n, h in m.get("files", {}).items() if not (dest / n).exists() or _sha256(dest / n) != h]


def key_diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Top-level keys on which two start keys differ."""
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def shipped_start(cfg: SqueezeConfig, world: Any | None = None,
                  dest: Path | None = None) -> tuple[Path | None, str]:
    """``(directory, reason)``: the shipped start when it fits ``cfg`` (equal :func:`start_key`, files intact),
    else ``(None, why not)``."""
    dest = Path(dest or SHIPPED_DIR)
    m = read_manifest(dest)
    if m is None:
        return None, f"no shipped SFT start at {dest}"
    bad = verify_files(dest, m)
    if bad:
        return None, f"shipped SFT start files do not match their recorded SHA-256: {bad}"
    if cfg.model is not None:
        return None, "the run uses --model, not the tiny LM"
    diff = key_diff(start_key(cfg, world), m.get("key") or {})
    if diff:
        return None, (f"the shipped SFT start was built for another configuration (differs in {', '.join(diff)}); "
                      f"regenerate it with `{m.get('command')}`")
    return dest, "shipped SFT start matches this run's world and recipe"


__all__ = ["BUILD_THREADS", "MANIFEST", "SHIPPED_DIR", "build_start", "gate_eval", "key_diff", "read_manifest",
           "ship", "shipped_start", "start_key", "verify_files", "world_fingerprint"]
