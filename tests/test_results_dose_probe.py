"""The dose probe's figures in docs/squeeze.md are the ones its shipped per-seed files give (issue 31 §1)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
PROBE = ROOT / "results" / "dose-probe-lr2e-4"


def test_probe_summary_is_recomputed_from_the_seed_files_and_quoted_in_the_docs():
    s = json.loads((PROBE / "summary.json").read_text())
    for seed in s["seeds"]:
        n = seed["seed"]
        alone, whole = PROBE / f"seed{n}-sft_kl.json", PROBE / f"seed{n}-dose.json"
        assert alone.exists() or whole.exists() or (PROBE / f"seed{n}.json").exists(), n
        if alone.exists():  # the comparator run alone holds the success the summary quotes
            assert json.loads(alone.read_text())["comparator"]["success"] == seed["sft_kl_success"]
        if whole.exists():  # lm_dose.py's own output: both arms
            run = json.loads(whole.read_text())["lrs"]["0.0002"]["runs"][0]
            assert (run["success"], run["comparator"]["success"]) == (seed["grpo_success"], seed["sft_kl_success"])
        assert seed["grpo_minus_sft"] == seed["grpo_success"] - seed["sft_kl_success"]
    d = np.array([x["grpo_minus_sft"] for x in s["seeds"]])
    half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))
    assert s["grpo_minus_sft_mean"] == d.mean()
    assert np.allclose(s[f"ci95_t_{len(d) - 1}df"], [d.mean() - half, d.mean() + half])
    doc = (ROOT / "docs" / "squeeze.md").read_text()
    lo, hi = s[f"ci95_t_{len(d) - 1}df"]
    quoted = f"mean {d.mean():+.3f}, 95% t\ninterval [{lo:+.3f}, {hi:+.3f}] over {len(d)} seeds".replace("-", "−")
    assert quoted in doc, quoted
