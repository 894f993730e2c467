"""Every command of the command table (docs/getting-started.md), run for real on the embedded world.

In-process commands go through Typer's CliRunner; the servers (``serve``, ``serve-openenv``) run as real
subprocesses on 127.0.0.1 with a free port and are stopped. ``SMOKE`` must cover every row of the docs'
command table (a new row without a smoke run fails ``test_readme_commands_are_all_smoke_tested``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from searchgym.cli import app

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "data"


def _cli(*args: object, code: int = 0) -> str:
    r = CliRunner().invoke(app, [str(a) for a in args])
    assert r.exit_code == code, f"searchgym {' '.join(map(str, args))} -> {r.exit_code}\n{r.output}"
    assert "Traceback" not in r.output
    return r.output


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(args: list[str], probe: Callable[[str], bool], timeout: float = 60.0) -> None:
    """Start ``searchgym ARGS --host 127.0.0.1 --port P`` as a subprocess, wait until ``probe(url)``, stop it."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "searchgym.cli", *args, "--host", "127.0.0.1",
                             "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                pytest.fail(f"searchgym {' '.join(args)} exited {proc.returncode}:\n{proc.stdout.read()}")
            try:
                if probe(url):
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"searchgym {' '.join(args)} did not answer on {url} within {timeout:.0f} s")
            time.sleep(0.2)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


class Workspace:
    """Files the commands share, made on first use (by the commands themselves)."""

    def __init__(self, root: Path):
        self.root = root
        self._world: Path | None = None
        self._index: Path | None = None
        self._traj: Path | None = None
        self._lm: Path | None = None

    @property
    def world(self) -> Path:
        if self._world is None:
            out = self.root / "world"
            _cli("data", "export-world", "--out", out)
            self._world = out
        return self._world

    @property
    def index(self) -> Path:
        if self._index is None:
            out = self.root / "idx"
            _cli("index", "build", self.world / "corpus.jsonl", "--out", out, "--bm25")
            self._index = out
        return self._index

    @property
    def trajectories(self) -> Path:
        if self._traj is None:
            out = self.root / "rollout.jsonl"
            _cli("rollout", "--agent", "decompose", "-n", 6, "--samples", 2, "--out", out, "--no-progress")
            self._traj = out
        return self._traj

    @property
    def tiny_lm(self) -> Path:
        if self._lm is None:
            from searchgym.data import default_world
            from searchgym.experiments.squeeze.config import TINY_PROMPT
            from searchgym.train.tiny_lm import TinyLMConfig, create_tiny_lm, world_texts

            cfg = TinyLMConfig(vocab_size=500, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64,
                               max_positions=512)
            self._lm = self.root / "lm"
            create_tiny_lm(world_texts(default_world(), prompts=[TINY_PROMPT])[:400], self._lm, cfg, seed=0)
        return self._lm


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    return Workspace(tmp_path_factory.mktemp("smoke"))


# -- one smoke run per command -------------------------------------------------------------------------
def smoke_index_build(ws):
    idx = ws.index
    assert (idx / "manifest.json").is_file()


def smoke_index_info(ws):
    assert "bm25" in _cli("index", "info", ws.index)


def _sharded_index(ws) -> Path:
    out = ws.root / "sharded"
    if not (out / "manifest.json").is_file():
        _cli("index", "build", ws.world / "corpus.jsonl", "--out", out, "--shards", 2)
    return out


def smoke_index_split(ws):
    out = ws.index.parent / "split"
    assert "2 shard indexes" in _cli("index", "split", _sharded_index(ws), "--out", out, "--overwrite")
    assert "ShardedBM25Retriever" in _cli("search", out / "shard-000", "capital city", "-k", 1)


def smoke_serve_ray(ws):
    # The shard set is checked before any cluster is joined (the cluster runs: tests/test_serve_ray.py)
    out = _cli("serve-ray", ws.index, code=1)
    assert "not a sharded BM25 index" in out
    out = _cli("serve-ray", _sharded_index(ws), _sharded_index(ws), code=1)
    assert "listed twice" in out


def smoke_index_import_faiss(ws):
    faiss = pytest.importorskip("faiss")
    import json

    import numpy as np

    idx = _sharded_index(ws)
    n = json.loads((idx / "manifest.json").read_text())["n_passages"]
    f = faiss.IndexFlatIP(384)
    f.add(np.zeros((n, 384), np.float32))
    faiss.write_index(f, str(ws.root / "z.faiss"))
    out = ws.root / "imported"
    assert "imported" in _cli("index", "import-faiss", ws.root / "z.faiss", "--corpus", idx, "--model",
                              "all-MiniLM-L6-v2", "--out", out, "--overwrite")


def smoke_search(ws):
    out = _cli("search", ws.index, "capital city", "-k", 5)
    assert "score" in out.lower()


def smoke_serve(ws):
    def probe(url: str) -> bool:
        r = httpx.post(url + "/retrieve", json={"queries": ["capital city"], "topk": 2}, timeout=5)
        assert r.status_code == 200, r.text
        assert len(r.json()["result"][0]) == 2
        return True

    _serve(["serve", str(ws.index)], probe)


def smoke_data_export_world(ws):
    for f in ("corpus.jsonl", "train.parquet", "dev.jsonl"):
        assert (ws.world / f).is_file()


def smoke_data_info(ws):
    assert "questions" in _cli("data", "info", "world", "--split", "dev")
    assert "questions" in _cli("data", "info", ws.world / "dev.jsonl")


def smoke_data_pool(ws):
    out = ws.root / "pool"
    _cli("data", "pool", FIX / "hotpotqa_train.jsonl", FIX / "ircot_hotpotqa_dev.jsonl", "--out", out)
    assert (out / "corpus.jsonl").stat().st_size > 0 and (out / "questions.jsonl").stat().st_size > 0


def smoke_rollout(ws):
    out = _cli("rollout", "--agent", "decompose", "-n", 3, "--show", "--no-progress")
    assert "prediction" in out
    assert sum(1 for _ in ws.trajectories.open()) == 12


def smoke_eval(ws):
    s = ws.root / "eval.json"
    _cli("eval", "--agent", "question", "-n", 3, "--samples", 2, "--split", "dev", "--no-progress",
         "--summary-json", s)
    assert json.loads(s.read_text())["samples"] == 2


def smoke_analyze(ws):
    out = ws.root / "analysis"
    _cli("analyze", ws.trajectories, "--out", out)
    assert (out / "report.md").is_file() and (out / "summary.json").is_file()


def smoke_squeeze(ws):
    # fast: the headline of a run that does not exist is a clear error; the real run is test_squeeze_quick_run
    out = _cli("squeeze", "--headline", "--out", ws.root / "no-run", code=2)
    assert "summary.json" in out


def smoke_sft(ws):
    out = ws.root / "sft"
    _cli("sft", "--model", ws.tiny_lm, "--out", out, "-n", 8, "--passes", 1, "--max-steps", 1,
         "--batch-size", 4)
    assert (out / "model" / "config.json").is_file()


def smoke_rl(ws):
    out = ws.root / "rl"
    _cli("rl", "--model", ws.tiny_lm, "--out", out, "--steps", 1, "--prompts", 2, "--group-size", 2,
         "--n-entities", 40)
    assert (out / "final_model" / "config.json").is_file()


def smoke_serve_openenv(ws):
    pytest.importorskip("openenv")

    def probe(url: str) -> bool:
        return httpx.get(url + "/health", timeout=5).status_code == 200

    _serve(["serve-openenv"], probe)


def smoke_tiny_model(ws):
    pytest.importorskip("transformers")
    _cli("tiny-model", "--out", ws.root / "tiny")
    assert (ws.root / "tiny" / "config.json").exists() and (ws.root / "tiny" / "tokenizer_config.json").exists()


def smoke_make_test_integrations(ws):
    # The target builds a second venv and runs the trainers (minutes): check that make resolves it.
    if shutil.which("make") is None:
        pytest.skip("needs make")
    r = subprocess.run(["make", "-n", "test-integrations"], cwd=ROOT, capture_output=True, text=True,
                       check=False)
    assert "No rule to make target" not in r.stderr, "the README lists make test-integrations; the Makefile lacks it"
    assert r.returncode == 0 and "pytest" in r.stdout, r.stderr


SMOKE: dict[str, Callable[[Workspace], None]] = {
    "index build": smoke_index_build,
    "index info": smoke_index_info,
    "index split": smoke_index_split,
    "index import-faiss": smoke_index_import_faiss,
    "search": smoke_search,
    "serve": smoke_serve,
    "serve-ray": smoke_serve_ray,
    "data export-world": smoke_data_export_world,
    "data info": smoke_data_info,
    "data pool": smoke_data_pool,
    "rollout": smoke_rollout,
    "eval": smoke_eval,
    "analyze": smoke_analyze,
    "squeeze": smoke_squeeze,
    "sft": smoke_sft,
    "rl": smoke_rl,
    "serve-openenv": smoke_serve_openenv,
    "tiny-model": smoke_tiny_model,
    "make test-integrations": smoke_make_test_integrations,
}
SLOW = {"serve", "serve-openenv", "sft", "rl"}  # a subprocess start or a model: seconds each


def readme_commands(readme: Path = ROOT / "docs" / "getting-started.md") -> list[str]:
    """The commands of the command table (docs/getting-started.md, moved there from the README): ``searchgym index build CORPUS ...`` -> ``index build``."""
    text = readme.read_text(encoding="utf-8")
    m = re.search(r"^## Command line", text, re.MULTILINE)
    if m is None:
        return []
    end = text.find("\n## ", m.end())
    out = []
    for line in text[m.start():end if end > 0 else None].splitlines():
        m = re.match(r"\|\s*`(searchgym|make)\s+([^`|]*)", line)
        if not m:
            continue
        words = []
        for w in m.group(2).split():
            if not re.fullmatch(r"[a-z][a-z0-9-]*", w):
                break
            words.append(w)
        out.append(("make " if m.group(1) == "make" else "") + " ".join(words))
    return out


def test_readme_commands_are_all_smoke_tested():
    cmds = readme_commands()
    assert len(cmds) >= 9, cmds  # the table is there and parsed
    assert set(cmds) <= set(SMOKE), f"README commands without a smoke run: {sorted(set(cmds) - set(SMOKE))}"


def test_every_registered_command_is_smoke_tested():
    import typer.main

    group = typer.main.get_command(app)
    names = []
    for name, cmd in group.commands.items():
        sub = getattr(cmd, "commands", None)
        names += [f"{name} {s}" for s in sub] if sub else [name]
    assert set(names) <= set(SMOKE), sorted(set(names) - set(SMOKE))


@pytest.mark.parametrize("command", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW else c for c in SMOKE])
def test_command(ws, command):
    SMOKE[command](ws)


@pytest.mark.slow
def test_squeeze_quick_run(tmp_path):
    out = tmp_path / "demo"
    _cli("squeeze", "--quick", "--out", out, "--arms", "sft,grpo", "--steps", 2)
    assert (out / "report.md").is_file()
    assert "| GRPO |" in _cli("squeeze", "--headline", "--out", out)


def test_reports_respect_the_umask(ws, tmp_path):
    """Reports take the umask's mode (they were 0600: written through mkstemp)."""
    out = tmp_path / "analysis"
    r = subprocess.run([sys.executable, "-m", "searchgym.cli", "analyze", str(ws.trajectories), "--out", str(out)],
                       capture_output=True, text=True, check=False, preexec_fn=lambda: os.umask(0o027))
    assert r.returncode == 0, r.stderr
    for f in ("report.md", "report.html", "summary.json"):
        assert stat.S_IMODE((out / f).stat().st_mode) == 0o640, f
