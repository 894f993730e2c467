"""The organism's budget sweep (issue 31 §6): GRPO against rejection-sampling SFT, the supervised routing fit
(learnability control), routing share per budget with Wilson intervals, and the MI split routes vs mixed."""

from __future__ import annotations

import numpy as np
import pytest

from searchgym.experiments.squeeze.organism_budget import (
    CONTRAST,
    MI_KEYS,
    SPLITS,
    SUPERVISED,
    budget_table,
    default_base,
    run_budget,
)
from searchgym.experiments.squeeze.strategy_policy import StrategyConfig, best_labels, outcomes_for

BASE = {"n_entities": 300, "world_seed": 3, "prompts_per_step": 8, "sft_steps": 30, "splits": SPLITS}
STEPS = (3, 12)
SEEDS = 3


@pytest.fixture(scope="module")
def swept():
    out = outcomes_for(StrategyConfig(n_entities=300, world_seed=3, splits=SPLITS))
    log: list[str] = []
    res = run_budget(steps=STEPS, seeds=SEEDS, base=BASE, outcomes=out, log=log.append)
    return res, log


def test_best_labels_prefer_the_majority_on_ties_and_skip_the_unsolvable():
    em = np.array([[1, 1, 0], [0, 0, 1], [0, 0, 0], [1, 0, 0]], dtype=float)
    assert best_labels(em, prefer=1).tolist() == [1, 2, -1, 0]
    # without the preference a tie goes to the strategy with the higher success over all questions (column 0)
    assert best_labels(em, prefer=2).tolist() == [0, 2, -1, 0]


def test_every_arm_at_every_budget_with_a_wilson_interval_and_a_progress_line(swept):
    res, log = swept
    arms = [*CONTRAST, SUPERVISED]
    assert [(r["arm"], r["steps"]) for r in res["rows"]] == [("SFT start", 0)] + [
        (a, s) for s in STEPS for a in arms
    ]
    assert len([line for line in log if " steps: routes " in line]) == len(STEPS) * len(arms)
    for r in res["rows"]:
        k, n = r["routing"]["k"], r["routing"]["n"]
        lo, hi = r["routing"]["ci"]
        assert n == SEEDS and 0 <= lo <= k / n <= hi <= 1 and hi - lo > 0
    table = budget_table(res)
    assert sum(line.startswith("| grpo | ") for line in table) == len(STEPS)
    assert any(line.startswith(f"| {STEPS[-1]} | ") for line in table)  # the GRPO - rs_sft rows


def test_mi_split_counts_add_up_and_average_back_to_the_arm_mean(swept):
    res, _ = swept
    for r in res["rows"][1:]:
        sp = r["mi_split"]
        assert sp["routes"]["n"] + sp["mixed"]["n"] == SEEDS
        assert sp["routes"]["n"] == r["routing"]["k"]
        for key in MI_KEYS:
            parts = [(g["n"], g[key]["mean"]) for g in (sp["routes"], sp["mixed"]) if g["n"]]
            assert sum(n * m for n, m in parts) / SEEDS == pytest.approx(r[key]["mean"])
        # "nickname or not" coarsens the families, so its MI cannot exceed the MI over all families
        assert r["mi_minority_strategy"]["mean"] <= r["mi_family_strategy"]["mean"] + 1e-12


def test_grpo_minus_rs_sft_is_the_difference_of_the_rows(swept):
    res, _ = swept
    rows = {(r["arm"], r["steps"]): r for r in res["rows"]}
    assert [c["steps"] for c in res["contrasts"]] == list(STEPS)
    for c in res["contrasts"]:
        a, b = rows[(CONTRAST[0], c["steps"])], rows[(CONTRAST[1], c["steps"])]
        for key in ("softmax_entropy", "minority_heldout_success"):
            assert c[key]["diff"] == pytest.approx(a[key]["mean"] - b[key]["mean"])
            assert c[key]["ci"][0] <= c[key]["diff"] <= c[key]["ci"][1]


def test_script_help_explains_itself(capsys):
    import runpy
    from pathlib import Path

    main = runpy.run_path(str(Path(__file__).parents[1] / "scripts" / "organism_budget.py"))["main"]
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for word in (
        "--steps",
        "--seeds",
        "--arms",
        "--jobs",
        "--json",
        "Wilson",
        "supervised",
        "rejection-sampling",
    ):
        assert word in text


@pytest.mark.slow
def test_supervised_fit_routes_on_the_default_world():
    """The learnability control: on the squeeze run's world 0 the same features and policy class, trained on the
    best strategy of each question, route the held-out nicknames in every seed at 300 steps (about a minute)."""
    res = run_budget(steps=(300,), seeds=3, arms=(), base=default_base(0), log=lambda s: None)
    (row,) = res["rows"][1:]
    assert row["arm"] == SUPERVISED and row["routing"]["k"] == row["routing"]["n"] == 3
