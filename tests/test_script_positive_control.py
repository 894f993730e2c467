"""scripts/positive_control.py: the squeeze's positive control seed by seed, from the stored runs (docs/squeeze.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from helpers import load_script

ROOT = Path(__file__).resolve().parents[1]
RUNS = [ROOT / f"results/squeeze-controls2-w{w}-v3" for w in (0, 1, 5)]


def test_documented_command_reads_the_stored_runs(tmp_path, capsys):
    mod = load_script("positive_control")
    assert mod.main([*map(str, RUNS), "--json", str(tmp_path / "pc.json")]) == 0
    out = json.loads((tmp_path / "pc.json").read_text())
    assert len(out["rows"]) == 18 and {r["world"] for r in out["rows"]} == {0, 1, 5}
    # the seeds that learned their one-template reward are the ones whose template entropy fell
    learned = [r for r in out["rows"] if r["paid_last"] > 0.3]
    assert learned and all(r["change"] < -1.0 for r in learned)
    assert out["spearman"]["n"] == 18 and out["spearman"]["rho"] < 0
    assert "Spearman rank correlation" in capsys.readouterr().out


def test_a_run_without_the_arm_is_refused_with_a_reason(tmp_path, capsys):
    mod = load_script("positive_control")
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(RUNS[1] / "summary.json", run / "summary.json")
    assert mod.main([str(run)]) == 2
    assert "not a run with the grpo_positive arm" in capsys.readouterr().err
    seed = run / "arms/grpo_positive/seed1"
    seed.mkdir(parents=True)
    (seed / "metrics.jsonl").write_text('{"step": 1}\n')
    assert mod.main([str(run)]) == 2  # summary.json's 6 seed values against 1 seed folder
    assert "seed values" in capsys.readouterr().err
