"""The squeeze experiment's strategy-policy stage: runs first, lands in summary.json / report / plots, resumes."""

from __future__ import annotations

import json
import re

import pytest
from test_train_squeeze import _tiny_cfg  # tests/ is on sys.path under pytest
from typer.testing import CliRunner

from searchgym.cli import app
from searchgym.errors import ConfigError

ARMS = ("sft", "grpo", "grpo_count")


@pytest.mark.slow  # an end-to-end squeeze run (minutes on 2 cores); `make test-slow`
def test_strategy_stage_summary_plots_and_resume(tmp_path, one_thread):
    from searchgym.experiments.squeeze import experiment as sq

    cfg = _tiny_cfg(tmp_path / "run", strategy_seeds=3, strategy_arms=ARMS, strategy_steps=6,
                    contextual_seeds=2, contextual_steps=3)
    logs: list[str] = []
    summary = sq.run(cfg, log=logs.append)
    out = tmp_path / "run"
    # the stage ran first, before the world/LM stages
    from test_squeeze_progress import assert_monotone_stages

    assert_monotone_stages(logs)
    first = next(i for i, s in enumerate(logs) if re.match(r"\[1/\d+\] strategy policy", s))
    assert first < next(i for i, s in enumerate(logs) if re.match(r"\[\d+/\d+\] world", s))
    saved = json.loads((out / "strategy_policy.json").read_text())
    assert saved["result"]["seeds"] == 3 and set(saved["result"]["arms"]) == set(ARMS)

    s = json.loads((out / "summary.json").read_text())
    block = s["strategy_policy"]
    assert block == summary["strategy_policy"]
    assert block["seeds"] == 3 and set(block["arms"]) == set(ARMS)
    for b in [block["start"], *block["arms"].values()]:
        for key in ("strategy_entropy", "train_success", "test_success"):
            assert set(b[key]) == {"mean", "ci", "half"} and 0 <= b[key]["mean"] <= (1 if "success" in key else 3)
        assert set(b["shift_success"]) == {"shift_phrasing", "shift_family", "shift_type", "shift_strategy",
                                           "shift_renamed", "shift_homonym"}  # world version 3 (the default)
        lo, hi = b["shift_success"]["shift_strategy"]["ci"]  # the LM arms' [lo, hi] form
        assert lo <= b["shift_success"]["shift_strategy"]["mean"] <= hi
        assert sum(b["shares"].values()) == pytest.approx(1.0, abs=1e-3)
    hist = block["arms"]["grpo"]["share_history"]
    assert hist["steps"][0] == 0 and hist["steps"][-1] == 6
    assert all(len(v) == len(hist["steps"]) for v in hist["shares"].values())
    # the world the run used: heuristic EM per split and strategy, and each strategy's share of the SFT demos
    w = s["world"]
    assert set(w["em"]) >= {"train", "shift_strategy"} and 0 <= w["em"]["train"]["decompose"] <= 1
    assert w["em"]["shift_strategy"]["entity"] > w["em"]["shift_strategy"]["decompose"]
    assert w["version"] == 3 and w["preset"] == "squeeze2" and {"shift_renamed", "shift_homonym"} <= set(w["em"])
    assert "hops" in w["demo_share"]  # DEFAULT_WEIGHTS name it (issue 21)
    assert sum(w["demo_share"].values()) == pytest.approx(1.0) and "decompose" in w["demo_share"]
    # the organism on the mixed train split: organism.contextual, each arm with routing_share and its Wilson ci
    ctx = s["organism"]["contextual"]
    assert ctx["seeds"] == 2 and {"rs_sft", "grpo_majority", "grpo_critique"} <= set(ctx["arms"])
    for b in ctx["arms"].values():
        assert len(b["routing_share"]["ci"]) == 2 and "nickname" in b["per_family"]
        assert b["mi_family_strategy"]["ci"] is not None and b["minority_heldout_success"]["mean"] is not None
    assert "**Strategy policy on a mixed train split**" in (out / "report.md").read_text()
    # the figures agree with the saved raw result
    assert block["arms"]["grpo"]["train_success"] == saved["result"]["arms"]["grpo"]["train_success"]

    for f in ("plots/strategy_shares.png", "plots/strategy_success.png"):
        assert (out / f).stat().st_size > 1000, f
    md = (out / "report.md").read_text()
    assert "plots/strategy_shares.png" in md and "plots/strategy_success.png" in md
    assert "**Strategy policy**" in md and "| SFT start |" in md
    assert "shift_strategy success (questions whose best strategy" in md
    assert "strategy_success.png" not in (out / "report.html").read_text() or "data:image/png" in \
        (out / "report.html").read_text()
    hl = sq.headline(out)
    assert "| GRPO |" in hl and "GRPO + count bonus" in hl

    # --resume reuses the saved result: no new "[i/N] ... arms x" line, same numbers
    mtime = (out / "strategy_policy.json").stat().st_mtime_ns
    cfg2 = _tiny_cfg(tmp_path / "run", strategy_seeds=3, strategy_arms=ARMS, strategy_steps=6,
                     contextual_seeds=2, contextual_steps=3, resume=True)
    logs2: list[str] = []
    s2 = sq.run(cfg2, log=logs2.append)
    assert any("strategy policy: reusing" in x for x in logs2), logs2
    assert not any("arms x" in x for x in logs2)
    assert (out / "strategy_policy.json").stat().st_mtime_ns == mtime
    assert s2["strategy_policy"]["arms"] == block["arms"]
    # ... but not when its settings changed
    cfg3 = _tiny_cfg(tmp_path / "run", strategy_seeds=2, strategy_arms=("grpo",), strategy_steps=2, resume=True,
                     contextual_seeds=0)
    logs3: list[str] = []
    s3 = sq.run(cfg3, log=logs3.append)
    assert any("1 arms x 2 seeds" in x for x in logs3), logs3
    assert s3["strategy_policy"]["seeds"] == 2 and set(s3["strategy_policy"]["arms"]) == {"grpo"}


def test_strategy_stage_disabled_leaves_no_block(tmp_path, one_thread):
    from searchgym.experiments.squeeze.strategy_stage import run_strategy_stage, strategy_block

    cfg = _tiny_cfg(tmp_path / "run", strategy_seeds=0)
    assert run_strategy_stage(cfg, tmp_path) is None and strategy_block(None) is None
    assert not (tmp_path / "strategy_policy.json").exists()


def test_strategy_config_errors_name_the_flag(tmp_path):
    from searchgym.experiments.squeeze.experiment import SqueezeConfig

    with pytest.raises(ConfigError, match="--strategy-seeds"):
        SqueezeConfig(out=str(tmp_path), strategy_seeds=-1).validate()
    with pytest.raises(ConfigError, match="--strategy-arms"):
        SqueezeConfig(out=str(tmp_path), strategy_arms=("grpo", "dpo")).validate()
    with pytest.raises(ConfigError, match="--strategy-steps"):
        SqueezeConfig(out=str(tmp_path), strategy_steps=0).validate()
    assert SqueezeConfig.preset(quick=True).strategy_seeds >= 10 and SqueezeConfig().strategy_seeds >= 20
    out = tmp_path / "cli"
    r = CliRunner().invoke(app, ["squeeze", "--quick", "--strategy-seeds", "-3", "--out", str(out)])
    assert r.exit_code == 2 and "--strategy-seeds" in r.output, r.output
    assert not (out / "summary.json").exists()
