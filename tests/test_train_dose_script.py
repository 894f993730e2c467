"""scripts/lm_dose.py's sweep on a tiny start: per lr, per-step KL to the start and segment entropies, and the
move criterion (issue 21 §3). The real sweep runs from a squeeze run's SFT start (minutes to hours)."""

from __future__ import annotations

import pytest
from helpers import load_script

pytest.importorskip("transformers")


@pytest.mark.slow  # runs the dose-sweep script end to end
def test_dose_sweep_on_a_tiny_start(tmp_path, one_thread):
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
    res = mod.dose_sweep(ctx, tmp_path / "sft" / "model", [1e-4, 3e-2], 2, tmp_path, questions=2, samples=1,
                         seeds=(1, 2))
    assert set(res["lrs"]) == {"0.0001", "0.03"} and res["seeds"] == [1, 2]
    for v in res["lrs"].values():
        assert [r["step"] for r in v["rows"]] == [1, 2] and v["n_seeds"] == 2
        assert all(r["kl_to_start"] is not None and r["kl_to_start"] >= -1e-6 for r in v["rows"])
        assert "forking_share" in v["rows"][0] and "token_entropy_answer" in v["rows"][0]
        assert v["moved"] == (v["success_change"] >= 0.15 or v["kl_last"] >= 0.1)
        assert [r["seed"] for r in v["runs"]] == [1, 2]
        assert v["moved_seeds"] == sum(r["success_change"] >= 0.15 or r["kl_last"] >= 0.1 for r in v["runs"])
        # the per-step row is the mean over the seeds
        kl = [r["rows"][1]["kl_to_start"] for r in v["runs"]]
        assert v["rows"][1]["kl_to_start"] == pytest.approx(sum(kl) / 2)
        assert v["success_change_range"] == [min(r["success_change"] for r in v["runs"]),
                                             max(r["success_change"] for r in v["runs"])]
    # the seeds are different runs (the larger rate moves each its own way)
    big = res["lrs"]["0.03"]["runs"]
    assert [r["rows"][0]["reward"] for r in big] != [None, None] and big[0]["rows"] != big[1]["rows"]
    assert res["dose_lr"] in (None, 1e-4, 3e-2)
    assert (tmp_path / "lr0.03" / "final_model" / "config.json").exists()
    assert (tmp_path / "lr0.03-s2" / "final_model" / "config.json").exists()


def test_another_world_refuses_the_shipped_start(tmp_path, capsys):
    """--world-seed picks the world; the shipped start was built on world 0, so `--start shipped` on world 1 is
    refused with the start key's reason instead of dosing a start on a world it never saw."""
    mod = load_script("lm_dose")
    with pytest.raises(SystemExit, match="--start shipped: .*world"):
        mod.main(["--world-seed", "1", "--start", "shipped", "--out", str(tmp_path / "d")])
    assert not (tmp_path / "d" / "sft").exists()
