"""The squeeze experiment with a larger LM (about 28M parameters) trained on the world, for a CUDA device.

The CPU run's LM has 0.9M parameters; this asks whether the findings hold for a model two orders of magnitude
larger, trained from scratch on the same world (nothing downloads weights). Same pipeline as
``searchgym squeeze`` (``searchgym.experiments.squeeze.run``): pretraining on the world's passages, SFT on the
diverse heuristic demonstrations, the competence gate, then the RL arms and continued SFT from that start, each
evaluated on train, test and the shift splits. The LM-independent strategy-policy stages are left out (the CPU
run has them). Arm-seed runs go to ``--jobs`` worker processes that share the GPU.

    python scripts/squeeze_cuda.py --out runs/squeeze-cuda              # ~7 min on one H200
    python scripts/squeeze_cuda.py --device cpu --smoke --out /tmp/sq   # the same code path, tiny budgets

It prints the results markdown (the docs' "On a GPU" section is written from it) and leaves summary.json,
report.md and the plots in ``--out``.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace


def config(out: str, device: str, smoke: bool, jobs: int, seeds: int, steps: int, lr: float, resume: bool):
    from searchgym.experiments.squeeze.config import SqueezeConfig
    from searchgym.train.pretrain import PretrainArgs
    from searchgym.train.sft import SFTArgs
    from searchgym.train.tiny_lm import TinyLMConfig

    cfg = SqueezeConfig.preset(False, out=out, device=device, jobs=jobs, seeds=seeds,
                               arms=("sft", "grpo", "grpo_kl", "grpo_klcov", "grpo_ent"),
                               strategy_seeds=0, contextual_seeds=0, passk_max=8, passk_questions=16,
                               passk_splits=("test", "shift_strategy"), passk_seeds=1)
    # 8 layers of width 512: 27M parameters with the world's 2,048-token BPE vocabulary (tied embeddings)
    cfg.tiny = TinyLMConfig(vocab_size=2048, hidden_size=512, num_layers=8, num_heads=8, intermediate_size=1536,
                            max_positions=1024)
    # twice the CPU run's pretraining tokens; the CPU run's SFT data and steps at a lower learning rate; the
    # demonstrations from 2 passes instead of 4 (the demo stage runs on the CPU: 4 passes cost minutes there)
    cfg.pretrain = PretrainArgs(max_steps=2000, learning_rate=1e-3, warmup_steps=100, batch_size=32,
                                block_len=128, checkpoint_every=500)
    cfg.sft = SFTArgs(learning_rate=1e-3, max_steps=1500, batch_size=16, micro_batch_size=16, warmup_steps=50,
                      final_lr_ratio=0.1, context_loss_weight=0.5)
    cfg.demo_passes = 2
    cfg.resume = resume
    cfg.rl = replace(cfg.rl, total_steps=steps, learning_rate=lr, micro_batch_size=64)
    if smoke:  # the same stages at budgets a CPU finishes in minutes (checks the code path, not the science)
        cfg.n_entities = 600
        cfg.tiny = replace(cfg.tiny, hidden_size=64, num_layers=2, num_heads=2, intermediate_size=128)
        cfg.pretrain = replace(cfg.pretrain, max_steps=20, batch_size=8)
        cfg.sft = replace(cfg.sft, max_steps=20, batch_size=8, micro_batch_size=8, warmup_steps=5)
        cfg.rl = replace(cfg.rl, total_steps=2, micro_batch_size=16)
        cfg.arms = ("sft", "grpo")
        cfg.eval_questions = cfg.eval_shift_questions = 8
        cfg.eval_samples = 2
        cfg.passk_max, cfg.passk_questions = 4, 4
        cfg.demo_passes = 1
    return cfg


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="runs/squeeze-cuda", help="output directory")
    ap.add_argument("--device", default="cuda", help="cuda | cpu (default: cuda)")
    ap.add_argument("--jobs", type=int, default=None, help="arm-seed worker processes sharing the device "
                                                           "(default: min(5, CPU cores - 2); 10 workers ran out "
                                                           "of an H200's 140 GB in the evaluation batches)")
    ap.add_argument("--seeds", type=int, default=2, help="seeds per arm (default 2)")
    ap.add_argument("--steps", type=int, default=30, help="RL steps per arm (default 30)")
    ap.add_argument("--lr", type=float, default=2e-4, help="RL learning rate (default 2e-4)")
    ap.add_argument("--resume", action="store_true", help="continue an interrupted run in --out")
    ap.add_argument("--smoke", action="store_true", help="tiny budgets: check the code path on a CPU")
    a = ap.parse_args()
    # bm25s imports JAX when it is installed, and JAX's CUDA backend then takes most of the GPU's memory in
    # every worker process (the first try here failed so); the BM25 search runs on the CPU anyway
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    if a.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise SystemExit("no CUDA device: run with --device cpu --smoke to check the code path")
    jobs = a.jobs or max(1, min(5, (os.cpu_count() or 2) - 2))
    cfg = config(a.out, a.device, a.smoke, jobs, a.seeds, a.steps, a.lr, a.resume)

    from searchgym.experiments.squeeze import experiment as sq

    t0 = time.time()
    summary = sq.run(cfg, log=lambda s: print(s, flush=True))
    print(sq.headline(summary))
    print(f"wall {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
