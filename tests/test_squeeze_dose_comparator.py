"""scripts/lm_dose.py --comparator (issue 31 §1): each seed also runs continued SFT from the same start, and the
sweep reports GRPO − continued SFT on train-pool success with a t-interval over seeds."""

from __future__ import annotations

import pytest
from helpers import load_script

pytest.importorskip("transformers")


@pytest.mark.slow
def test_dose_sweep_with_a_continued_sft_comparator(tmp_path, one_thread):
    from test_train_squeeze import _tiny_cfg

    from searchgym.experiments.squeeze.config import TINY_PROMPT
    from searchgym.experiments.squeeze.stages import Context, warm_start
    from searchgym.train.tiny_lm import create_tiny_lm, world_texts

    mod = load_script("lm_dose")
    cfg = _tiny_cfg(tmp_path)
    ctx = Context(cfg, lambda s: None)
    model, tok = create_tiny_lm(world_texts(ctx.world, prompts=[TINY_PROMPT]), tmp_path / "base", cfg.tiny, seed=0)
    ctx.write_meta(tmp_path / "base")
    warm_start(ctx, model, tok, tmp_path / "sft")
    res = mod.dose_sweep(ctx, tmp_path / "sft" / "model", [3e-2], 2, tmp_path, questions=2, samples=1,
                         seeds=(1, 2), comparator="sft")
    v = res["lrs"]["0.03"]
    vc = v["vs_comparator"]
    assert vc["arm"] == "sft" and vc["n_seeds"] == 2 and vc["ci"] is not None
    assert vc["diffs"] == pytest.approx([r["success"] - r["comparator"]["success"] for r in v["runs"]])
    assert vc["ci"][0] <= vc["mean"] <= vc["ci"][1]
    for r in v["runs"]:
        c = r["comparator"]
        assert c["steps"] == 2 and c["kl_last"] is not None and c["kl_last"] >= 0  # continued SFT logs its KL
    assert (tmp_path / "lr0.03-sft" / "final_model" / "config.json").exists()
    assert (tmp_path / "lr0.03-s2-sft" / "final_model" / "config.json").exists()


@pytest.mark.slow
def test_dose_sweep_sft_kl_comparator_stops_at_each_seeds_grpo_kl(tmp_path, one_thread):
    """--comparator sft_kl --match-seed-kl: each seed's continued SFT stops at that seed's GRPO final KL (not the
    config's kl_target), within sft_kl_max_factor x the GRPO steps."""
    from test_train_squeeze import _tiny_cfg

    from searchgym.experiments.squeeze.config import TINY_PROMPT
    from searchgym.experiments.squeeze.stages import Context, warm_start
    from searchgym.train.tiny_lm import create_tiny_lm, world_texts

    mod = load_script("lm_dose")
    cfg = _tiny_cfg(tmp_path, sft_kl_max_factor=1, sft_kl_learning_rate=None)  # the script: the swept GRPO rate
    ctx = Context(cfg, lambda s: None)
    model, tok = create_tiny_lm(world_texts(ctx.world, prompts=[TINY_PROMPT]), tmp_path / "base", cfg.tiny, seed=0)
    ctx.write_meta(tmp_path / "base")
    warm_start(ctx, model, tok, tmp_path / "sft")
    res = mod.dose_sweep(ctx, tmp_path / "sft" / "model", [3e-2], 2, tmp_path, questions=2, samples=1,
                         seeds=(1, 2), comparator="sft_kl", match_kl=True)
    runs = res["lrs"]["0.03"]["runs"]
    for r in runs:
        c = r["comparator"]
        assert c["arm"] == "sft_kl" and c["kl_target"] == pytest.approx(r["kl_last"])
        assert 1 <= c["steps"] <= 2  # capped at 1 x the GRPO steps
    assert res["lrs"]["0.03"]["vs_comparator"]["n_seeds"] == 2
