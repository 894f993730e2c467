"""``searchgym sft`` run for real: the embedded world's diverse-agent demos fine-tune a tiny LM."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from searchgym.cli import app

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    from searchgym.data import default_world
    from searchgym.train.tiny_lm import TinyLMConfig, create_tiny_lm, world_texts

    cfg = TinyLMConfig(vocab_size=500, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64,
                       max_positions=512)
    d = tmp_path_factory.mktemp("lm") / "base"
    create_tiny_lm(world_texts(default_world(), prompts=["Question: {question}\n"])[:400], d, cfg, seed=0)
    return d


def test_sft_runs_on_the_embedded_world(tiny_lm, tmp_path):
    out = tmp_path / "sft"
    r = CliRunner().invoke(app, ["sft", "--model", str(tiny_lm), "--out", str(out), "-n", "12", "--passes", "1",
                                 "--max-steps", "2", "--batch-size", "4"])
    assert r.exit_code == 0, r.output
    assert (out / "model" / "config.json").exists()
    meta = json.loads((out / "model" / "searchgym_prompt.json").read_text())
    assert meta["prompt_template"] == "Question: {question}\n"
    from searchgym.train.tiny_lm import load_lm

    load_lm(out / "model")  # the fine-tuned model loads back


def test_sft_replays_a_trajectory_file(tiny_lm, tmp_path):
    traj = tmp_path / "demos.jsonl"
    r = CliRunner().invoke(app, ["rollout", "--agent", "decompose", "-n", "4", "--split", "train",
                                 "--out", str(traj), "--no-progress"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["sft", "--model", str(tiny_lm), "--out", str(tmp_path / "sft"),
                                 "--trajectories", str(traj), "--max-steps", "1", "--batch-size", "4"])
    assert r.exit_code == 0, r.output
    assert "4 demonstrations replayed" in r.output


def test_sft_bad_model_is_one_line_not_a_traceback(tmp_path):
    r = CliRunner().invoke(app, ["sft", "--model", str(tmp_path / "nope"), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2
    assert "Traceback" not in r.output and "cannot load model" in r.output
    assert len(r.output.strip().splitlines()) == 1
