"""The pre-registered cost rule (issue 31 §4/§7): a loss on a shift split is a cost of collapse only where it
exceeds the in-distribution loss on the same question type and the shuffled-reward arm's loss
(endpoints.shift_cost_block), and the README headline says a cost only then (report._cost_words)."""

from __future__ import annotations

import pytest

from searchgym.experiments.squeeze.endpoints import shift_cost_block
from searchgym.experiments.squeeze.report import _cost_words, shift_cost_table


def _run(grpo_attr: float, homonym_start: float = 0.6, shuffled: float | None = None) -> dict:
    arms = {"sft": {"per_family": {"attribute": 0.70}, "shift": {"shift_homonym": {"mean": 0.60}}},
            "grpo": {"per_family": {"attribute": grpo_attr}, "shift": {"shift_homonym": {"mean": 0.55}}}}
    if shuffled is not None:
        arms["grpo_shuffled"] = {"per_family": {"attribute": 0.5}, "shift": {"shift_homonym": {"mean": shuffled}}}
    return {"arms": arms, "start": {"shift": {"shift_homonym": {"mean": homonym_start},
                                              "shift_renamed": {"mean": 0.02}}}}


def _re(estimate: float, ci: list[float] | None) -> dict:
    return {"shift:shift_homonym": {"estimate": estimate, "ci": ci},
            "shift:shift_renamed": {"estimate": -0.01, "ci": [-0.02, -0.001]},
            "train_success": {"estimate": -0.04, "ci": [-0.09, 0.01]}}


def test_a_loss_larger_than_both_comparators_is_a_cost():
    units = [_run(0.69), _run(0.70)]  # in-distribution loss -0.01 and -0.00
    out = shift_cost_block(units, [_run(0.69, shuffled=0.58)], _re(-0.05, [-0.08, -0.02]))
    assert list(out) == ["shift_homonym"]  # shift_renamed starts under 0.2: it cannot show a loss
    r = out["shift_homonym"]
    assert r["family"] == "attribute" and r["in_distribution_units"] == 2 and r["shuffled_runs"] == 1
    assert abs(r["in_distribution_loss"] - (-0.005)) < 1e-9 and abs(r["shuffled_loss"] - (-0.02)) < 1e-9
    assert r["verdict"] == "cost"
    assert _cost_words({"estimate": -0.05, "ci": [-0.08, -0.02]}, r).startswith("a cost: it exceeds")


def test_a_loss_the_in_distribution_questions_share_is_not_a_cost():
    units = [_run(0.60), _run(0.62)]  # GRPO loses -0.09 on train attribute questions
    r = shift_cost_block(units, [_run(0.6, shuffled=0.40)], _re(-0.05, [-0.08, -0.02]))["shift_homonym"]
    assert r["verdict"] == "not_a_cost"
    assert "attribute questions (-0.090) is at least as large" in r["why"]
    assert "shuffled-reward GRPO loses at least as much (-0.200)" in r["why"]
    words = _cost_words({"estimate": -0.05, "ci": [-0.08, -0.02]}, r)
    assert "**not** a cost of collapse" in words and "a cost:" not in words
    table = "\n".join(shift_cost_table({"shift_cost": {"shift_homonym": r}}))
    # beside each comparator's mean, its t interval over the runs (two runs here; one shuffled run: none)
    assert r["in_distribution_ci"] == pytest.approx([-0.217060, 0.037060], abs=1e-5) and r["shuffled_ci"] is None
    assert ("| `shift_homonym` | -0.050 [-0.080, -0.020] | attribute | -0.090 [-0.217, +0.037] (2 runs) "
            "| -0.200 (1 runs) | not a cost") in table


def test_no_loss_and_missing_comparators_are_said_not_filled():
    units = [_run(0.60)]
    assert shift_cost_block(units, [], _re(-0.05, [-0.09, 0.01]))["shift_homonym"]["verdict"] == "no_loss"
    r = shift_cost_block(units, [], _re(-0.05, [-0.08, -0.02]))["shift_homonym"]
    assert (r["verdict"], r["why"], r["shuffled_loss"]) == ("unknown", "no shuffled-reward arm to compare with", None)
    assert "not known (no shuffled-reward arm" in _cost_words({"estimate": -0.05, "ci": [-0.08, -0.02]}, r)
    assert _cost_words({"estimate": -0.05, "ci": [-0.09, 0.01]}, r) == "no cost shown under random effects."
    # without the rule (an older worlds.json) a shown loss is only a loss
    assert _cost_words({"estimate": -0.05, "ci": [-0.08, -0.02]}, None).startswith("a loss; whether it is a cost")
    assert shift_cost_block(units, [], _re(-0.05, None))["shift_homonym"]["verdict"] == "unknown"


def test_a_split_whose_start_is_on_the_floor_in_any_run_is_not_judged():
    units = [_run(0.60), _run(0.60, homonym_start=0.1)]
    assert shift_cost_block(units, [], _re(-0.05, [-0.08, -0.02])) == {}
