"""scripts/dose_probe_summary.py: the dose probe's GRPO − continued SFT over seeds, from the stored files
(docs/squeeze.md, "A dose that learns: probe")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import load_script

ROOT = Path(__file__).resolve().parents[1]
PROBE = ROOT / "results/dose-probe-lr2e-4"


def test_the_stored_four_seeds_reproduce_the_documented_interval(tmp_path, capsys):
    mod = load_script("dose_probe_summary")
    assert mod.main(["--legacy", str(PROBE / "summary.json"), "--json", str(tmp_path / "s.json")]) == 0
    s = json.loads((tmp_path / "s.json").read_text())["summary"]
    assert s["n_seeds"] == 4 and s["mean"] == pytest.approx(0.0322109375)
    assert s["ci95"] == pytest.approx([-0.05833, 0.12275], abs=1e-5) and s["one_sided_p"] == pytest.approx(0.1699, abs=1e-4)
    assert "| 4 | 0.488 | 0.094 | 0.531 | 0.060 | -0.043 |" in capsys.readouterr().out


def test_a_seed_twice_or_a_file_without_comparator_is_refused(tmp_path, capsys):
    mod = load_script("dose_probe_summary")
    # seed 4 is in the legacy summary and in its own lm_dose.py output: counted once or not at all
    assert mod.main(["--legacy", str(PROBE / "summary.json"), str(PROBE / "seed4-dose.json")]) == 2
    assert "appear more than once" in capsys.readouterr().err
    d = json.loads((PROBE / "seed4-dose.json").read_text())
    del d["lrs"]["0.0002"]["runs"][0]["comparator"]
    (tmp_path / "nocomp.json").write_text(json.dumps(d))
    assert mod.main([str(tmp_path / "nocomp.json")]) == 2
    assert "has no comparator" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{not json")
    assert mod.main([str(tmp_path / "bad.json")]) == 2
    assert "cannot read it as JSON" in capsys.readouterr().err
    assert mod.main([str(PROBE / "seed4-dose.json"), "--lr", "0.001"]) == 2
    assert "learning rate 0.001" in capsys.readouterr().err


def test_ten_seeds_on_world_0_and_three_on_world_1_as_documented(tmp_path):
    mod = load_script("dose_probe_summary")
    assert mod.main(["--legacy", str(PROBE / "summary.json"), str(PROBE / "seeds5-7-9-dose.json"),
                     str(PROBE / "seeds6-8-10-dose.json"), "--json", str(tmp_path / "w0.json")]) == 0
    w0 = json.loads((tmp_path / "w0.json").read_text())
    assert [r["seed"] for r in w0["seeds"]] == list(range(1, 11))
    assert w0["summary"] == json.loads((PROBE / "summary-10-seeds.json").read_text())["summary"]
    assert w0["summary"]["ci95"][0] > 0  # GRPO above continued SFT on world 0 over 10 seeds
    w1_dir = ROOT / "results/dose-probe-lr2e-4-world1"
    assert mod.main([str(w1_dir / "seeds1-3-dose.json"), "--json", str(tmp_path / "w1.json")]) == 0
    w1 = json.loads((tmp_path / "w1.json").read_text())["summary"]
    assert w1 == json.loads((w1_dir / "summary.json").read_text())["summary"] and w1["n_seeds"] == 3
    assert w1["ci95"][0] > 0
    # the docs quote these figures
    doc = (ROOT / "docs/squeeze.md").read_text()
    for s in (w0["summary"], w1):
        assert f"{s['mean']:+.3f} [{s['ci95'][0]:+.3f}, {s['ci95'][1]:+.3f}]" in doc
