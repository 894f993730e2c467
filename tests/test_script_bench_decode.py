"""scripts/bench_decode.py: a decode step split into attention and the rest (docs/benchmarks.md)."""

from __future__ import annotations

import json

import pytest
from helpers import load_script

pytest.importorskip("torch")
pytest.importorskip("transformers")


def test_rows_split_a_decode_step_into_attention_and_the_rest(tmp_path, capsys):
    mod = load_script("bench_decode")
    assert mod.main(["--rows", "4", "--lens", "16,64", "--steps", "3", "--reps", "1",
                     "--json", str(tmp_path / "d.json")]) == 0
    rows = json.loads((tmp_path / "d.json").read_text())["rows"]
    assert [r["length"] for r in rows] == [16, 64]
    for r in rows:
        assert r["attention_ms"] > 0 and 0 < r["attention_share"] < 1
        assert r["rest_ms"] == pytest.approx(r["step_ms"] - r["attention_ms"])
    # 4 rows x 4 heads x (64 + 1 + 1.5) positions x 32 dims x 4 bytes x (K, V) x 3 layers
    assert rows[1]["kv_mb_per_step"] == pytest.approx(4 * 4 * 66.5 * 32 * 4 * 2 * 3 / 1e6)
    assert "| 64 |" in capsys.readouterr().out


def test_bad_arguments_are_refused(capsys):
    mod = load_script("bench_decode")
    with pytest.raises(SystemExit):
        mod.main(["--lens", "a,b"])
    assert "comma-separated integers" in capsys.readouterr().err
    assert mod.main(["--lens", "2000", "--rows", "1"]) == 2  # past the tiny LM's 1,024 positions
    assert "exceeds the model's" in capsys.readouterr().err
