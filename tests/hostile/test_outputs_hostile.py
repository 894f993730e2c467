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
    rc, _, err, peak, _ = run_measured([PYTHON, "-m", "searchgym.retrieval.synth", str(tmp_path / "c.jsonl"),
                                          "50", "--vocab-size", "500"], timeout=BUDGET_S)
    assert rc == 0, err
    rows = [json.loads(x) for x in (tmp_path / "c.jsonl").read_text().splitlines()]
    assert len(rows) == 50 and rows[0]["id"] == "0"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl"]
    assert peak < RSS_MB


# --- tiny-model -------------------------------------------------------------------------------------------
def _tiny(tmp_path: Path, *args: str) -> tuple[int, str, str, float, float]:
    pytest.importorskip("transformers")
    return run_measured([SEARCHGYM, "tiny-model", *args], timeout=BUDGET_S * 2, cwd=tmp_path)


@pytest.mark.slow  # each run imports torch + transformers (~20-60 s on a loaded machine)
def test_tiny_model_refuses_a_huge_seed(tmp_path: Path):
    rc, _, err, peak, _ = _tiny(tmp_path, "--out", str(tmp_path / "m"), "--seed", str(10**23))
    _one_line(rc, err, peak, "--seed")
    assert not (tmp_path / "m").exists()


@pytest.mark.slow  # each run imports torch + transformers (~20-60 s on a loaded machine)
def test_tiny_model_never_replaces_a_folder_of_other_files(tmp_path: Path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text('{"mine": 1}\n')
    (other / "notes.txt").write_text("keep\n")
    for extra in ([], ["--overwrite"]):
        rc, _, err, peak, _ = _tiny(tmp_path, "--out", str(other), *extra)
        _one_line(rc, err, peak, "other files")
    assert sorted(p.name for p in other.iterdir()) == ["config.json", "notes.txt"]
    assert (other / "config.json").read_text() == '{"mine": 1}\n'


@pytest.mark.slow  # each run imports torch + transformers (~20-60 s on a loaded machine)
def test_tiny_model_replaces_its_own_model_only_with_overwrite(tmp_path: Path):
    m = tmp_path / "m"
    rc, _, err, _, _ = _tiny(tmp_path, "--out", str(m), "--seed", "1")
    assert rc == 0, err
    weights = (m / "model.safetensors").read_bytes()
    rc, _, err, peak, _ = _tiny(tmp_path, "--out", str(m), "--seed", "2")
    _one_line(rc, err, peak, "--overwrite")
    assert (m / "model.safetensors").read_bytes() == weights  # the model already there is kept
    rc, _, err, _, _ = _tiny(tmp_path, "--out", str(m), "--seed", "2", "--overwrite")
    assert rc == 0, err
    assert (m / "model.safetensors").read_bytes() != weights
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary sibling left


# --- squeeze --out / --resume -------------------------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "results" / "squeeze-world1-v3"  # a real run's config.json


def _squeeze(*args: str) -> tuple[int, str, str, float, float]:
    return run_measured([SEARCHGYM, "squeeze", "--quick", *args], timeout=BUDGET_S)


def test_squeeze_out_refuses_a_folder_of_other_files(tmp_path: Path):
    other = tmp_path / "other"
    (other / "plots").mkdir(parents=True)
    (other / "plots" / "fig.png").write_bytes(b"png")
    (other / "sft").mkdir()
    (other / "report.md").write_text("my report\n")
    (other / "config.json").write_text('{"mine": true}\n')
    before = sorted(str(p.relative_to(other)) for p in other.rglob("*"))
    for extra in ([], ["--resume"]):
        rc, _, err, peak, _ = _squeeze("--out", str(other), *extra)
        _one_line(rc, err, peak, "not a squeeze run")
    assert sorted(str(p.relative_to(other)) for p in other.rglob("*")) == before
    assert (other / "config.json").read_text() == '{"mine": true}\n'


@pytest.mark.parametrize("stages,words", [("[1]", "list"), ("{not json", "not a squeeze stages.json"),
                                          ('{"_elapsed_s": NaN}', "not a finite number"),
                                          ('{"_elapsed_s": "many"}', "_elapsed_s"),
                                          (b"\xff\xfe", "not UTF-8")])
def test_squeeze_resume_refuses_an_invalid_stages_json(tmp_path: Path, stages, words: str):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text((RUN / "config.json").read_text())
    p = run / "stages.json"
    p.write_bytes(stages) if isinstance(stages, bytes) else p.write_text(stages)
    rc, _, err, peak, _ = _squeeze("--out", str(run), "--resume")
    _one_line(rc, err, peak, words, "without --resume")
    assert sorted(x.name for x in run.iterdir()) == ["config.json", "stages.json"]
