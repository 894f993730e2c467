"""The squeeze experiment end to end on a tiny budget, its resume, the report files and the headline CLI."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


def _tiny_cfg(out, **kw):
    from searchgym.experiments.squeeze.experiment import SqueezeConfig
    from searchgym.train.pretrain import PretrainArgs
    from searchgym.train.rl import RLArgs
    from searchgym.train.sft import SFTArgs
    from searchgym.train.tiny_lm import TinyLMConfig

    cfg = SqueezeConfig(out=str(out), seeds=1, arms=("sft", "grpo"), n_entities=40, demo_passes=1,
                        tiny=TinyLMConfig(vocab_size=500, hidden_size=32, num_layers=1, num_heads=2,
                                          intermediate_size=64, max_positions=512),
                        pretrain=PretrainArgs(max_steps=3, batch_size=4, block_len=64, warmup_steps=1),
                        sft=SFTArgs(learning_rate=3e-3, max_steps=4, batch_size=8, micro_batch_size=8,
                                    warmup_steps=1),
                        rl=RLArgs(total_steps=2, prompts_per_step=2, group_size=2, max_new_tokens=8,
                                  micro_batch_size=4, checkpoint_every=1, max_context=512),
                        eval_questions=2, eval_shift_questions=1, eval_samples=2, gate_samples=2, threads=1,
                        passk_max=4, passk_questions=2,
                        strategy_seeds=0)  # the strategy stage has its own test (test_squeeze_strategy_stage.py)
    for k, v in kw.items():
        setattr(cfg, k, v)
    return cfg


@pytest.mark.slow  # an end-to-end squeeze run with its resume (about 75 s on 2 idle cores); .ci/run runs it
def test_squeeze_tiny_run_report_and_resume(tmp_path, one_thread):
    from searchgym.experiments.squeeze import experiment as sq

    logs: list[str] = []
    summary = sq.run(_tiny_cfg(tmp_path / "run"), log=logs.append)
    out = tmp_path / "run"
    for f in ("report.md", "report.html", "summary.json", "plots/reward.png", "plots/template_entropy.png",
              "plots/token_entropy.png", "plots/pass_at_k.png", "plots/per_family.png", "plots/shift.png",
              "sft/demos.jsonl", "pretrain/model/config.json", "pretrain/metrics.jsonl", "start_eval/eval_trajectories.jsonl", "arms/grpo/seed1/metrics.jsonl",
              "arms/grpo/seed1/diversity.jsonl", "arms/sft/seed1/diversity.jsonl"):
        assert (out / f).exists(), f
    s = json.loads((out / "summary.json").read_text())
    assert set(s["arms"]) == {"sft", "grpo"}
    for arm in ("sft", "grpo"):
        b = s["arms"][arm]
        assert b["train_success"]["mean"] is not None
        assert set(b["shift"]) == set(sq.SHIFT_SPLITS)
        assert [len(ser["step"]) for ser in b["series"]] == [2]
        assert "acted" in b["controls"]
        assert b["test_success"]["mean"] is not None and set(b["shift_success"]) == set(sq.SHIFT_SPLITS)
        # the summary contract: strategy entropy (strategy classes) with mean and CI, the malformed share
        # (a 32-wide LM after 4 SFT steps may not search at all: then there is no strategy to measure)
        assert {"mean", "ci"} <= set(b["strategy_entropy"]) and {"mean", "ci"} <= set(b["malformed_share"])
        assert {"mean", "ci"} <= set(b["strategy_entropy_rarefied"]) and "strategy_entropy_per_question" in b
        assert b["strategy_entropy"]["mean"] is None or b["strategy_entropy"]["mean"] >= 0.0
    # the held-out splits are evaluated at one equal number of episodes each
    start_ev = json.loads((out / "start_eval" / "eval.json").read_text())
    assert len({start_ev[sp]["episodes"] for sp in ("test", *sq.SHIFT_SPLITS)}) == 1
    comp = s["competence"]
    assert comp["gate"] == 0.3 and comp["test_success"] == start_ev["test"]["success"]
    assert comp["gated_on"] == "wilson_lower_bound" and comp["lower_bound"] <= comp["test_success"]
    assert comp["passed"] == (comp["lower_bound"] is not None and comp["lower_bound"] >= 0.3)
    assert s["findings"]["lm_findings_usable"] == comp["passed"]
    if not comp["passed"]:  # a 32-wide LM after 4 SFT steps: the gate fails loudly, the run still finishes
        assert any("COMPETENCE GATE FAILED" in x for x in logs)
        assert "COMPETENCE GATE FAILED" in (out / "report.md").read_text()
    md = (out / "report.md").read_text()
    assert "template entropy" in md and "![" in md and "SFT start" in md
    assert "data:image/png;base64" in (out / "report.html").read_text()
    head = sq.headline(out)
    assert head.startswith("**RL vs SFT") and "| GRPO |" in head
    _check_readme_writer(tmp_path / "site", out)
    # the dose: per RL step the KL of the rollouts to the SFT start and the token entropy by segment
    dose = s["dose"]["grpo"]
    assert len(dose["steps"]) == 2 and all(k is not None and k >= 0 for k in dose["kl_to_start"])
    assert "forking_share" in dose and dose["moved"] in (True, False)
    # continued SFT logs its KL to the start per step too (issue 31): its dose is read like RL's
    assert len(s["dose"]["sft"]["kl_to_start"]) == 2 and s["dose"]["sft"]["moved"] in (True, False)
    assert summary["arms"]["grpo"]["train_success"] == s["arms"]["grpo"]["train_success"]

    # --resume: every stage is done, nothing is retrained, the numbers are the same
    logs.clear()
    again = sq.run(_tiny_cfg(out, resume=True), log=logs.append)
    assert not any("arm GRPO" in x or "SFT warm start" in x for x in logs)
    assert again["arms"]["grpo"]["train_success"] == s["arms"]["grpo"]["train_success"]


@pytest.mark.slow  # an end-to-end squeeze run (minutes on 2 cores); `make test-slow`
def test_squeeze_sft_refresh_and_darling_arms_run(tmp_path, one_thread):
    from searchgym.experiments.squeeze import experiment as sq

    cfg = _tiny_cfg(tmp_path / "run", arms=("grpo_sft_refresh", "grpo_darling", "grpo_count", "grpo_critique"),
                    refresh_every=1, refresh_steps=1)
    s = sq.run(cfg, log=lambda _: None)
    crit = s["arms"]["grpo_critique"]["controls"]  # a weak LM fails: its failures get critiques and refinements
    assert crit["control"] == "critique" and crit["acted"] is True and crit["refinements"] > 0
    ctl = s["arms"]["grpo_sft_refresh"]["controls"]
    assert ctl["control"] == "sft_refresh" and ctl["acted"] is True
    def rows(arm):
        return [json.loads(x) for x in (tmp_path / f"run/arms/{arm}/seed1/metrics.jsonl").read_text().splitlines()]

    assert [r["charts/sft_refresh_steps"] for r in rows("grpo_sft_refresh")] == [1.0, 1.0]
    assert all("charts/shaped_reward" in r for r in rows("grpo_darling"))
    assert s["arms"]["grpo_darling"]["controls"]["control"] == "darling"
    assert s["arms"]["grpo_count"]["controls"] == {**s["arms"]["grpo_count"]["controls"], "control": "count_bonus",
                                                  "acted": True}  # a positive bonus always changes the rewards


def test_squeeze_config_errors(tmp_path):
    from searchgym.errors import ConfigError
    from searchgym.experiments.squeeze.experiment import SqueezeConfig

    with pytest.raises(ConfigError, match="arm"):
        SqueezeConfig(out=str(tmp_path), arms=("grpo", "dpo")).validate()
    cfg = SqueezeConfig(out=str(tmp_path))
    cfg.rl = replace(cfg.rl, group_size=1)
    with pytest.raises(ConfigError, match="group_size"):
        cfg.validate()
    with pytest.raises(ConfigError):
        SqueezeConfig.preset(True, not_an_option=1)
    full = SqueezeConfig.preset(False, out=str(tmp_path))
    full.validate()
    for arm in full.arms:  # every arm's RL arguments are valid
        if arm != "sft":
            full.arm_args(arm, 1).validate()


def test_cli_headline_without_summary_is_a_clear_error(tmp_path):
    from typer.testing import CliRunner

    from searchgym.cli import app

    r = CliRunner().invoke(app, ["squeeze", "--headline", "--out", str(tmp_path)])
    assert r.exit_code == 2


@pytest.mark.slow
@pytest.mark.timeout(1800)  # the whole demo: minutes on 2 cores, more on a busy machine
def test_squeeze_quick_cli(tmp_path):
    """The `make demo` command, in full (minutes)."""
    from typer.testing import CliRunner

    from searchgym.cli import app

    out = tmp_path / "demo"
    r = CliRunner().invoke(app, ["squeeze", "--quick", "--out", str(out)])
    assert r.exit_code == 0, r.output
    s = json.loads((out / "summary.json").read_text())
    assert {"sft", "grpo"} <= set(s["arms"])
    assert "**RL vs SFT" in r.output
    from test_squeeze_progress import assert_monotone_stages

    assert_monotone_stages(r.output.splitlines())  # the demo's stage counter runs in order (issue 35 §3)
    # the demo runs its arms from the shipped SFT start, whose gate passes on its Wilson lower bound
    assert s["sft_start"]["source"] == "shipped" and not (out / "pretrain").exists()
    assert s["competence"]["passed"] and s["competence"]["questions"] >= 128
    assert s["dose"]["grpo"]["kl_to_start"] and s["dose"]["grpo"]["train_success_change"] is not None
    assert "COMPETENCE GATE FAILED" not in (out / "report.md").read_text()
    r2 = CliRunner().invoke(app, ["squeeze", "--headline", "--out", str(out)])
    assert r2.exit_code == 0 and "| GRPO |" in r2.output


def test_readme_headline_is_replaced_between_markers(tmp_path):
    from searchgym.errors import ConfigError
    from searchgym.experiments.squeeze.commands import README_BEGIN, README_END, write_readme_headline

    readme = tmp_path / "README.md"
    readme.write_text("# title\n\n<!-- HEADLINE -->\n\n## Quick start\n")
    write_readme_headline(readme, "**first** figures\n")
    first = readme.read_text()
    assert first == f"# title\n\n{README_BEGIN}\n**first** figures\n{README_END}\n\n## Quick start\n"
    write_readme_headline(readme, "**second** figures")  # a re-run replaces, never appends
    assert readme.read_text() == first.replace("**first**", "**second**")

    bare = tmp_path / "OTHER.md"
    bare.write_text("# no markers here\n")
    with pytest.raises(ConfigError, match="markers"):
        write_readme_headline(bare, "x")
    assert bare.read_text() == "# no markers here\n"
    with pytest.raises(ConfigError, match="does not exist"):
        write_readme_headline(tmp_path / "missing.md", "x")


def test_arm_definitions_match_the_issue(tmp_path):
    """Every RL arm takes the same mini-batch updates per rollout batch (so the ratio moves), the KL arm has a
    reference, the entropy arm keeps GRPO's zero-advantage filter, and continued SFT keeps the warm start's
    recipe for as many optimizer steps as an RL arm takes."""
    from searchgym.errors import ConfigError
    from searchgym.experiments.squeeze.config import SqueezeConfig

    cfg = SqueezeConfig.preset(False, out=str(tmp_path))
    cfg.validate()
    assert "grpo_kl" in cfg.arms
    for arm in ("grpo", "grpo_kl", "grpo_klcov", "grpo_clipcov", "grpo_ent", "grpo_critique"):
        a = cfg.arm_args(arm, 1)
        assert a.num_minibatches * a.update_epochs >= 4 and a.skip_zero_adv, arm
    assert cfg.arm_args("grpo_kl", 1).kl_coef > 0 and cfg.arm_args("grpo", 1).kl_coef == 0
    assert cfg.sft_steps_per_step() == cfg.arm_args("grpo", 1).num_minibatches
    for bad, flag in (({"minibatches": 0}, "--minibatches"), ({"minibatches": 3}, "--minibatches")):
        with pytest.raises(ConfigError, match=flag):
            SqueezeConfig.preset(True, out=str(tmp_path), **bad).validate()


def test_controls_acted_rule(tmp_path):
    from searchgym.experiments.squeeze.config import SqueezeConfig
    from searchgym.experiments.squeeze.summary import arm_controls

    cfg = SqueezeConfig.preset(False, out=str(tmp_path))

    def write(arm, rows):
        d = tmp_path / arm / "seed1"
        d.mkdir(parents=True)
        (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return tmp_path / arm

    # one on-policy update per batch: tokens are "selected" but the ratio is 1, so nothing acted
    still = write("grpo_klcov", [{"step": 1, "losses/cov_selected_share": 0.002, "losses/abs_log_ratio": 1e-6}])
    assert arm_controls(cfg, "grpo_klcov", still)["acted"] is False
    moved = write("grpo_clipcov", [{"step": 1, "losses/cov_selected_share": 0.001, "losses/abs_log_ratio": 0.0},
                                   {"step": 2, "losses/cov_selected_share": 0.001, "losses/abs_log_ratio": 0.01}])
    c = arm_controls(cfg, "grpo_clipcov", moved)
    assert c["acted"] is True and c["control"] == "clip_cov" and c["abs_log_ratio"] == pytest.approx(0.005)
    assert arm_controls(cfg, "grpo_kl", write("grpo_kl", [{"step": 1, "losses/kl_ref": 0.0}]))["acted"] is False
    assert arm_controls(cfg, "grpo_ent", write("grpo_ent", [{"step": 1}]))["acted"] is True
    assert arm_controls(cfg, "grpo", write("grpo", [{"step": 1}]))["acted"] is None
    same = [{"step": 1, "charts/reward": 0.0, "charts/shaped_reward": 0.0}]
    assert arm_controls(cfg, "grpo_darling", write("grpo_darling", same))["acted"] is False
    shaped = [{"step": 1, "charts/reward": 0.5, "charts/shaped_reward": 0.2}]
    assert arm_controls(cfg, "grpo_darling", write("grpo_darling2", shaped))["acted"] is True


def test_cli_impossible_minibatches_fails_fast_naming_the_flag(tmp_path):
    from typer.testing import CliRunner

    from searchgym.cli import app

    out = tmp_path / "never"
    r = CliRunner().invoke(app, ["squeeze", "--quick", "--minibatches", "0", "--out", str(out)])
    assert r.exit_code == 2 and "--minibatches" in r.output
    assert not out.exists()


def test_competence_gate_and_seed_ci():
    from searchgym.experiments.squeeze.config import SqueezeConfig
    from searchgym.experiments.squeeze.report import _gate_warning
    from searchgym.experiments.squeeze.summary import _ms, competence

    cfg = SqueezeConfig()
    ok = competence(cfg, {"test": {"success": 0.45, "questions": 128}})
    bad = competence(cfg, {"test": {"success": 0.12, "questions": 128}})
    assert ok["passed"] is True and ok["test_success"] == 0.45 and ok["gate"] == 0.3 and bad["passed"] is False
    assert competence(cfg, {"test": {"success": 0.31, "questions": 128}})["passed"] is False  # point >= gate, LB not
    assert competence(cfg, {"train": {"success": 0.9}})["passed"] is False  # no test evaluation: no competence
    assert _gate_warning({"competence": ok}) == [] and "unusable" in _gate_warning({"competence": bad})[0]
    m = _ms([0.1, 0.2, 0.3])
    assert m["ci"][0] < 0.2 < m["ci"][1] and m["ci"][1] - 0.2 == pytest.approx(4.303 * 0.1 / 3 ** 0.5, rel=1e-3)
    assert _ms([0.5])["ci"] is None


def test_darling_rewards_quality_times_distinctness():
    from searchgym.errors import ConfigError
    from searchgym.train.shaping import darling_rewards

    # group of 4: three samples share a class, one is alone; second group all distinct
    r = darling_rewards([1, 1, 0, 1, 1, 1, 1, 1], ["a", "a", "a", "b", "w", "x", "y", "z"], 4)
    assert r == pytest.approx([1 / 3, 1 / 3, 0.0, 1.0, 1, 1, 1, 1])
    assert darling_rewards([1, 1], [("q",), ("q",)], 2) == pytest.approx([0.1, 0.1])  # Div 0, floored at 0.1
    with pytest.raises(ConfigError):
        darling_rewards([1, 0, 1], ["a", "b", "c"], 2)


def test_diff_ci_welch_and_no_detectable_difference():
    from scipy import stats

    from searchgym.experiments.squeeze.report import comparison_lines
    from searchgym.experiments.squeeze.stats import comparisons, diff_ci

    a, b = [0.30, 0.35, 0.32, 0.31], [0.10, 0.12, 0.15, 0.11]
    d = diff_ci(a, b)
    lo, hi = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert d["ci"] == pytest.approx([lo, hi]) and d["detectable"] is True and d["mde"] > 0
    same = diff_ci([0.1, 0.3, 0.2], [0.2, 0.1, 0.3])
    assert same["ci"][0] < 0 < same["ci"][1] and same["detectable"] is False
    assert diff_ci([0.5], [0.1, 0.2])["ci"] is None  # one seed: no interval
    arms = {"sft": {"label": "SFT", "test_success": {"values": [0.1, 0.3, 0.2]}},
            "grpo": {"label": "GRPO", "test_success": {"values": [0.2, 0.1, 0.3]}}}
    summ = {"arms": arms, "comparisons": comparisons(arms)}
    (line,) = comparison_lines(summ)
    assert line.startswith("- GRPO − continued SFT: test success +0.000") and "no detectable difference" in line


@pytest.mark.slow  # an end-to-end squeeze run (minutes on 2 cores); `make test-slow`
def test_parallel_arms_give_the_same_results_as_one_process(tmp_path, one_thread):
    """--jobs 2 runs arm-seeds, and the SFT start's evaluation and pass@k, in worker processes; every figure
    equals the one-process run's."""
    from searchgym.experiments.squeeze import experiment as sq

    runs, starts = {}, {}
    for jobs in (1, 2):
        d = tmp_path / f"j{jobs}"
        logs: list[str] = []
        sq.run(_tiny_cfg(d, arms=("grpo",), seeds=1, jobs=jobs, gate_questions=4), log=logs.append)
        runs[jobs] = [json.loads((d / "arms" / "grpo" / "seed1" / "eval.json").read_text())]
        starts[jobs] = [json.loads((d / "start_eval" / n).read_text()) for n in ("eval.json", "passk.json")]
        assert any("and the SFT start evaluation in 2 worker" in x for x in logs) == (jobs == 2)
    for a, b in zip(runs[1], runs[2]):
        a.pop("train_time_s"), b.pop("train_time_s")
        assert a == b
    for a, b in zip(starts[1], starts[2]):
        a.pop("time_s", None), b.pop("time_s", None)
        assert a == b
    assert starts[2][0]["gate"]["questions"] == 4  # the gate record travels with the pooled evaluation


def test_gate_on_the_wilson_lower_bound_holm_and_equivalence():
    """Issue 21 §6: 48/128 = 0.375 has a Wilson lower bound of 0.296: the gate (0.3) fails on it; Holm adjusts the
    per-split comparisons; a null is 'equivalent' only when its CI lies inside the stated margin."""
    from searchgym.experiments.squeeze.config import SqueezeConfig
    from searchgym.experiments.squeeze.stages import split_seed
    from searchgym.experiments.squeeze.stats import diff_ci, holm
    from searchgym.experiments.squeeze.summary import competence

    cfg = SqueezeConfig()
    assert cfg.eval_shift_questions >= 128 and cfg.eval_questions >= 128
    c = competence(cfg, {"k": 4, "test": {"success": 48 / 128, "questions": 128}})
    assert c["lower_bound"] == pytest.approx(0.296, abs=2e-3) and c["passed"] is False
    assert competence(cfg, {"k": 4, "test": {"success": 0.45, "questions": 128}})["passed"] is True
    assert holm([0.01, 0.04, 0.03, None]) == pytest.approx([0.03, 0.06, 0.06, None])
    tight = diff_ci([0.50, 0.51, 0.49, 0.50, 0.505], [0.50, 0.49, 0.51, 0.495, 0.50], margin=0.05)
    assert tight["verdict"] == "equivalent" and tight["p"] > 0.05
    wide = diff_ci([0.1, 0.5, 0.3], [0.4, 0.2, 0.3], margin=0.05)
    assert wide["verdict"] == "inconclusive"
    # two splits of one size draw different question pools (the seed comes from the name, not the length)
    assert split_seed("shift_phrasing") != split_seed("shift_strategy")


def _check_readme_writer(site, out):
    """`squeeze --headline --readme README.md` on a temp copy of this repository's README: a <= 8-line summary
    between its HEADLINE markers, the full results between docs/squeeze.md's SQUEEZE-RESULTS markers."""
    from pathlib import Path

    from typer.testing import CliRunner

    from searchgym.cli import app
    from searchgym.experiments.squeeze.commands import README_BEGIN, README_END, RESULTS_BEGIN, RESULTS_END

    (site / "docs").mkdir(parents=True)
    real = Path(__file__).resolve().parents[1] / "README.md"
    text = real.read_text() if README_BEGIN in real.read_text() else f"# t\n\n{README_BEGIN}\nold\n{README_END}\n"
    (site / "README.md").write_text(text)
    page = site / "docs" / "squeeze.md"
    page.write_text(f"# The squeeze experiment\n\nintro\n\n{RESULTS_BEGIN}\nold results\n{RESULTS_END}\n\nafter\n")
    r = CliRunner().invoke(app, ["squeeze", "--headline", "--out", str(out), "--readme", str(site / "README.md")])
    assert r.exit_code == 0, r.output
    readme = (site / "README.md").read_text()
    block = readme.split(README_BEGIN)[1].split(README_END)[0].strip().splitlines()
    assert 2 <= len(block) <= 8 and "competence gate" in block[1]
    assert readme.split(README_END)[1] == text.split(README_END)[1]  # the rest of the README is untouched
    body = page.read_text()
    assert "| GRPO |" in body.split(RESULTS_BEGIN)[1] and "old results" not in body and body.endswith("after\n")
    # a docs page without markers: a clear error, and neither file is written
    page.write_text("# no markers\n")
    before = (site / "README.md").read_text()
    r = CliRunner().invoke(app, ["squeeze", "--headline", "--out", str(out), "--readme", str(site / "README.md")])
    assert r.exit_code == 2 and (site / "README.md").read_text() == before
