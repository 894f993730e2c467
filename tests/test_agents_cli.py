"""``searchgym rollout`` / ``searchgym eval`` through the real CLI (Typer CliRunner, and a subprocess for Ctrl-C)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from searchgym.cli import app
from searchgym.diversity import pass_at_k
from searchgym.trajectory import load_trajectories

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False, env={"COLUMNS": "200"})


def test_rollout_writes_jsonl_and_summary(tmp_path):
    out = tmp_path / "r.jsonl"
    summ = tmp_path / "s.json"
    res = invoke("rollout", "--agent", "decompose", "-n", "24", "--split", "dev", "--out", str(out), "--no-progress",
                 "--show", "--show-max", "2", "--num-envs", "8", "--summary-json", str(summ))
    assert res.exit_code == 0, res.output
    trajs = load_trajectories(out)
    assert len(trajs) == 24 and len({t.question_id for t in trajs}) == 24
    assert all(t.agent == "decompose" and t.split == "dev" for t in trajs)
    for word in ("EM", "F1", "recall", "searches", "invalid", "all"):
        assert word in res.output
    for fam in {t.family for t in trajs}:
        assert fam in res.output
    assert res.output.count("Q: ") == 2  # --show, capped by --show-max
    s = json.loads(summ.read_text())["summary"]
    assert s["all"]["episodes"] == 24
    assert abs(s["all"]["em"] - sum(t.em for t in trajs) / 24) < 1e-9


def test_unknown_agent_lists_available_names():
    res = invoke("rollout", "--agent", "decompos", "-n", "2", "--no-progress")
    assert res.exit_code == 1
    text = " ".join(res.output.split())
    assert "unknown agent 'decompos'" in text and "Did you mean 'decompose'" in text
    for name in ("question", "keywords", "entity", "rephrase", "decompose", "prf", "random", "diverse"):
        assert name in text


def test_eval_reports_unbiased_pass_at_k(tmp_path):
    summ = tmp_path / "e.json"
    out = tmp_path / "e.jsonl"
    res = invoke("eval", "--agent", "random", "--samples", "4", "-n", "12", "--no-progress", "--summary-json",
                 str(summ), "--out", str(out), "--split", "dev")
    assert res.exit_code == 0, res.output
    for k in (1, 2, 4):
        assert f"pass@{k}" in res.output
    data = json.loads(summ.read_text())
    assert data["ks"] == [1, 2, 4]
    trajs = load_trajectories(out)
    assert len(trajs) == 48
    by_q: dict[str, list[int]] = {}
    for t in trajs:
        by_q.setdefault(t.question_id, []).append(t.em)
    assert len(by_q) == 12 and all(len(v) == 4 for v in by_q.values())
    for k in (1, 2, 4):
        expect = sum(pass_at_k(4, sum(v), k) for v in by_q.values()) / 12
        assert abs(data["pass_at_k"]["all"][str(k)] - expect) < 1e-9
    row = data["pass_at_k"]["all"]
    assert row["1"] <= row["2"] <= row["4"]


def test_dead_openai_server_fails_cleanly(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "dead.jsonl"
    res = invoke("rollout", "--agent", "some-model", "--base-url", f"http://127.0.0.1:{port}/v1", "-n", "3",
                 "--max-retries", "1", "--request-timeout", "2", "--out", str(out), "--no-progress")
    assert res.exit_code == 1
    text = " ".join(res.output.split())
    assert "unavailable after 2 attempts" in text and "0 finished episodes are saved" in text
    assert out.exists() and load_trajectories(out) == []


def test_ctrl_c_leaves_valid_jsonl(tmp_path):
    out = tmp_path / "int.jsonl"
    cmd = [sys.executable, "-m", "searchgym.cli", "rollout", "--agent", "prf", "-n", "100000", "--repeat", "--out", str(out),
           "--no-progress", "--num-envs", "4"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            if out.exists() and len(out.read_text().splitlines()) >= 20:
                break
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err
    lines = Path(out).read_text().splitlines()
    trajs = load_trajectories(out)  # every line parses: nothing half-written
    assert len(trajs) == len(lines) >= 20
    assert f"{len(trajs)} finished episodes" in " ".join(err.split())
