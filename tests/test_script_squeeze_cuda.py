"""scripts/squeeze_cuda.py (the larger-LM squeeze run for a GPU): its model is tens of millions of parameters,
and its --smoke mode runs the whole pipeline on a CPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import load_script

pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "squeeze_cuda.py"


def test_the_gpu_model_has_tens_of_millions_of_parameters_and_the_config_validates():
    from searchgym.train.tiny_lm import build_model, count_parameters, train_tokenizer

    cfg = load_script("squeeze_cuda").config("/tmp/unused", "cuda", False, 5, 2, 30, 2e-4, False)
    cfg.validate()
    assert cfg.device == "cuda" and cfg.strategy_seeds == 0 and cfg.contextual_seeds == 0
    words = [f"w{i} x{i * 7} y{i * 13}" for i in range(3000)]
    tok = train_tokenizer(words, cfg.tiny.vocab_size)
    n = count_parameters(build_model(tok, cfg.tiny))
    assert 1e7 <= n <= 1e8, n


@pytest.mark.slow
def test_smoke_mode_runs_the_pipeline_on_a_cpu(tmp_path):
    out = tmp_path / "sq"
    r = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--smoke", "--jobs", "1", "--seeds", "1",
                        "--out", str(out)], capture_output=True, text=True, timeout=900, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert sorted(summary["arms"]) == ["grpo", "sft"] and summary["device"] == "cpu"
    assert "RL vs SFT" in r.stdout
