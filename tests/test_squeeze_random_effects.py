"""Worlds as random effects (issue 31 §5): DerSimonian-Laird and HKSJ against hand computations, and the block
the headline reads from per-world summaries."""

from __future__ import annotations

import math

import pytest

from searchgym.experiments.squeeze.random_effects import (
    PRIMARY_COST_ENDPOINT,
    PRIMARY_ENDPOINT,
    dersimonian_laird,
    random_effects_block,
    random_effects_lines,
    world_difference,
)

T975_2DF = 4.302652729911275  # t quantile 0.975 on 2 df
T975_1DF = 12.706204736174698


def test_dl_with_between_world_variance_matches_the_hand_computation():
    # y = 1, 2, 4 with v = 1 each: w = 1, FE mean 7/3, Q = (16 + 1 + 25)/9 = 42/9, C = 3 - 3/3 = 2,
    # tau^2 = (42/9 - 2)/2 = 4/3, w* = 3/7 each, mu = 7/3, SE = sqrt(7/9)
    r = dersimonian_laird([1.0, 2.0, 4.0], [1.0, 1.0, 1.0])
    assert r["k"] == 3 and r["df"] == 2
    assert r["Q"] == pytest.approx(42 / 9) and r["tau2"] == pytest.approx(4 / 3)
    assert r["estimate"] == pytest.approx(7 / 3) and r["se"] == pytest.approx(math.sqrt(7 / 9))
    assert r["ci"] == pytest.approx([7 / 3 - T975_2DF * math.sqrt(7 / 9), 7 / 3 + T975_2DF * math.sqrt(7 / 9)])
    assert r["I2"] == pytest.approx((42 / 9 - 2) / (42 / 9))
    # HKSJ: SE^2 = sum w*(y-mu)^2 / ((k-1) sum w*) = (3/7)(42/9) / (2 * 9/7) = 7/9: equal to DL's here
    assert r["hksj"]["se"] == pytest.approx(math.sqrt(7 / 9))


def test_dl_without_heterogeneity_is_the_fixed_effect_and_hksj_differs():
    # y = 0, 1 with v = 1, 4: w = 1, 1/4, FE = 0.2, Q = 0.04 + 0.16 = 0.2 < k - 1, so tau^2 = 0;
    # SE = sqrt(1/1.25); HKSJ SE^2 = Q / (1 * 1.25) = 0.16
    r = dersimonian_laird([0.0, 1.0], [1.0, 4.0])
    assert r["tau2"] == 0.0 and r["estimate"] == pytest.approx(0.2) and r["I2"] == 0.0
    assert r["se"] == pytest.approx(math.sqrt(0.8))
    assert r["ci"] == pytest.approx([0.2 - T975_1DF * math.sqrt(0.8), 0.2 + T975_1DF * math.sqrt(0.8)])
    assert r["hksj"]["se"] == pytest.approx(0.4)
    assert r["hksj"]["ci"] == pytest.approx([0.2 - T975_1DF * 0.4, 0.2 + T975_1DF * 0.4])


def test_one_world_or_zero_variance_gives_no_interval():
    assert dersimonian_laird([0.3], [0.01])["ci"] is None
    assert dersimonian_laird([0.3, 0.1], [0.01, 0.0])["ci"] is None
    assert world_difference([1.0], [0.0, 1.0]) is None
    d, v = world_difference([1.0, 3.0], [0.0, 0.0, 0.0])
    assert d == 2.0 and v == pytest.approx(2.0 / 2)


def _summary(world: int, arm_vals: list[float], base_vals: list[float]) -> dict:
    block = {"values": arm_vals}
    return {"config": {"world_seed": world},
            "arms": {"grpo": {k: {"values": arm_vals} for k in ("slot_entropy", PRIMARY_ENDPOINT)}
                     | {"shift": {"shift_homonym": block}},
                     "sft": {k: {"values": base_vals} for k in ("slot_entropy", PRIMARY_ENDPOINT)}
                     | {"shift": {"shift_homonym": {"values": base_vals}}}}}


def test_block_pools_per_world_differences_and_names_the_primary_endpoints():
    # world differences 1, 2, 4, each with v = 0.5/2 + 0.5/2 = 0.5
    sums = [_summary(w, [d - 0.5, d + 0.5], [-0.5, 0.5]) for w, d in ((0, 1.0), (1, 2.0), (5, 4.0))]
    b = random_effects_block(sums)
    assert b["primary_endpoint"] == PRIMARY_ENDPOINT and b["primary_cost_endpoint"] == PRIMARY_COST_ENDPOINT
    assert b["k_worlds"] == 3 and b["starts_per_world"] == {"0": 1, "1": 1, "5": 1}
    e = b["endpoints"]["slot_entropy"]
    assert e["per_world"] == pytest.approx([1.0, 2.0, 4.0]) and e["per_world_var"] == pytest.approx([0.5] * 3)
    assert e["estimate"] == pytest.approx(7 / 3) and e["worlds"] == [0, 1, 5]
    # Q = 2 * 42/9, C = 2/0.5 - (3*4)/(2/0.5 * ... ) -> hand: w = 2, C = 6 - 12/6 = 4, tau^2 = (84/9 - 2)/4
    assert e["tau2"] == pytest.approx((84 / 9 - 2) / 4)
    assert b["endpoints"]["shift:shift_homonym"]["estimate"] == pytest.approx(7 / 3)
    assert b["endpoints"]["test_success"]["ci"] is None  # no values: no interval, no crash
    lines = random_effects_lines(b)
    assert lines[0].startswith("| grpo − sft") and any("+2.333" in x for x in lines)


def test_the_script_reproduces_the_issue_31_reanalysis_from_the_shipped_results(tmp_path, capsys):
    """The per-seed files of worlds 0, 1 and 5: template entropy -0.371 [-0.612, -0.130] (holds), test success
    -0.000 [-0.067, +0.066] (not equivalent), shift_homonym -0.044 [-0.102, +0.014], p 0.08 (issue 31)."""
    import importlib.util
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    runs = [root / "results" / d for d in ("squeeze-default-v3", "squeeze-world1-v3", "squeeze-world5-v3")]
    assert all((r / "summary.json").exists() for r in runs), "the shipped per-seed results (results/) are missing"
    spec = importlib.util.spec_from_file_location("sre", root / "scripts" / "squeeze_random_effects.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main([*map(str, runs), "--json", str(tmp_path / "re.json")]) == 0
    e = json.loads((tmp_path / "re.json").read_text())["grpo"]["endpoints"]
    assert [round(x, 3) for x in (e["slot_entropy"]["estimate"], *e["slot_entropy"]["ci"])] == [-0.371, -0.612, -0.130]
    assert [round(x, 3) for x in e["test_success"]["ci"]] == [-0.067, 0.066]
    sh = e["shift:shift_homonym"]
    assert [round(x, 3) for x in (sh["estimate"], *sh["ci"])] == [-0.044, -0.102, 0.014] and round(sh["p"], 2) == 0.08
    assert "| template entropy (slot) | -0.371 |" in capsys.readouterr().out


def test_a_second_start_of_a_world_is_a_unit_but_not_a_degree_of_freedom():
    """Worlds 0, 1 and 5 with a second start on worlds 1 and 5: five units in tau^2, a t interval on 2 df (the
    worlds), and the same start given twice is refused."""
    from scipy.stats import t

    from searchgym.errors import ConfigError

    def run(w: int, d: float, successes: float) -> dict:
        s = _summary(w, [d - 0.5, d + 0.5], [-0.5, 0.5])
        s["competence"] = {"successes": successes, "test_success": successes / 256}
        return s

    sums = [run(0, 1.0, 90.0), run(1, 2.0, 99.0), run(1, 1.5, 102.75), run(5, 4.0, 80.0), run(5, 3.0, 85.0)]
    b = random_effects_block(sums)
    assert b["k_worlds"] == 3 and b["starts_per_world"] == {"0": 1, "1": 2, "5": 2}
    assert "df = worlds - 1" in b["method"]
    e = b["endpoints"]["slot_entropy"]
    assert e["k"] == 5 and e["df"] == 2 and len(e["per_world"]) == 5
    assert e["ci"][1] - e["estimate"] == pytest.approx(t.ppf(0.975, 2) * e["se"])
    one_start_each = random_effects_block([sums[0], sums[1], sums[3]])
    assert one_start_each["endpoints"]["slot_entropy"]["df"] == 2 and "df = worlds" not in one_start_each["method"]
    with pytest.raises(ConfigError, match="share one SFT start"):
        random_effects_block([sums[0], sums[1], run(1, 2.2, 99.0)])
    assert any("| 3 (5 starts) |" in line for line in random_effects_lines(b))


def test_the_script_sets_grpo_against_rejection_sampling_sft_with_base(tmp_path):
    """--base rs_sft: the RL-specific contrast the README headline quotes (strategy entropy GRPO − rejection-sampling
    SFT +0.005 [-0.071, +0.080] over worlds 0, 1, 5 as random effects)."""
    import importlib.util
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    runs = [root / "results" / f"squeeze-controls-w{w}-v3" for w in (0, 1, 5)]
    spec = importlib.util.spec_from_file_location("sre", root / "scripts" / "squeeze_random_effects.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main([*map(str, runs), "--base", "rs_sft", "--json", str(tmp_path / "re.json")]) == 0
    b = json.loads((tmp_path / "re.json").read_text())["grpo"]
    e = b["endpoints"]["strategy_entropy_rarefied"]
    assert b["base"] == "rs_sft" and [round(x, 3) for x in (e["estimate"], *e["ci"])] == [0.005, -0.071, 0.080]
    assert "+0.005 [-0.071, +0.080]" in (root / "README.md").read_text()
