"""Issue 33: commands that write files or folders (``synth``, ``tiny-model --out``, ``squeeze --out/--resume``)
given hostile arguments or an output that is not theirs: a one-line typed error before any work, nothing of
the user's deleted or overwritten, no temporary file left behind; peak RSS measured from outside."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import PYTHON, SEARCHGYM, no_traceback, run_measured

BUDGET_S = 120   # wall-clock guard on a loaded 2-core machine (the bound is 10 s unloaded)
RSS_MB = 500


def _one_line(rc: int, err: str, peak: float, *words: str) -> str:
    assert rc != 0, err
    no_traceback(err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "error" in lines[0].lower(), err
    for w in words:
        assert w in lines[0], err
    assert peak < RSS_MB, peak
    return lines[0]


# --- synth ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("args,words", [
    (["{d}", "10"], ["is a folder"]),
    (["{d}/c.jsonl", "10", "--words", "1e9"], ["words_per_passage"]),
    (["{d}/c.jsonl", "10", "--words", "1000000000"], ["words_per_passage"]),
    (["{d}/c.jsonl", "10", "--vocab-size", "3e9"], ["vocab_size"]),
    (["{d}/c.jsonl", "10", "--seed", "1e23"], ["seed"]),
    (["{d}/c.jsonl", "-5"], ["n = -5"]),
    (["{d}/missing/c.jsonl", "10"], ["not an existing folder"]),
    (["{d}/c.jsonl", "10", "--seed", "abc"], ["not an integer"]),
])
def test_synth_refuses_hostile_arguments_before_starting(tmp_path: Path, args: list[str], words: list[str]):
    stale = tmp_path / ".c.jsonl.tmp-999999999"  # a killed earlier run's temporary file (no such pid)
    stale.write_text("partial\n")
    rc, _, err, peak, _ = run_measured([PYTHON, "-m", "searchgym.retrieval.synth",
                                        *(a.format(d=tmp_path) for a in args)], timeout=BUDGET_S)
    _one_line(rc, err, peak, *words)
    assert not (tmp_path / "c.jsonl").exists()


def test_synth_writes_and_removes_a_stale_temporary_file(tmp_path: Path):
    stale = tmp_path / ".c.jsonl.tmp-999999999"
    stale.write_text("partial\n")
    rc, out, err, peak, _ = run_measured([PYTHON, "-m", "searchgym.retrieval.synth", str(tmp_path / "c.jsonl"),
                                          "50", "--vocab-size", "500"], timeout=BUDGET_S)
    assert rc == 0, err
    rows = [json.loads(x) for x in (tmp_path / "c.jsonl").read_text().splitlines()]
    assert len(rows) == 50 and rows[0]["id"] == "0"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl"]
    assert peak < RSS_MB
