"""Issue 35 §4: a 1-seed (demo) report leads with what it can show (the strategy policy's collapse under GRPO),
defines its terms where they first appear, gives one start test-success figure, and says in one line that its
LM part is a pipeline check and what the full run found; that quoted finding is the one the shipped per-seed
results give with worlds as random effects."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = [ROOT / "results" / d / "summary.json" for d in ("squeeze-default-v3", "squeeze-world1-v3",
                                                        "squeeze-world5-v3")]


def _ci(d):
    return {"mean": d[0], "ci": [d[1], d[2]]}


def _summary(seeds: int) -> dict:
    arm = {"label": "GRPO", "seeds": seeds, "train_success": {"mean": 0.4, "values": [0.4]},
           "slot_entropy": {"mean": 3.0}, "slot_effective_number": {"mean": 20.0},
           "rollout_reward_first": 0.3, "rollout_reward_last": 0.4}
    return {"config": {"seeds": seeds, "rl": {"total_steps": 12, "learning_rate": 5e-4}},
            "start": {"train_success": {"mean": 0.45}, "slot_entropy": {"mean": 3.2},
                      "slot_effective_number": {"mean": 25.0}, "shift": {}},
            "arms": {"grpo": arm, "sft": {**arm, "label": "SFT"}}, "findings": {},
            "competence": {"passed": True, "test_success": 0.386, "lower_bound": 0.328, "gate": 0.3,
                           "questions": 256, "successes": 98.8},
            "strategy_policy": {"seeds": 10, "steps": 30, "strategies": [f"s{i}" for i in range(8)],
                                "start": {"strategy_entropy": _ci((1.784, 1.78, 1.79)),
                                          "train_success": _ci((0.6, 0.59, 0.61)), "shift_success": {}},
                                "arms": {"grpo": {"strategy_entropy": _ci((0.189, 0.15, 0.22)),
                                                  "train_success": _ci((0.8, 0.79, 0.81)), "shift_success": {}},
                                         "sft": {"strategy_entropy": _ci((1.7, 1.69, 1.71)),
                                                 "train_success": _ci((0.6, 0.59, 0.61)), "shift_success": {}}}}}


def test_a_one_seed_report_leads_with_the_strategy_policy_and_calls_the_lm_a_pipeline_check(monkeypatch):
    from searchgym.experiments.squeeze import report

    monkeypatch.setattr(report, "comparison_lines", lambda s: [])
    monkeypatch.setattr(report, "_dose_lines", lambda s: [])
    monkeypatch.setattr(report, "_organism_details", lambda s: [])
    lines = report._report_verdict(_summary(1))
    text = "\n".join(lines)
    assert lines[0] == "## Verdict: what this run shows"
    first = text.index("strategy policy collapses under GRPO")
    assert first < text.index("pipeline check") < text.index("## Details")
    # terms defined where they first appear
    assert text.index("*strategy policy* (elsewhere called the *organism*)") < text.index("*strategy entropy* (")
    assert "1.784 [1.780, 1.790]" in text and "0.189 [0.150, 0.220]" in text
    lm = next(x for x in lines if "pipeline check, not a finding" in x)
    assert report.FULL_RUN_FINDING in lm
    # one start test-success figure: the gate line states its bound, not a second point estimate
    assert "0.386" not in text and "0.328" in text


def test_a_multi_seed_report_keeps_its_verdict():
    from searchgym.experiments.squeeze import report

    assert report._report_verdict(_summary(2))[0] == "## Verdict"


def test_the_quoted_full_run_finding_is_what_the_results_give():
    assert all(p.exists() for p in RUNS), "the shipped per-seed results (results/) are missing"
    from searchgym.experiments.squeeze.random_effects import random_effects_block
    from searchgym.experiments.squeeze.report import FULL_RUN_FINDING

    e = random_effects_block([json.loads(p.read_text()) for p in RUNS])["endpoints"]

    def fmt(x):
        return f"{x:+.3f}".replace("-", "−").replace("+0.000", "+0.000")

    quoted = re.findall(r"[−+]\d\.\d{3} \[[−+]\d\.\d{3}, [−+]\d\.\d{3}\]", FULL_RUN_FINDING)
    want = [f"{fmt(d['estimate'])} [{fmt(d['ci'][0])}, {fmt(d['ci'][1])}]"
            for d in (e["train_success"], e["slot_entropy"], e["strategy_entropy_rarefied"], e["test_success"])]
    want[-1] = want[-1].replace("−0.000 ", "+0.000 ")
    assert quoted == want


def test_the_endpoints_table_and_the_floor_line():
    from searchgym.experiments.squeeze.report import _floor_line, endpoints_table

    s = {"start": {"template_entropy_rarefied": 3.1, "copy_rate": 0.16, "rename_follow_rate": {"shift_homonym": 0.0}},
         "shift_floor": {"shift_type": {"start": 0.09, "cannot_show_loss": True},
                         "shift_homonym": {"start": 0.6, "cannot_show_loss": False}},
         "arms": {"grpo": {"label": "GRPO", "kl_to_start": {"mean": [0.0, 0.2]},
                           "train_success_change": {"mean": -0.02, "ci": [-0.05, 0.01]},
                           "template_entropy_rarefied": {"mean": 2.9}, "template_entropy_rarefied_no_copy": {"mean": 2.8},
                           "copy_rate": {"mean": 0.04}, "rename_follow_rate": {"shift_homonym": {"mean": 0.0}}}}}
    rows = endpoints_table(s)
    assert rows[2].startswith("| SFT start | 0 |") and rows[3] == (
        "| GRPO | 0.200 | -0.020 [-0.050, 0.010] | 2.900 | 2.800 | 0.040 | 0.000 |")
    assert _floor_line(s) == ["- Cannot show a loss (the SFT start's success is under 0.2): shift_type (0.090)."]
    assert endpoints_table({"start": {}, "arms": {"x": {"label": "X"}}}) == []
