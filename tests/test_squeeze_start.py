"""The squeeze experiment's SFT start as a unit (issue 21 §3): `--only-start` builds it reproducibly, `--ship-start`
writes package data with a manifest, a run with ``start_from="shipped"`` uses it only when its key matches, and
the shipped start in the package is intact and fits the quick preset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import require

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")



def _tiny_cfg(out, **kw):
    """The squeeze tests' tiny config (test_train_squeeze.py), one GRPO arm and no pass@k."""
    from test_train_squeeze import _tiny_cfg as tiny  # tests/ is on sys.path under pytest

    return tiny(out, **{"arms": ("grpo",), "passk_max": 0, **kw})


def _hashes(d: Path) -> dict[str, str]:
    from searchgym.experiments.squeeze.start import MODEL_FILES, _sha256

    return {n: _sha256(d / n) for n in MODEL_FILES if (d / n).exists()}


def test_only_start_is_bit_for_bit_and_ships_with_a_manifest(tmp_path, monkeypatch, one_thread):
    from searchgym.experiments.squeeze import experiment as sq
    from searchgym.experiments.squeeze import start as st

    dest = tmp_path / "pkg_start"
    monkeypatch.setattr(st, "SHIPPED_DIR", dest)
    res = [sq.run(_tiny_cfg(tmp_path / f"s{i}", only_start=True, ship_start=i == 0, gate_questions=6), log=print)
           for i in range(2)]
    assert not (tmp_path / "s0" / "arms").exists()  # stopped after the start
    h0, h1 = _hashes(tmp_path / "s0" / "sft" / "model"), _hashes(tmp_path / "s1" / "sft" / "model")
    assert "model.safetensors" in h0 and h0 == h1  # the same seed gives the same bytes
    m = st.read_manifest(dest)
    assert m["files"] == h0 and st.verify_files(dest) == []
    assert m["gate"]["questions"] == 6 and m["gate"]["samples"] == 2 and len(m["gate"]["ci"]) == 2
    assert m["key"] == res[0]["key"] and m["key"]["world_generator_version"] >= 1
    assert {"world_seed", "n_entities", "world_fingerprint", "demo_weights", "tiny", "pretrain", "sft"} <= set(m["key"])
    assert "--only-start --ship-start" in m["command"]
    s = json.loads((tmp_path / "s0" / "start.json").read_text())
    assert s["competence"]["questions"] == 6


@pytest.mark.slow  # an end-to-end squeeze run (minutes on 2 cores); `make test-slow`
def test_a_run_resumed_after_only_start_reuses_the_start_and_evaluates_it(tmp_path, one_thread):
    """`--only-start` then `--resume` with arms (how a new world is checked before its arms are paid for): the
    start is not rebuilt, the gate is not re-measured, and the start still gets its full evaluation."""
    from searchgym.experiments.squeeze import experiment as sq

    out = tmp_path / "w"
    sq.run(_tiny_cfg(out, only_start=True, gate_questions=4), log=print)
    gate = json.loads((out / "start_eval" / "gate.json").read_text())
    weights = (out / "sft" / "model" / "model.safetensors").stat().st_mtime_ns
    # the tiny start fails its gate: told to stop there, the run raises before any arm and leaves a record the
    # multi-world pooling reads as "left out: failed gate"
    from searchgym.errors import CompetenceGateError
    from searchgym.experiments.squeeze.worlds import load_worlds, worlds_block

    with pytest.raises(CompetenceGateError, match="stopped before the arms"):
        sq.run(_tiny_cfg(out, resume=True, gate_questions=4, stop_on_failed_gate=True), log=print)
    assert not (out / "arms").exists() and not (out / "summary.json").exists()
    (rec,) = load_worlds([out])
    assert rec["competence"]["passed"] is False and rec["arms"] == {}
    with pytest.warns(UserWarning, match="competence gate"):
        assert worlds_block([rec])["left_out"][0]["why"] == "its SFT start failed the competence gate"
    logs: list[str] = []
    s = sq.run(_tiny_cfg(out, resume=True, gate_questions=4), log=logs.append)
    assert not any("tiny LM: training" in x or "demonstrations (diverse" in x or "competence gate\n" in x
                   for x in logs)
    assert (out / "sft" / "model" / "model.safetensors").stat().st_mtime_ns == weights
    ev = json.loads((out / "start_eval" / "eval.json").read_text())
    assert ev["gate"] == gate and "train" in ev and s["start"]["train_success"] is not None
    assert s["competence"]["questions"] == 4 and set(s["arms"]) == {"grpo"}


@pytest.mark.slow  # an end-to-end squeeze run (minutes on 2 cores); `make test-slow`
def test_shipped_start_is_used_only_when_its_key_matches(tmp_path, monkeypatch, one_thread):
    from searchgym.experiments.squeeze import experiment as sq
    from searchgym.experiments.squeeze import start as st

    dest = tmp_path / "pkg_start"
    monkeypatch.setattr(st, "SHIPPED_DIR", dest)
    sq.run(_tiny_cfg(tmp_path / "build", only_start=True, ship_start=True, gate_questions=4), log=print)
    # a run whose world and recipe match: no pretraining or SFT of its own, the arms start from the package
    logs: list[str] = []
    s = sq.run(_tiny_cfg(tmp_path / "use", start_from="shipped", gate_questions=4), log=logs.append)
    assert not (tmp_path / "use" / "pretrain").exists() and not (tmp_path / "use" / "sft").exists()
    stages = json.loads((tmp_path / "use" / "stages.json").read_text())
    assert stages["start"]["source"] == "shipped"
    assert s["competence"]["questions"] == 4 and "manifest" in s["competence"]["source"]
    assert set(s["dose"]) >= {"grpo"} and s["dose"]["grpo"]["kl_to_start"]
    # another world size: the shipped start is not used silently
    logs = []
    sq.run(_tiny_cfg(tmp_path / "other", start_from="shipped", n_entities=48, gate_questions=4), log=logs.append)
    assert any("WARNING: not using the shipped SFT start" in x and "n_entities" in x for x in logs)
    assert (tmp_path / "other" / "sft" / "model" / "model.safetensors").exists()
    # a tampered file: not used either
    (dest / "config.json").write_text((dest / "config.json").read_text() + " ")
    assert st.shipped_start(_tiny_cfg(tmp_path / "x"), dest=dest)[0] is None


def test_presets_and_cli_flags(tmp_path):
    from typer.testing import CliRunner

    from searchgym.cli import app
    from searchgym.errors import ConfigError
    from searchgym.experiments.squeeze.config import LEARNS_RL, LONG_RL, SqueezeConfig

    q = SqueezeConfig.preset(True)
    assert q.quick and q.preset_name == "quick" and q.start_from == "shipped"
    assert SqueezeConfig.preset(name="quick").start_from == "shipped"
    d, long = SqueezeConfig.preset(), SqueezeConfig.preset(name="long")
    assert long.rl.total_steps == LONG_RL["total_steps"]
    # every preset starts the tiny LM from the shipped start (its own pipeline's, bit for bit); a real LM, or
    # --only-start (which builds a start), trains its own unless told otherwise
    assert d.start_from == long.start_from == "shipped" and not d.trains_start()
    assert SqueezeConfig.preset(model="some/model").trains_start()
    assert SqueezeConfig.preset(only_start=True).trains_start()
    assert SqueezeConfig.preset(start_from="train").trains_start()
    assert SqueezeConfig.preset(model="m", start_from="/a/start").start_from == "/a/start"
    # the gate is measured as the manifest's was, whatever the evaluation's samples per question
    from searchgym.experiments.squeeze.start import read_manifest

    assert d.gate_samples == q.gate_samples == (read_manifest() or {})["gate"]["samples"]
    assert long.rl.learning_rate == LONG_RL["learning_rate"]
    learns = SqueezeConfig.preset(name="learns")
    assert (learns.rl.total_steps, learns.rl.learning_rate) == (100, 2e-4) == tuple(LEARNS_RL.values())
    assert learns.start_from == "shipped" and learns.preset_name == "learns"
    # the quick preset starts from the default pipeline's start: world and recipe are the default's
    for k in ("n_entities", "world_seed", "demo_passes", "tiny", "pretrain", "sft", "max_turns", "top_k",
              "passage_chars"):
        assert getattr(q, k) == getattr(d, k), k
    with pytest.raises(ConfigError):
        SqueezeConfig.preset(name="huge")
    r = CliRunner().invoke(app, ["squeeze", "--quick", "--preset", "long", "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "contradicts" in r.output
    r = CliRunner().invoke(app, ["squeeze", "--ship-start", "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "--only-start" in r.output
    r = CliRunner().invoke(app, ["squeeze", "--quick", "--learning-rate", "0", "--out", str(tmp_path / "y")])
    assert r.exit_code == 2 and "learning_rate must be > 0" in r.output


def test_the_shipped_start_is_intact_and_fits_the_quick_preset():
    """The package's SFT start: files as recorded, gate passed on its Wilson lower bound over >= 128 test
    questions, and built for the quick preset's world and recipe (after a change to the world or the demonstrator
    this fails: regenerate with the manifest's command)."""
    from searchgym.experiments.squeeze.config import SqueezeConfig
    from searchgym.experiments.squeeze.start import (
        SHIPPED_DIR,
        key_diff,
        read_manifest,
        start_key,
        verify_files,
    )

    m = read_manifest()
    assert m is not None, f"no shipped start in {SHIPPED_DIR}"
    assert verify_files() == []
    g = m["gate"]
    assert g["questions"] >= 128 and g["lower_bound"] >= 0.3 and g["passed"] is True
    diff = key_diff(start_key(SqueezeConfig.preset(True)), m["key"])
    assert not diff, f"the shipped start was built for another configuration ({diff}); run `{m['command']}`"


@pytest.mark.slow
def test_the_shipped_start_regenerates_bit_for_bit(tmp_path):
    """The manifest's command, run again, gives the same bytes (tens of minutes on 2 cores; same platform and
    torch version as the build)."""
    from searchgym.experiments.squeeze import experiment as sq
    from searchgym.experiments.squeeze.config import SqueezeConfig
    from searchgym.experiments.squeeze.start import read_manifest

    m = read_manifest()
    require(m["built_with"]["torch"] == torch.__version__,
            f"built with torch {m['built_with']['torch']}, this is {torch.__version__}")
    sq.run(SqueezeConfig.preset(out=str(tmp_path / "start"), only_start=True, gate_questions=128), log=print)
    assert _hashes(tmp_path / "start" / "sft" / "model") == m["files"]
