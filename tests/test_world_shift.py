"""The shift_strategy split and the squeeze preset: a world where collapsing onto the train-best strategy costs."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from helpers import load_script
from typer.testing import CliRunner

from searchgym.agents.heuristics import STRATEGIES
from searchgym.data import World, default_world
from searchgym.envs.presets import PRESETS, get_preset
from searchgym.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
V1_PINNED = "a684b0768c8dc6cb00b550162b0ccf27873ccb8d38abf5da1b74d0907837b170"  # generator version 1


def test_version1_passages_and_splits_are_byte_identical():
    """v2 only appends: the v1 fingerprint over everything but the alias passages and shift_strategy holds."""
    w = World.generate(seed=0, n_entities=100)
    n_alias = len(w.aliases)
    assert n_alias > 0
    h = hashlib.sha256()
    for p in w.passages[: len(w.passages) - n_alias]:
        h.update(f"{p.id}\t{p.title}\t{p.text}\n".encode())
    for q in w.questions:
        if q.metadata["split"] != "shift_strategy":
            h.update(f"{q.id}\t{q.question}\t{q.answers}\t{q.supporting_ids}\t{sorted(q.metadata.items())}\n"
                     .encode())
    assert h.hexdigest() == V1_PINNED
    # the alias passages are the last ones, one per alias, and name their entity
    for p, (alias, name) in zip(w.passages[-n_alias:], w.aliases.items()):
        assert p.title == alias[:1].upper() + alias[1:] and name in p.text and alias in p.text.replace("The ", "the ")


def test_shift_strategy_split_of_the_default_world():
    w = default_world()
    qs = w.split("shift_strategy")
    assert len(qs) >= 200
    train_formats = {q.metadata["answer_type"] for q in w.split("train")}
    for q in qs:
        m = q.metadata
        name, alias = m["subject"][0], m["alias"]
        assert w.aliases[alias] == name
        assert alias in q.question and name not in q.question  # asked by nickname only
        assert m["family"] == "attribute" and m["style"] in ("s0", "s1", "s2")
        assert m["answer_type"] in train_formats
        alias_p, fact_p = (w.passage(pid) for pid in q.supporting_ids)
        assert name in alias_p.text and q.answers[0] in fact_p.text
    assert len({q.question for q in qs}) == len(qs)


def test_preset_lookup():
    assert get_preset("squeeze") == PRESETS["squeeze"]
    get_preset("squeeze")["top_k"] = 99
    assert PRESETS["squeeze"]["top_k"] != 99  # a copy
    with pytest.raises(ConfigError, match="squeeze"):
        get_preset("nope")


def _check_properties(em_train: dict[str, float], em_shift: dict[str, float]) -> None:
    best = max(em_train, key=em_train.__getitem__)
    near = [s for s in em_train if em_train[s] >= em_train[best] - 0.05]
    assert len(near) >= 2, em_train  # the policy has a choice on train
    assert max(em_shift.values()) - em_shift[best] >= 0.3, (best, em_shift)  # and the train-best loses on shift
    for s in near:  # whichever of the near-best ones it collapses onto
        assert max(em_shift.values()) - em_shift[s] >= 0.3, (s, em_shift)


def test_squeeze_preset_properties_on_a_sample_of_the_embedded_world():
    mod = load_script("strategy_table")
    em_train = {s: mod.cell(s, "train", 600, "squeeze")[0] for s in STRATEGIES}
    em_shift = {s: mod.cell(s, "shift_strategy", 240, "squeeze")[0] for s in STRATEGIES}
    _check_properties(em_train, em_shift)


@pytest.mark.slow
def test_squeeze_preset_properties_on_the_whole_embedded_world():
    mod = load_script("strategy_table")
    res = mod.table(list(STRATEGIES), ["train", "shift_strategy"], None, "squeeze")
    assert res["decompose"]["train"][1] == len(default_world().split("train"))
    _check_properties({s: r["train"][0] for s, r in res.items()}, {s: r["shift_strategy"][0] for s, r in res.items()})


def test_cli_preset_reproduces_a_table_cell(tmp_path):
    from searchgym.cli import app

    mod = load_script("strategy_table")
    em, n = mod.cell("entity", "shift_strategy", 120, "squeeze")
    out = tmp_path / "s.json"
    res = CliRunner().invoke(app, ["rollout", "--agent", "entity", "--preset", "squeeze", "--split", "shift_strategy",
                                   "-n", "120", "--no-progress", "--summary-json", str(out)],
                             catch_exceptions=False, env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    summary = json.loads(out.read_text())["summary"]["all"]
    assert summary["episodes"] == n == 120
    assert summary["em"] == pytest.approx(em, abs=0)
    assert em > 0.8
    bad = CliRunner().invoke(app, ["rollout", "--agent", "entity", "--preset", "nope", "-n", "2", "--no-progress"],
                             env={"COLUMNS": "200"})
    assert bad.exit_code != 0 and "unknown preset" in bad.output


def test_entity_looks_up_nicknames_only():
    """On named subjects entity is still one search; on nicknames it resolves the name and searches again."""
    from searchgym.agents.heuristics import HeuristicAgent
    from searchgym.agents.rollout import rollout

    kw = get_preset("squeeze")
    named = rollout(HeuristicAgent("entity"), "searchgym/SearchQA-v0", 60, split="train", env_kwargs=kw,
                    progress=False)
    assert all(t.num_searches == 1 for t in named)
    nick = rollout(HeuristicAgent("entity"), "searchgym/SearchQA-v0", 60, split="shift_strategy", env_kwargs=kw,
                   progress=False)
    two = [t for t in nick if t.num_searches == 2]
    assert len(two) >= 50
    for t in two:
        first, second = (s.query for s in t.steps[:2])
        alias = next(a for a in default_world().aliases if a in t.question)
        assert alias in first and default_world().aliases[alias] in second
