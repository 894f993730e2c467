"""scripts/lm_competence.py (the LM recipe check the README cites) runs end to end and prints its table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # runs the competence script end to end
def test_lm_competence_script_prints_train_and_test_rows(tmp_path):
    cmd = [sys.executable, str(ROOT / "scripts" / "lm_competence.py"), "--n-entities", "40", "--pretrain-steps", "2",
           "--sft-steps", "2", "--questions", "2", "--samples", "1", "--temperatures", "1.0", "--threads", "1",
           "--out", str(tmp_path / "m")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [ln for ln in r.stdout.splitlines() if ln.startswith(("| train |", "| test |"))]
    assert len(rows) == 2 and all(ln.endswith("| 2 |") for ln in rows)
    assert (tmp_path / "m" / "sft" / "model" / "config.json").exists()
