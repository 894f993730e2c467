"""The squeeze at the dose that learns (``--preset learns``, docs/squeeze.md "The squeeze at the dose that learns"):
the stored runs' figures are the ones the docs quote, and the verdicts are the pre-registered rule's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = (ROOT / "docs" / "squeeze.md").read_text(encoding="utf-8")
RUNS = {w: ROOT / "results" / f"squeeze-learns-w{w}" for w in (0, 1)}


def _ci(c: dict) -> str:
    """A contrast as the docs write it: +0.076 [+0.048, +0.104], with the typographic minus."""
    s = f"{c['diff']:+.3f} [{c['ci'][0]:+.3f}, {c['ci'][1]:+.3f}]"
    return s.replace("-", "−")


def _summary(world: int) -> dict:
    p = RUNS[world] / "summary.json"
    assert p.exists(), f"the stored run {p.parent} is missing"
    return json.loads(p.read_text())


@pytest.mark.parametrize("world", sorted(RUNS))
def test_the_run_is_the_learns_preset_with_every_control(world):
    s = _summary(world)
    c = s["config"]
    assert c["preset_name"] == "learns" and c["world_seed"] == world
    assert (c["rl"]["total_steps"], c["rl"]["learning_rate"]) == (100, 2e-4)
    assert {a: s["arms"][a]["seeds"] for a in ("sft", "grpo", "rs_sft", "grpo_shuffled")} == dict.fromkeys(
        ("sft", "grpo", "rs_sft", "grpo_shuffled"), 6)
    assert s["competence"]["passed"]


@pytest.mark.parametrize("world", sorted(RUNS))
def test_contrasts_and_verdicts_are_the_ones_the_docs_quote(world):
    s = _summary(world)
    ends = s["rl_specific"]["endpoints"]
    rows = {"strategy_entropy_rarefied": "strategy entropy, rarefied (primary)",
            "template_entropy_rarefied": "template entropy, rarefied",
            "template_entropy_rarefied_no_copy": "… without copy-question queries", "copy_rate": "copy rate",
            "train_success": "train success", "test_success": "test success (primary cost)",
            "shift:shift_homonym": "`shift_homonym`"}
    verdicts = {"not_rl_specific": "no", "no_change": "no change", "rl_specific": "yes"}
    for key, label in rows.items():
        e = ends[key]
        cells = [_ci(e[f"vs_{b}"]) for b in ("sft", "rs_sft", "grpo_shuffled")]
        cells[0] = f"**{cells[0]}**" if key in ("strategy_entropy_rarefied", "train_success") else cells[0]
        line = f"| {label} | " + " | ".join(cells) + f" | {verdicts[e['verdict']]} |"
        assert line in DOCS, line
    # what the section claims: GRPO learns and squeezes against continued SFT, and rejection-sampling SFT does the same
    assert ends["train_success"]["vs_sft"]["ci"][0] > 0
    assert ends["strategy_entropy_rarefied"]["vs_sft"]["ci"][1] < 0
    rs = ends["strategy_entropy_rarefied"]["vs_rs_sft"]["ci"]
    assert rs[0] < 0 < rs[1] and ends["strategy_entropy_rarefied"]["verdict"] == "not_rl_specific"


@pytest.mark.parametrize("world", sorted(RUNS))
def test_per_arm_rows_are_the_summary(world):
    s = _summary(world)
    a = s["arms"]
    kl = {k: s["dose"][k]["kl_to_start_last"] for k in ("sft", "grpo", "rs_sft", "grpo_shuffled")}
    for arm, label in (("sft", "continued SFT"), ("grpo", "GRPO"), ("rs_sft", "rejection-sampling SFT"),
                       ("grpo_shuffled", "GRPO, shuffled rewards")):
        b = a[arm]
        vals = [kl[arm], b["train_success"]["mean"], b["test_success"]["mean"],
                b["strategy_entropy_rarefied"]["mean"], b["template_entropy_rarefied"]["mean"],
                b["template_entropy_rarefied_no_copy"]["mean"], b["copy_rate"]["mean"],
                b["shift"]["shift_homonym"]["mean"]]
        line = f"| {label} | " + " | ".join(f"{v:.3f}" for v in vals) + " |"
        assert line in DOCS, line


def test_two_worlds_as_random_effects_are_the_docs_figures(tmp_path):
    """With worlds 0 and 1 as random effects (t on 1 df) the primary endpoint's interval covers 0, as the docs say."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("sre", ROOT / "scripts" / "squeeze_random_effects.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    runs = [str(RUNS[w]) for w in (0, 1)]
    for base, row in (("sft", "−0.188 [−0.424, +0.049] (p 0.063)"), ("rs_sft", "−0.025 [−0.273, +0.223]")):
        assert mod.main([*runs, "--base", base, "--json", str(tmp_path / f"{base}.json")]) == 0
        e = json.loads((tmp_path / f"{base}.json").read_text())["grpo"]["endpoints"]["strategy_entropy_rarefied"]
        got = f"{e['estimate']:+.3f} [{e['ci'][0]:+.3f}, {e['ci'][1]:+.3f}]".replace("-", "−")
        assert row.startswith(got) and row in DOCS and e["ci"][0] < 0 < e["ci"][1] and e["k"] == 2


def test_the_report_names_a_start_given_by_path():
    """World 1 started from a stored start given by path: the gate line says so (it said 'trained in this run')."""
    from searchgym.experiments.squeeze.report import _gate_line

    assert _gate_line(_summary(1))[0].startswith("- The SFT start (from results/dose-probe-lr2e-4-world1/start) passes")
    assert _gate_line(_summary(0))[0].startswith("- The SFT start (shipped with the package) passes")
