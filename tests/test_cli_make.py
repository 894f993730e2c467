"""The Makefile's first-contact recipes: `make demo` writes a new run directory each time (an earlier report
survives a re-run) and says where; the venv recipe says what it is doing before each long step."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _fake_venv(tmp: Path) -> Path:
    """A venv whose `searchgym` stands in for the real squeeze (the recipe is under test, not squeeze)."""
    venv = tmp / "venv"
    (venv / "bin").mkdir(parents=True)
    sg = venv / "bin" / "searchgym"
    sg.write_text('#!/bin/sh\n# args: squeeze --quick --out DIR\nmkdir -p "$4" && echo "report of $4" > "$4/report.md"\n')
    sg.chmod(0o755)
    (venv / ".installed").touch()
    os.utime(venv / ".installed", (4e9, 4e9))  # newer than pyproject.toml: no reinstall
    return venv


def _make(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    for f in ("Makefile", "pyproject.toml"):
        if not (work / f).exists():
            shutil.copy(ROOT / f, work / f)
    return subprocess.run(["make", "--no-print-directory", *args], cwd=work, capture_output=True, text=True, check=False,
                          timeout=60)


def test_make_demo_writes_a_new_run_dir_each_time(tmp_path):
    venv = _fake_venv(tmp_path)
    first = _make(tmp_path, "demo", f"VENV={venv}")
    assert first.returncode == 0, first.stderr
    second = _make(tmp_path, "demo", f"VENV={venv}")
    assert second.returncode == 0, second.stderr
    runs = sorted((tmp_path / "work" / "runs").iterdir())
    assert len(runs) == 2 and all(r.name.startswith("demo-") for r in runs)
    for r, proc in zip(runs, (first, second)):
        assert (r / "report.md").read_text() == f"report of {r.relative_to(tmp_path / 'work')}\n"
        assert f"demo run directory: runs/{r.name}" in proc.stdout and "report.md" in proc.stdout


def test_venv_recipe_announces_each_step(tmp_path):
    # PYTHON=false: the first step fails at once; what matters is that it said what it was doing first
    r = _make(tmp_path, "venv", f"VENV={tmp_path / 'nope'}", "PYTHON=false")
    assert r.returncode != 0
    assert "[venv 1/4] creating" in r.stdout
    dry = _make(tmp_path, "-n", "venv", f"VENV={tmp_path / 'nope'}")
    assert dry.stdout.count("[venv ") == 4


def _calls_of_make(tmp_path: Path, target: str, extra_sh: str = "") -> list[list[str]]:
    """Run ``make TARGET`` with a fake ``searchgym`` that logs its arguments (and runs ``extra_sh``); its calls."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    log = tmp_path / "calls.txt"
    sg = venv / "bin" / "searchgym"
    sg.write_text(f'#!/bin/sh\necho "$*" >> {log}\n{extra_sh}')
    sg.chmod(0o755)
    (venv / ".installed").touch()
    os.utime(venv / ".installed", (4e9, 4e9))
    r = _make(tmp_path, target, f"VENV={venv}")
    assert r.returncode == 0, r.stderr
    return [ln.split() for ln in log.read_text().splitlines()]


def _parse_under_the_real_cli(calls: list[list[str]]) -> None:
    """Every call parses under the real `searchgym` command (click.UsageError on an unknown option)."""
    import typer

    from searchgym.cli import app

    group = typer.main.get_command(app)
    for call in calls:
        cmd = group.get_command(None, call[0])  # type: ignore[attr-defined]
        cmd.make_context(call[0], call[1:])


def test_make_squeeze_worlds_runs_two_worlds_then_pools_them(tmp_path):
    """`make squeeze-worlds`: worlds 1-5 each with their own start (resumable; a world whose start fails the gate
    stops with exit code 3 and the recipe goes on), then the headline pooled over the worlds; every call it makes
    parses under the real `searchgym` command (no option that does not exist)."""
    # world 2's start "fails its gate": exit code 3, which the recipe takes as "this world stops here"
    calls = _calls_of_make(tmp_path, "squeeze-worlds", 'case "$*" in *"--world-seed 2 "*) exit 3;; esac\n')
    assert len(calls) == 6
    for w, call in zip((1, 2, 3, 4, 5), calls):
        assert call[call.index("--world-seed") + 1] == str(w) and "--resume" in call
        assert call[call.index("--start-from") + 1] == "train" and "--stop-on-failed-gate" in call
    assert "--headline" in calls[5]
    assert calls[5][calls[5].index("--worlds") + 1].rstrip(",").split(",") == [f"runs/squeeze-w{w}" for w in range(1, 6)]
    _parse_under_the_real_cli(calls)


def test_squeeze_learns_runs_both_worlds_at_the_learning_dose_and_parses(tmp_path):
    """`make squeeze-learns`: worlds 0 and 1 at --preset learns with both controls, resumable; world 1 from the
    start stored with the dose probe (which exists in the tree); every call parses under the real command."""
    calls = _calls_of_make(tmp_path, "squeeze-learns")
    assert len(calls) == 2
    for w, call in zip((0, 1), calls):
        assert call[call.index("--preset") + 1] == "learns" and "--resume" in call
        assert call[call.index("--arms") + 1] == "sft,grpo,rs_sft,grpo_shuffled"
        assert call[call.index("--out") + 1] == f"runs/learns-w{w}"
    start = calls[1][calls[1].index("--start-from") + 1]
    assert (ROOT / start / "config.json").exists() and calls[1][calls[1].index("--world-seed") + 1] == "1"
    _parse_under_the_real_cli(calls)
