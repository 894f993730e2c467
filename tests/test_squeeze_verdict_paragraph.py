"""The squeeze report answers in one paragraph (issue 21 §5), from a real summary.json (the GPU run's)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from searchgym.experiments.squeeze.report import _report_verdict, verdict_paragraph

SUMMARY = Path(__file__).resolve().parents[1] / "results" / "squeeze-cuda-h200" / "summary.json"


def test_a_failed_gate_is_the_whole_lm_answer():
    s = json.loads(SUMMARY.read_text())
    para = verdict_paragraph(s)
    assert para.startswith("The LM answers nothing") and "0.262" in para
    assert _report_verdict(s)[2].startswith("**In one paragraph.** The LM answers nothing")


def test_a_passed_gate_gives_the_lm_verdict_cost_remedies_and_dose():
    s = copy.deepcopy(json.loads(SUMMARY.read_text()))
    s["competence"]["passed"] = True
    para = verdict_paragraph(s)
    g = s["comparisons"]["grpo_vs_sft"]
    assert "For the LM (2 seed(s) per arm, 30 steps at lr 0.0002" in para
    assert f"{g['strategy_entropy']['diff']:+.3f}" in para          # the verdict carries its interval
    assert "largest cost is on shift_" in para and "4 of 4 RL arms moved it" in para
    assert "GRPO + KL to SFT start" in para and "GRPO + entropy bonus" in para   # every remedy, vs continued SFT
    assert "organism" not in para  # the GPU run has no strategy-policy stages: nothing is said of them


def test_a_shift_cost_says_whether_it_survives_the_holm_correction():
    """The default run on world v3 (sft and grpo arms): shift_homonym's own interval excludes 0, but over the six
    shift splits its Holm-adjusted p does not; the verdict says both."""
    s = json.loads((SUMMARY.parents[1] / "squeeze-default-v3" / "summary.json").read_text())
    para = verdict_paragraph(s)
    assert "largest cost is on shift_homonym -0.050 [-0.097, -0.003] (difference); Holm p 0.239 over 6 shift " \
           "splits: not significant" in para
    s["comparisons"]["grpo_vs_sft"]["shift:shift_homonym"]["p_holm"] = 0.01
    assert "Holm p 0.01 over 6 shift splits." in verdict_paragraph(s)
