"""Models that squeeze trains carry their prompt, so `searchgym rollout --agent MODEL_DIR` evaluates them in the
env they were trained in; each squeeze stage label is printed once."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from typer.testing import CliRunner

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # a whole (tiny) squeeze run: ~30 s on a loaded 2-core machine


@pytest.fixture(scope="module")
def squeeze_run(tmp_path_factory):
    from searchgym.experiments.squeeze import experiment as sq
    from searchgym.train.grpo import RLArgs
    from searchgym.train.sft import SFTArgs
    from searchgym.train.tiny_lm import TinyLMConfig

    out = tmp_path_factory.mktemp("sq") / "run"
    cfg = sq.SqueezeConfig(out=str(out), seeds=1, arms=("grpo",), n_entities=40, demo_passes=1,
                           tiny=TinyLMConfig(vocab_size=500, hidden_size=32, num_layers=1, num_heads=2,
                                             intermediate_size=64, max_positions=512),
                           sft=SFTArgs(learning_rate=3e-3, max_steps=2, batch_size=8, micro_batch_size=8,
                                       warmup_steps=1),
                           rl=RLArgs(total_steps=1, prompts_per_step=2, group_size=2, max_new_tokens=8,
                                     micro_batch_size=4, checkpoint_every=1, max_context=512),
                           eval_questions=2, eval_shift_questions=1, eval_samples=2, threads=1)
    n = torch.get_num_threads()
    logs: list[str] = []
    try:
        sq.run(cfg, log=logs.append)
    finally:
        torch.set_num_threads(n)
    return out, logs


def test_each_stage_label_is_printed_once(squeeze_run):
    _, logs = squeeze_run
    from test_squeeze_progress import assert_monotone_stages

    seen = assert_monotone_stages(logs)  # [1/N], [2/N], ... in order, each once (issue 35 §3)
    labels = Counter(m.group(0) for line in logs if (m := re.match(r"\[\d+/\d+\]", line)))
    assert len(seen) == 8 and all(c == 1 for c in labels.values()), labels  # strategy policy ... report


def test_squeeze_models_carry_their_prompt_and_rollout_uses_it(squeeze_run, tmp_path):
    from searchgym.cli import app
    from searchgym.experiments.squeeze.experiment import TINY_PROMPT, SqueezeConfig

    out, _ = squeeze_run
    max_turns = SqueezeConfig().max_turns  # the fixture keeps the default env budget
    for d in ("base_model", "sft/model", "arms/grpo/seed1/final_model"):
        meta = json.loads((out / d / "searchgym_prompt.json").read_text())
        assert meta["prompt_template"] == TINY_PROMPT and meta["max_turns"] == max_turns, d
    model = out / "arms" / "grpo" / "seed1" / "final_model"
    s = tmp_path / "s.json"
    r = CliRunner().invoke(app, ["rollout", "--agent", str(model), "-n", "2", "--max-new-tokens", "8",
                                 "--no-progress", "--summary-json", str(s), "--out", str(tmp_path / "t.jsonl")])
    assert r.exit_code == 0, r.output
    assert json.loads(s.read_text())["episodes"] == 2
    # the env the model was evaluated in had the tiny LM's budget (max_turns searches + the answer at most)
    from searchgym.trajectory import read_trajectories

    assert all(len(t.steps) <= max_turns + 1 for t in read_trajectories(tmp_path / "t.jsonl"))
