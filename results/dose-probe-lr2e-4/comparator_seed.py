"""The dose probe's comparator alone for one seed (the sweep's GRPO run of that seed is not repeated): continued
SFT at the RL learning rate (`sft_kl`, stopping at KL_TARGET or after 1 x the GRPO steps) from the shipped start,
then its train-pool success on the sweep's pool (128 questions x 2 samples).

    PYTHONPATH=. taskset -c 1 python results/dose-probe-lr2e-4/comparator_seed.py SEED KL_TARGET OUT_JSON [S0]

S0: the start's train-pool success when already measured (the sweep's 0.520; evaluation is seeded, so it repeats);
without it the start is evaluated again.
"""

import json
import sys
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import lm_dose

from searchgym.experiments.squeeze.config import SqueezeConfig
from searchgym.experiments.squeeze.stages import Context
from searchgym.experiments.squeeze.start import shipped_start

seed, kl_target, out_json = int(sys.argv[1]), float(sys.argv[2]), Path(sys.argv[3])
torch.set_num_threads(1)
out = Path("runs/dose-probe")
cfg = SqueezeConfig.preset(out=str(out), strategy_seeds=0)
cfg.sft_kl_max_factor = 1
cfg.rl = replace(cfg.rl, learning_rate=2e-4, total_steps=100)
ctx = Context(cfg, print)
start, why = shipped_start(cfg, ctx.world)
assert start is not None, why
s0 = float(sys.argv[4]) if len(sys.argv) > 4 else lm_dose.pool_success(ctx, start, 128, 2)
c = lm_dose.run_comparator(ctx, "sft_kl", seed, start, out / f"lr0.0002-s{seed}-sft_kl", 128, 2, s0,
                           kl_target=kl_target)
out_json.write_text(json.dumps({"seed": seed, "start_success": s0, "comparator": c}, indent=1))
print(json.dumps({"seed": seed, "start_success": s0, **{k: v for k, v in c.items()}}))
