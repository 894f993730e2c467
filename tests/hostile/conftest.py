"""The hostile-input suite: each attack of issue 24 run against the real CLI and real servers, in subprocesses
on 127.0.0.1, with peak memory measured from outside (psutil) and wall-clock budgets.

The budgets are the correctness bounds docs/reliability.md states (a hang or a blow-up is the failure); every
loop here has a deadline and stops by itself. Servers are started once per module and stopped by their pid.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

psutil = pytest.importorskip("psutil")
httpx = pytest.importorskip("httpx")

PYTHON = sys.executable
SEARCHGYM = str(Path(sys.executable).with_name("searchgym"))
START_BUDGET_S = 180  # a server start on a loaded 2-core machine (index load, numba warm-up)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss(pid: int) -> int:
    """Resident memory of ``pid`` in bytes, read from outside the process."""
    return psutil.Process(pid).memory_info().rss


class PeakRSS:
    """Samples a process's RSS every ``interval`` seconds in a thread: ``with PeakRSS(pid) as peak: ...``, then
    ``peak.rise`` is the largest RSS seen minus the RSS at the start, in bytes."""

    def __init__(self, pid: int, interval: float = 0.02):
        self.pid, self.interval = pid, interval
        self.start = self.peak = rss(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        proc = psutil.Process(self.pid)
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, proc.memory_info().rss)
            except psutil.Error:
                return
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakRSS:  # noqa: PYI034 - final in practice
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    @property
    def rise_mb(self) -> float:
        return (self.peak - self.start) / 2**20


def run_measured(cmd: list[str], *, timeout: float, cwd: Path | None = None, env: dict[str, str] | None = None,
                 ) -> tuple[int, str, str, float, float]:
    """Run ``cmd`` to completion: (returncode, stdout, stderr, peak RSS in MB, seconds). Killed (its own pid)
    and failed when it runs past ``timeout``."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                            env={**os.environ, **(env or {})})
    peak = 0
    out: dict[str, str] = {}

    def drain(name: str, stream: Any) -> None:
        out[name] = stream.read()

    readers = [threading.Thread(target=drain, args=(n, s), daemon=True)
               for n, s in (("out", proc.stdout), ("err", proc.stderr))]
    for r in readers:
        r.start()
    ps = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            peak = max(peak, ps.memory_info().rss)
        except psutil.Error:
            pass
        if time.monotonic() - t0 > timeout:
            proc.kill()
            proc.wait(10)
            pytest.fail(f"{cmd[:3]} ran past its {timeout:g} s budget")
        time.sleep(0.02)
    for r in readers:
        r.join(10)
    return proc.returncode, out.get("out", ""), out.get("err", ""), peak / 2**20, time.monotonic() - t0


class ServerProcess:
    """A server command run as a subprocess until ``stop()``; ``url`` once ``/health`` answers 200."""

    def __init__(self, args: list[str], port: int, cwd: Path | None = None):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log = (cwd or Path.cwd()) / f"server-{port}.log"
        self._log = self.log.open("w")
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self._log, cwd=cwd,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.pid = self.proc.pid
        deadline = time.monotonic() + START_BUDGET_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{args[:3]} exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{args[:3]} did not answer /health within {START_BUDGET_S} s")
            time.sleep(0.1)

    def health_seconds(self, timeout: float = 30.0) -> tuple[int, float]:
        """(status, seconds) of one GET /health on a fresh connection."""
        t = time.monotonic()
        r = httpx.get(self.url + "/health", timeout=timeout)
        return r.status_code, time.monotonic() - t

    def stderr_text(self) -> str:
        self._log.flush()
        return self.log.read_text()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


@pytest.fixture(scope="session")
def world_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedded world's corpus as a BM25 index directory, built with the CLI (3,013 passages)."""
    d = tmp_path_factory.mktemp("hostile_world")
    subprocess.run([SEARCHGYM, "data", "export-world", "--out", str(d / "world")], check=True,
                   capture_output=True, timeout=300)
    subprocess.run([SEARCHGYM, "index", "build", str(d / "world" / "corpus.jsonl"), "--out", str(d / "idx")],
                   check=True, capture_output=True, timeout=300)
    return d / "idx"


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real (tiny, random) causal LM directory: model.safetensors, config.json, tokenizer files."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    d = tmp_path_factory.mktemp("hostile_lm") / "lm"
    code = ("import sys\n"
            "from searchgym.train.tiny_lm import TinyLMConfig, create_tiny_lm\n"
            "cfg = TinyLMConfig(vocab_size=300, hidden_size=16, intermediate_size=32, num_layers=1, num_heads=2,"
            " max_positions=256)\n"
            "create_tiny_lm(['what is the capital of the country answer search'] * 50, sys.argv[1], cfg)\n")
    subprocess.run([PYTHON, "-c", code, str(d)], check=True, capture_output=True, timeout=300)
    return d


def no_traceback(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr[-3000:]


@pytest.fixture
def cwd_tmp(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
