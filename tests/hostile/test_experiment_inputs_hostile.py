"""Issue 33: ``squeeze --worlds`` given hostile summary.json files (nested 100,000 deep, not UTF-8, a seed value
"abc", 1e400, NaN, an arm given as a list, a config that is a list): a one-line ConfigError from the real CLI
(peak RSS measured from outside), never a traceback nor a verdict computed from a non-finite number."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.sweeps import first_fast

from .conftest import SEARCHGYM, no_traceback, run_measured

ROOT = Path(__file__).resolve().parents[2]
W0, W1 = ROOT / "results" / "squeeze-default-v3", ROOT / "results" / "squeeze-world1-v3"
BUDGET_S = 120
RSS_MB = 500


def _summary() -> dict:
    return json.loads((W1 / "summary.json").read_text())


def _raw_with_first_value(text: str) -> bytes:
    """The summary with the first seed's GRPO test success written as ``text`` (raw JSON)."""
    s = _summary()
    s["arms"]["grpo"]["test_success"]["values"][0] = "__X__"
    return json.dumps(s).replace('"__X__"', text).encode()


def _attack(name: str) -> bytes:
    s = _summary()
    if name == "deep":
        return b"[" * 100_000 + b"]" * 100_000
    if name == "not_utf8":
        return b'{"arms": {}, "config": {"x": "\xff\xfe"}}'
    if name == "seed_abc":
        return _raw_with_first_value('"abc"')
    if name == "1e400":
        return _raw_with_first_value("1e400")
    if name == "nan":
        return _raw_with_first_value("NaN")
    if name == "arm_list":
        s["arms"]["grpo"] = [0.1, 0.2]
    elif name == "config_list":
        s["config"] = [0]
    elif name == "world_seed_str":
        s["config"]["world_seed"] = "1"
    return json.dumps(s).encode()


@pytest.mark.parametrize("name,words", first_fast([
    ("deep", "nested too deeply"), ("not_utf8", "not UTF-8"), ("seed_abc", "finite numbers"),
    ("1e400", "out of range"), ("nan", "not a finite number"), ("arm_list", "must be an object"),
    ("config_list", "must be objects"), ("world_seed_str", "world_seed"),
]))
def test_squeeze_worlds_refuses_a_hostile_summary(tmp_path: Path, name: str, words: str):
    w0, w1 = tmp_path / "w0", tmp_path / "w1"
    w0.mkdir()
    shutil.copy(W0 / "summary.json", w0 / "summary.json")
    w1.mkdir()
    (w1 / "summary.json").write_bytes(_attack(name))
    rc, out, err, peak, _ = run_measured([SEARCHGYM, "squeeze", "--headline", "--out", str(w0),
                                          "--worlds", str(w1)], timeout=BUDGET_S)
    assert rc == 2, err
    no_traceback(err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("ConfigError") and words in lines[0], err
    assert "difference" not in out
    assert not (w0 / "worlds.json").exists()
    assert peak < RSS_MB, peak


def test_squeeze_worlds_reads_the_real_runs_unchanged():
    from searchgym.experiments.squeeze.worlds import load_worlds, worlds_block

    block = worlds_block(load_worlds([W0, W1]))
    assert block["worlds"] == [0, 1] and "grpo" in block["arms"]
