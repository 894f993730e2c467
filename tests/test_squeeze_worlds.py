"""The LM comparison pooled over world seeds (``searchgym.experiments.squeeze.worlds``, ``squeeze --worlds``).

The integration tests read the committed runs on worlds 0 and 1 (``results/``), so the pooled figures are
checked against each run's own comparisons, computed by the analysis core when it ran."""

from __future__ import annotations

import json
import math
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from searchgym.errors import ConfigError
from searchgym.experiments.squeeze.stats import diff_ci
from searchgym.experiments.squeeze.worlds import load_worlds, pool_diffs, worlds_block, worlds_markdown

RESULTS = Path(__file__).resolve().parents[1] / "results"
WORLD0, WORLD1 = RESULTS / "squeeze-default-v3", RESULTS / "squeeze-world1-v3"
WORLD5 = RESULTS / "squeeze-world5-v3"
# worlds 2-4: their starts failed the gate, and the runs stopped there (start_eval/gate.json, config.json)
FAILED = [RESULTS / f"squeeze-world{w}-v3" for w in (2, 3, 4)]


def test_pool_of_identical_worlds_keeps_the_difference_and_narrows_the_interval():
    a, b = [0.50, 0.55, 0.48, 0.52, 0.51, 0.49], [0.40, 0.42, 0.38, 0.45, 0.41, 0.39]
    one = diff_ci(a, b)
    p = pool_diffs([(a, b)] * 3)
    assert p["pooled"]["diff"] == pytest.approx(one["diff"])
    # three worlds' worth of seeds: the standard error shrinks by sqrt(3)
    assert p["pooled"]["se"] == pytest.approx(math.sqrt(np.var(a, ddof=1) / 6 + np.var(b, ddof=1) / 6) / math.sqrt(3))
    assert p["pooled"]["ci"][1] - p["pooled"]["ci"][0] < one["ci"][1] - one["ci"][0]
    # identical worlds do not disagree, and the across-worlds interval is a point
    assert p["heterogeneity"]["Q"] == pytest.approx(0.0) and p["heterogeneity"]["I2"] == 0.0
    assert p["across"]["ci"] == pytest.approx([one["diff"], one["diff"]])
    assert p["same_sign"] == 3 and p["shown"] == 3 and p["pooled"]["n_seeds"] == [18, 18]


def test_worlds_that_disagree_show_heterogeneity_and_a_wide_across_interval():
    rng = np.random.default_rng(0)
    base = list(rng.normal(0.0, 0.01, 6))
    pairs = [([x + shift for x in rng.normal(0.0, 0.01, 6)], base) for shift in (-0.3, 0.0, 0.3)]
    p = pool_diffs(pairs, margin=0.1)
    assert p["heterogeneity"]["p"] < 1e-6 and p["heterogeneity"]["I2"] > 0.9
    lo, hi = p["across"]["ci"]
    assert lo < -0.3 and hi > 0.3  # a new world could go either way
    assert p["pooled"]["verdict"] in ("equivalent", "inconclusive", "difference")
    assert p["same_sign"] <= 2


def test_pooled_figures_agree_with_each_runs_own_comparisons():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the two committed runs share every setting but the world and the start
        block = worlds_block(load_worlds([WORLD0, WORLD1]))
    assert block["worlds"] == [0, 1] and not block["left_out"] and not block["config_differences"]
    g = block["arms"]["grpo"]
    runs = [json.loads((d / "summary.json").read_text()) for d in (WORLD0, WORLD1)]
    for key in ("test_success", "strategy_entropy", "slot_entropy"):
        own = [r["comparisons"]["grpo_vs_sft"][key] for r in runs]
        fig = g["figures"][key]
        for mine, theirs in zip(fig["per_world"], own):
            assert mine["diff"] == pytest.approx(theirs["diff"]) and mine["ci"] == pytest.approx(theirs["ci"])
        assert fig["pooled"]["diff"] == pytest.approx(np.mean([o["diff"] for o in own]))
        assert fig["pooled"]["n_seeds"] == [12, 12]
    # the pooled shift splits are Holm-corrected over the splits both worlds ran
    shifts = [k for k in g["figures"] if k.startswith("shift:")]
    assert len(shifts) == 6 and all(g["figures"][k]["pooled"]["p_holm"] >= g["figures"][k]["pooled"]["p"]
                                    for k in shifts)
    md = worlds_markdown(block)
    assert "| GRPO − continued SFT | world 0 | world 1 |" in md and "Over worlds 0, 1" in md


def test_the_committed_worlds_pool_0_1_5_and_leave_out_the_failed_starts():
    """The README's multi-world line, from the committed runs: worlds 0, 1 and 5 pooled, 2-4 left out."""
    with pytest.warns(UserWarning, match="competence gate"):
        block = worlds_block(load_worlds([WORLD0, WORLD1, *FAILED, WORLD5]))
    assert block["worlds"] == [0, 1, 5] and [lo["world_seed"] for lo in block["left_out"]] == [2, 3, 4]
    assert all(lo["lower_bound"] < 0.3 for lo in block["left_out"]) and not block["config_differences"]
    assert "World 2 is left out: its SFT start failed the competence gate (test success 0.276" in \
        worlds_markdown(block)
    g = block["arms"]["grpo"]["figures"]
    assert g["slot_entropy"]["pooled"]["n_seeds"] == [18, 18] and g["slot_entropy"]["same_sign"] == 3
    assert set(block["arms"]) == {"grpo", "grpo_kl", "grpo_critique"}
    assert set(block["one_world_only"]) == {"grpo_klcov", "grpo_clipcov", "grpo_ent"}


def test_a_failed_gate_leaves_its_world_out_with_a_warning(tmp_path):
    s = json.loads((WORLD1 / "summary.json").read_text())
    s["competence"]["passed"] = False
    s["config"]["world_seed"] = 7
    (tmp_path / "summary.json").write_text(json.dumps(s))
    with pytest.warns(UserWarning, match="world 7 .* competence gate"):
        block = worlds_block(load_worlds([WORLD0, WORLD1, tmp_path]))
    assert block["worlds"] == [0, 1] and block["left_out"][0]["world_seed"] == 7


def test_bad_world_lists_are_clear_errors(tmp_path):
    with pytest.raises(ConfigError, match="world seed"):
        load_worlds([WORLD1, WORLD1])
    with pytest.raises(ConfigError, match="no .*summary.json"):
        load_worlds([tmp_path / "missing"])
    (tmp_path / "summary.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not a squeeze summary"):
        load_worlds([tmp_path])


def test_cli_headline_pools_the_listed_worlds_into_readme_and_docs(tmp_path):
    from typer.testing import CliRunner

    from searchgym.cli import app
    from searchgym.experiments.squeeze.commands import README_BEGIN, README_END, RESULTS_BEGIN, RESULTS_END

    out = tmp_path / "w0"
    shutil.copytree(WORLD0, out)
    readme, docs = tmp_path / "README.md", tmp_path / "squeeze.md"
    readme.write_text(f"# x\n{README_BEGIN}\n{README_END}\n")
    docs.write_text(f"# y\n{RESULTS_BEGIN}\n{RESULTS_END}\n")
    r = CliRunner().invoke(app, ["squeeze", "--headline", "--out", str(out), "--worlds", str(WORLD1),
                                 "--readme", str(readme), "--docs", str(docs)])
    assert r.exit_code == 0, r.output
    block = json.loads((out / "worlds.json").read_text())
    assert block["worlds"] == [0, 1]
    head = readme.read_text().split(README_BEGIN)[1].split(README_END)[0].strip().splitlines()
    # the headline's intervals: worlds as random effects (issue 31 §5), reward first
    assert len(head) <= 8 and head[1].startswith("- LM, GRPO − continued SFT with worlds 0, 1 as random effects")
    assert block["primary_endpoints"]["primary"] == "strategy_entropy_rarefied"
    assert block["random_effects"]["grpo"]["k_worlds"] == 2 and "**Worlds as random effects**" in docs.read_text()
    assert "**Across world seeds 0, 1**" in docs.read_text()
    bad = CliRunner().invoke(app, ["squeeze", "--headline", "--out", str(out), "--worlds", str(tmp_path / "nope")])
    assert bad.exit_code == 2 and "summary.json" in bad.output


def test_a_nan_seed_value_is_never_a_difference():
    # issue 33: one NaN seed value gave diff NaN, CI [nan, nan], p 0.0 and the verdict "difference"
    import math

    from searchgym.experiments.squeeze.stats import diff_ci
    from searchgym.experiments.squeeze.worlds import pool_diffs

    nan = float("nan")
    d = diff_ci([0.1, nan, 0.3], [0.5, 0.6, 0.7], margin=0.05)
    assert d["detectable"] is False and d["verdict"] == "inconclusive" and d["equivalent"] is False
    out = pool_diffs([([0.1, nan, 0.3], [0.5, 0.6, 0.7]), ([0.2, 0.3, 0.25], [0.6, 0.65, 0.7])], margin=0.05)
    p = out["pooled"]
    assert p["verdict"] == "inconclusive" and p["detectable"] is False and p["p"] is None
    assert all(math.isnan(x) for x in p["ci"])


def test_a_second_start_joins_the_random_effects_only():
    """A run of world 1 from another SFT start (its gate figures differ) joins the headline's random effects as a
    fourth unit on 2 df; a run that repeats a pooled start, or whose start failed the gate, is left out; the
    fixed-effect pooled figures stay the three worlds'."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        three = worlds_block(load_worlds([WORLD0, WORLD1, WORLD5]))
        runs = load_worlds([WORLD1])
        other = json.loads(json.dumps(runs[0]))
        other["competence"]["successes"] += 3.25
        same = json.loads(json.dumps(load_worlds([WORLD0])[0]))
        failed = json.loads(json.dumps(other))
        failed["competence"].update(successes=50.0, passed=False)
        block = worlds_block(load_worlds([WORLD0, WORLD1, WORLD5]), more_starts=[other, same, failed])
    assert [m["world_seed"] for m in block["more_starts"]] == [1]
    re_ = block["random_effects"]["grpo"]
    assert re_["starts_per_world"] == {"0": 1, "1": 2, "5": 1} and re_["k_worlds"] == 3
    e = re_["endpoints"]["slot_entropy"]
    assert e["k"] == 4 and e["df"] == 2
    assert block["arms"]["grpo"]["figures"] == three["arms"]["grpo"]["figures"]
    assert three["random_effects"]["grpo"]["endpoints"]["slot_entropy"]["k"] == 3
