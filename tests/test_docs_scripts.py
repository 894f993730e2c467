"""The runnable scripts of examples/ (the three journeys of the README) run end to end, offline, on a CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def _run(script: str, *args: str, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", MPLBACKEND="Agg", SEARCHGYM_CACHE=str(cwd / ".cache"))
    r = subprocess.run([sys.executable, str(EXAMPLES / script), *args], cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=900, check=False, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, f"{script} exited {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    assert "Traceback" not in r.stderr
    return r.stdout


def test_every_example_is_run_by_a_test():
    here = Path(__file__).read_text(encoding="utf-8")
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == ["analyze_verl_dump.py", "custom_corpus_env.py",
                                                             "trl_train.py"]
    assert all(f'"{p.name}"' in here for p in EXAMPLES.glob("*.py"))


def test_custom_corpus_env(tmp_path):
    out = _run("custom_corpus_env.py", "--out", "work", cwd=tmp_path)
    assert "without dataset=: corpus=" in out                      # the refusal names dataset=
    assert "<information>Doc 1(Title:" in out
    summary = out.split("summary:", 1)[1]
    assert "'em': 1.0" in summary and (tmp_path / "work" / "trajectories.jsonl").exists()


@pytest.mark.slow  # runs the docs' script end to end; .ci/run runs it
def test_analyze_verl_dump(tmp_path):
    out = _run("analyze_verl_dump.py", "--demo", "--out", "rep", cwd=tmp_path)
    assert "format': 'verl'" in out and (tmp_path / "rep" / "report.html").exists()
    summary = json.loads((tmp_path / "rep" / "summary.json").read_text(encoding="utf-8"))
    assert summary["runs"], summary.keys()
    # the script also reads a dump given as a path (the form a user runs)
    out = _run("analyze_verl_dump.py", str(tmp_path / "rep" / "rollout_data_dir"), "--out", "rep2", cwd=tmp_path)
    assert (tmp_path / "rep2" / "summary.json").exists()


@pytest.mark.slow  # ~30 s: builds the tiny model and runs 2 GRPO steps on CPU
def test_trl_train(tmp_path):
    pytest.importorskip("trl")
    out = _run("trl_train.py", "--out", "trl", cwd=tmp_path)
    assert "tools/call_frequency" in out and "diversity/string/entropy" in out
