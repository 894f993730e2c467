"""Issue 31 §2-3: the LM controls (continued SFT at matched KL, rejection-sampling SFT, shuffled-reward GRPO, the
one-template positive control) run end to end and the summary carries the endpoints fixed in advance."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


def test_shuffled_rewards_permute_within_the_step_and_depend_on_seed_and_step():
    from searchgym.experiments.squeeze.controls import shuffled_rewards

    r = [0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0]
    a = shuffled_rewards(1)(3, [None] * 8, r)
    assert sorted(a) == sorted(r) and a == shuffled_rewards(1)(3, [None] * 8, r)
    assert any(shuffled_rewards(1)(s, [None] * 8, r) != r for s in range(5))


def test_one_template_reward_pays_only_episodes_all_of_whose_queries_have_the_target(tmp_path):
    from searchgym.diversity import Templater
    from searchgym.experiments.squeeze.controls import OneTemplateReward

    t = Templater(["Ada Lovelace", "Paris"])

    def ep(*queries):
        return SimpleNamespace(trajectory=SimpleNamespace(queries=list(queries), question="who?"))

    shaper = OneTemplateReward(t, tmp_path)
    eps = [ep("Ada Lovelace born"), ep("Paris born"), ep("Ada Lovelace born", "capital of France"), ep()]
    got = shaper(0, eps, [1.0, 1.0, 1.0, 1.0])
    assert got[:2] == [1.0, 1.0] and got[2:] == [0.0, 0.0]  # "{E} born" is the most common template
    again = OneTemplateReward(t, tmp_path)  # a resumed run pays the same template
    assert again.target == shaper.target and json.loads((tmp_path / "positive_target.json").read_text())


def test_split_measures_rarefy_drop_copies_and_count_rename_follows():
    from searchgym.diversity import Templater
    from searchgym.experiments.squeeze.endpoints import rarefied_entropy, rename_follow_rate

    assert rarefied_entropy(["a", "b"] * 10, 4, seed=0) > 0.5
    assert rarefied_entropy(["a"] * 3, 4, seed=0) is None
    eps = [SimpleNamespace(queries=["Old Name capital"]), SimpleNamespace(queries=["New Name capital", "x"])]
    exs = [SimpleNamespace(metadata={"renamed_to": "New Name"})] * 2
    assert rename_follow_rate(eps, exs) == 0.5
    assert Templater  # the template level is the analysis core's (tested there)


@pytest.mark.slow
def test_control_arms_run_and_the_summary_has_the_endpoints(tmp_path, one_thread):
    from test_train_squeeze import _tiny_cfg

    from searchgym.experiments.squeeze import experiment as sq
    from searchgym.experiments.squeeze.config import SHIFT_SPLITS

    cfg = _tiny_cfg(tmp_path / "run", arms=("sft", "sft_kl", "rs_sft", "grpo_shuffled", "grpo_positive"), jobs=1,
                    kl_target=1e-9)  # sft_kl stops at its first step with any KL
    logs: list[str] = []
    s = sq.run(cfg, log=logs.append)
    arms = s["arms"]
    for arm in cfg.arms:
        b = arms[arm]
        kl = b["kl_to_start"]
        assert kl["steps"] and len(kl["mean"]) == len(kl["steps"]), arm  # per step, SFT arms included
        assert all(k is None or k >= 0 for k in kl["mean"])
        assert set(b["train_success_change"]) >= {"mean", "ci", "values"}
        for key in ("template_entropy_rarefied", "template_entropy_rarefied_no_copy", "copy_rate"):
            assert key in b
        assert set(b["rename_follow_rate"]) == {"shift_renamed", "shift_homonym"}
    # matched: stopped once the KL reached the target (step 1 samples the start itself: KL exactly 0)
    assert arms["sft_kl"]["kl_to_start"]["mean"][0] == 0.0 and len(arms["sft_kl"]["kl_to_start"]["steps"]) == 2
    assert len(arms["rs_sft"]["kl_to_start"]["steps"]) == cfg.rl.total_steps
    lrs = {a: {json.loads(x)["charts/learning_rate"] for x in (tmp_path / f"run/arms/{a}/seed1/metrics.jsonl")
               .read_text().splitlines()} for a in ("sft_kl", "rs_sft")}
    assert lrs == {"sft_kl": {cfg.sft_kl_learning_rate}, "rs_sft": {cfg.rl.learning_rate}}  # sft_kl's own rate
    assert (tmp_path / "run/arms/grpo_positive/seed1/positive_target.json").exists()
    rows = [json.loads(x) for x in (tmp_path / "run/arms/grpo_shuffled/seed1/metrics.jsonl").read_text().splitlines()]
    assert all("charts/shaped_reward" in r for r in rows)
    assert set(s["shift_floor"]) == set(SHIFT_SPLITS)
    assert all(v["cannot_show_loss"] == (v["start"] < 0.2) for v in s["shift_floor"].values())
    assert s["primary_endpoints"] == {"primary": "strategy_entropy_rarefied", "primary_cost": "test_success"}
    assert "| GRPO, shuffled rewards |" in sq.headline(s) or "GRPO, shuffled rewards" in (
        tmp_path / "run/report.md").read_text()


def test_sft_kl_rate_must_be_positive():
    from searchgym.errors import ConfigError
    from searchgym.experiments.squeeze.config import SqueezeConfig

    assert SqueezeConfig.preset(out="x").sft_kl_learning_rate == 1e-3
    with pytest.raises(ConfigError, match="sft_kl_learning_rate must be > 0"):
        SqueezeConfig.preset(out="x", sft_kl_learning_rate=0.0).validate()
