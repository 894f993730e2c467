"""pass@k up to large k for the squeeze experiment (experiments/squeeze/passk.py) and the report's passk / entropy_law
summary blocks, plots and text built from files in the run's on-disk layout."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from searchgym.experiments.squeeze.passk import passk_from_pairs, passk_ks, passk_seed_wanted, passk_settings


def test_ks_are_powers_of_two_up_to_the_maximum():
    assert passk_ks(64) == [1, 2, 4, 8, 16, 32, 64]
    assert passk_ks(48) == [1, 2, 4, 8, 16, 32, 48]
    assert passk_ks(1) == [1] and passk_ks(0) == []


def test_pass_at_k_from_pairs_is_the_unbiased_estimator_with_a_question_bootstrap():
    # one question, 4 samples, 1 correct: pass@1 = 1/4, pass@2 = 1 - C(3,2)/C(4,2) = 1/2, pass@4 = 1
    one = passk_from_pairs([(4, 1)], [1, 2, 4])
    assert one["1"]["mean"] == pytest.approx(0.25) and one["2"]["mean"] == pytest.approx(0.5)
    assert one["4"]["mean"] == pytest.approx(1.0)
    assert one["1"]["ci"] == [pytest.approx(0.25), pytest.approx(0.25)]  # one question: nothing to resample
    rng = np.random.default_rng(3)
    pairs = [(16, int(c)) for c in rng.binomial(16, rng.uniform(0, 0.4, size=30))]
    res = passk_from_pairs(pairs, passk_ks(16), seed=1)
    assert list(res) == ["1", "2", "4", "8", "16"]
    means = [res[k]["mean"] for k in res]
    assert means == sorted(means) and means[0] == pytest.approx(np.mean([c / 16 for _, c in pairs]))
    assert means[-1] == pytest.approx(np.mean([c > 0 for _, c in pairs]))
    for v in res.values():
        assert 0 <= v["ci"][0] <= v["mean"] <= v["ci"][1] <= 1
    assert res["1"]["ci"][1] - res["1"]["ci"][0] > 0.02  # 30 heterogeneous questions: a real interval
    assert passk_from_pairs(pairs, [32], seed=1) == {}  # k above n is skipped


def test_seed_selection():
    from searchgym.experiments.squeeze.config import SqueezeConfig

    cfg = SqueezeConfig(passk_seeds=2)
    assert [passk_seed_wanted(cfg, s) for s in (1, 2, 3)] == [True, True, False]
    cfg.passk_seeds = 0
    assert passk_seed_wanted(cfg, 9)
    cfg.passk_max = 0
    assert not passk_seed_wanted(cfg, 1)


@pytest.mark.slow  # an end-to-end pass@k evaluation and its resume; .ci/run runs it
def test_passk_eval_on_a_tiny_world_and_its_resume(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from searchgym.experiments.squeeze.config import TINY_PROMPT, SqueezeConfig
    from searchgym.experiments.squeeze.passk import passk_eval, passk_stage
    from searchgym.experiments.squeeze.stages import Context, question_pool
    from searchgym.train.tiny_lm import TinyLMConfig, create_tiny_lm, world_texts

    n_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cfg = SqueezeConfig.preset(quick=True, n_entities=60, out=str(tmp_path / "run"), passk_max=8,
                                   passk_splits=("test", "shift_strategy"), passk_questions=5, strategy_seeds=0)
        cfg.rl.max_new_tokens = 6
        ctx = Context(cfg, lambda s: None)
        model, tok = create_tiny_lm(world_texts(ctx.world, prompts=[TINY_PROMPT]), tmp_path / "m",
                                    TinyLMConfig(vocab_size=300, hidden_size=16, num_layers=1, num_heads=2,
                                                 intermediate_size=32, max_positions=512), seed=0)
        res = passk_eval(ctx, model, tok, seed=1, name="tiny", chunk_questions=2)  # 3 chunks: 2 + 2 + 1
        assert res["ks"] == [1, 2, 4, 8] and res["settings"] == passk_settings(cfg)
        assert set(res["splits"]) == {"test", "shift_strategy"} and res["missing_splits"] == []
        for split, v in res["splits"].items():
            assert v["questions"] == question_pool(ctx, split, 5)
            assert len(v["pairs"]) == 5 and all(n == 8 and 0 <= c <= 8 for n, c in v["pairs"])
            assert v["episodes"] == 40
            means = [v["pass_at_k"][str(k)]["mean"] for k in res["ks"]]
            assert all(a <= b + 1e-12 for a, b in itertools.pairwise(means))
            for k in res["ks"]:
                lo, hi = v["pass_at_k"][str(k)]["ci"]
                assert lo <= v["pass_at_k"][str(k)]["mean"] <= hi
        # same seed, same samples (the generator is seeded); the chunking does not change them
        again = passk_eval(ctx, model, tok, seed=1, name="tiny", chunk_questions=5)
        assert again["splits"]["test"]["pairs"] == res["splits"]["test"]["pairs"]

        # the stage writes passk.json, and --resume reuses it without loading a model
        d = tmp_path / "run" / "start_eval"
        out = passk_stage(ctx, d, lambda: (model, tok), seed=0, name="sft_start")
        assert json.loads((d / "passk.json").read_text())["splits"].keys() == out["splits"].keys()
        cfg.resume = True

        def no_model():
            raise AssertionError("resumed: the model must not be loaded")

        assert passk_stage(ctx, d, no_model, seed=0, name="sft_start") == json.loads((d / "passk.json").read_text())
        cfg.passk_max = 4  # other settings: recomputed
        assert passk_stage(ctx, d, lambda: (model, tok), seed=0, name="sft_start")["ks"] == [1, 2, 4]
        cfg.passk_max = 0
        assert passk_stage(ctx, d, no_model, seed=0, name="sft_start") is None
    finally:
        torch.set_num_threads(n_threads)


# ------------------------------------------------------------------------------------------------ report blocks
def _passk_file(path: Path, curves: dict[str, list[float]], width: float) -> None:
    """A passk.json as passk_eval writes it, with the given pass@k means per split (k = 1, 2, 4, 8)."""
    splits = {}
    for split, means in curves.items():
        splits[split] = {"questions": list(range(6)), "pairs": [[8, 1]] * 6, "success": means[0], "episodes": 48,
                         "pass_at_k": {str(k): {"mean": m, "ci": [max(0.0, m - width), min(1.0, m + width)]}
                                       for k, m in zip((1, 2, 4, 8), means)}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"name": path.parent.name, "seed": 0, "ks": [1, 2, 4, 8], "settings": {},
                                "splits": splits, "missing_splits": []}))


def _metrics(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _fabricated_run(out: Path) -> None:
    from searchgym.train.entropy_law import entropy_law

    # the SFT start is better at large k on test, worse at k = 1; no difference on shift_strategy
    _passk_file(out / "start_eval" / "passk.json",
                {"test": [0.20, 0.35, 0.55, 0.80], "shift_strategy": [0.1, 0.15, 0.2, 0.25]}, 0.05)
    for s, jitter in ((1, 0.0), (2, 0.01)):
        _passk_file(out / "arms" / "grpo" / f"seed{s}" / "passk.json",
                    {"test": [0.40 + jitter, 0.42 + jitter, 0.44 + jitter, 0.45 + jitter],
                     "shift_strategy": [0.1 + jitter, 0.15, 0.2, 0.25 + jitter]}, 0.2)
    _passk_file(out / "arms" / "grpo" / "seed3" / "passk.json", {"test": [0.9] * 4}, 0.01)  # beyond cfg.seeds
    _passk_file(out / "arms" / "sft" / "seed1" / "passk.json",
                {"test": [0.21, 0.36, 0.56, 0.79], "shift_strategy": [0.1, 0.15, 0.2, 0.25]}, 0.05)
    rng = np.random.default_rng(0)
    for s in (1, 2):  # GRPO's training log: reward follows the law in token entropy
        h = np.linspace(1.4, 0.3, 10) + rng.normal(0, 0.02, 10)
        r = entropy_law(h, 0.3, 1.1) + rng.normal(0, 0.01, 10)
        _metrics(out / "arms" / "grpo" / f"seed{s}" / "metrics.jsonl",
                 [{"step": i + 1, "charts/reward": float(r[i]), "charts/token_entropy": float(h[i])}
                  for i in range(10)])
        _metrics(out / "arms" / "grpo_kl" / f"seed{s}" / "metrics.jsonl",
                 [{"step": i + 1, "charts/reward": 0.5, "charts/token_entropy": 1.0} for i in range(10)])
    _metrics(out / "arms" / "sft" / "seed1" / "metrics.jsonl",
             [{"step": 4 * i, "charts/tracked_step": i, "charts/reward": 0.3, "charts/token_entropy": 1.0}
              for i in range(1, 6)])


def test_report_builds_passk_and_entropy_law_blocks_from_run_files(tmp_path):
    from searchgym.experiments.squeeze.config import ARM_LABELS, SqueezeConfig
    from searchgym.experiments.squeeze.plots import _plot_entropy_law, _plot_passk_large
    from searchgym.experiments.squeeze.report import entropy_law_section, passk_section
    from searchgym.experiments.squeeze.summary import _series, entropy_law_block, passk_block

    out = tmp_path / "run"
    _fabricated_run(out)
    cfg = SqueezeConfig(out=str(out), seeds=2, arms=("sft", "grpo", "grpo_kl"))
    pk = passk_block(cfg, out, ["sft", "grpo", "grpo_kl"])
    assert set(pk["start"]) == {"test", "shift_strategy"} and pk["ks"] == [1, 2, 4, 8]
    assert pk["start"]["test"]["8"] == {"mean": 0.8, "ci": [pytest.approx(0.75), pytest.approx(0.85)]}
    assert pk["seeds"] == {"sft": [1], "grpo": [1, 2]}  # seed3 > cfg.seeds; grpo_kl has no file
    g = pk["arms"]["grpo"]["test"]
    assert g["1"]["mean"] == pytest.approx(0.405) and g["1"]["n_seeds"] == 2 and g["1"]["ci_kind"] == "seeds_t"
    assert g["1"]["ci"][0] < 0.40 and g["1"]["ci"][1] > 0.41  # t-interval over the two seeds (0.40, 0.41)
    # identical seeds (shift_strategy, k=2): not a zero-width interval but the seeds' bootstrap bounds
    assert pk["arms"]["grpo"]["shift_strategy"]["2"]["ci_kind"] == "bootstrap_questions_mean"
    assert pk["arms"]["grpo"]["shift_strategy"]["2"]["ci"] == [pytest.approx(0.0), pytest.approx(0.35)]
    s = pk["arms"]["sft"]["test"]["1"]
    assert s["ci_kind"] == "bootstrap_questions" and s["ci"] == [pytest.approx(0.16), pytest.approx(0.26)]
    cr = pk["crossing"]["test"]["grpo"]
    assert cr["start_above"] == [8] and cr["first_start_above"] == 8 and cr["arm_above"] == [1]
    assert pk["crossing"]["test"]["sft"]["start_above"] == []
    assert "from k = 8" in pk["sentences"]["test"] and "no detectable crossing for" in pk["sentences"]["test"]
    assert pk["sentences"]["shift_strategy"].startswith("shift_strategy: no detectable crossing")
    assert passk_block(SqueezeConfig(out=str(out), passk_max=0), out, ["grpo"]) is None

    arms = {a: {"label": ARM_LABELS[a], "series": _series(out / "arms" / a, a)} for a in ("sft", "grpo", "grpo_kl")}
    el = entropy_law_block(cfg, arms)
    assert set(el) == {"grpo", "grpo_kl"}  # RL arms only
    assert el["grpo"]["ok"] and el["grpo"]["n"] == 20 and el["grpo"]["intervention"] is False
    assert el["grpo"]["a"] == pytest.approx(0.3, abs=0.05) and el["grpo"]["b"] == pytest.approx(1.1, abs=0.08)
    assert el["grpo_kl"]["ok"] is False and "constant" in el["grpo_kl"]["reason"]
    assert el["grpo_kl"]["intervention"] is True
    json.dumps({"passk": pk, "entropy_law": el}, allow_nan=False)  # strict JSON

    summary = {"passk": pk, "entropy_law": el, "arms": arms}
    md = "\n".join(passk_section(summary) + entropy_law_section(summary))
    assert "| SFT start | – | 0.200 [0.150, 0.250]" in md and pk["sentences"]["test"] in md
    assert "not held-out performance" in md and "| GRPO | no | 20 |" in md
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    saved = {}

    def save(fig, name, title):
        fig.savefig(tmp_path / name, dpi=40, format="png")
        plt.close(fig)
        saved[name] = title

    colors = {"sft": "C0", "grpo": "C1", "grpo_kl": "C2"}
    _plot_passk_large(summary, plt, colors, save)
    _plot_entropy_law(summary, plt, colors, save)
    assert set(saved) == {"pass_at_k_large.png", "entropy_law.png"}
    assert all((tmp_path / n).stat().st_size > 1000 for n in saved)
