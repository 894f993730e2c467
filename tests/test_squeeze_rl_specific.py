"""The pre-registered rule that calls a change RL's (issue 31 §2/§3): GRPO must differ from continued SFT, from
rejection-sampling SFT and from shuffled-reward GRPO, on the same side (endpoints.rl_specific_block)."""

from __future__ import annotations

from searchgym.experiments.squeeze.endpoints import rl_specific_block, rl_specific_verdict
from searchgym.experiments.squeeze.report import rl_specific_table


def _arm(entropy: list[float], success: list[float], homonym: list[float]) -> dict:
    return {"strategy_entropy_rarefied": {"values": entropy}, "train_success": {"values": success},
            "shift": {"shift_homonym": {"values": homonym}}}


def _arms(rs_entropy: list[float]) -> dict:
    return {
        "sft": _arm([1.60, 1.62, 1.61, 1.63], [0.50, 0.52, 0.51, 0.49], [0.6, 0.62, 0.61, 0.6]),
        "grpo": _arm([1.40, 1.42, 1.41, 1.43], [0.50, 0.53, 0.50, 0.50], [0.6, 0.61, 0.62, 0.6]),
        "rs_sft": _arm(rs_entropy, [0.51, 0.52, 0.50, 0.50], [0.6, 0.6, 0.62, 0.61]),
        "grpo_shuffled": _arm([1.70, 1.72, 1.69, 1.71], [0.30, 0.32, 0.31, 0.29], [0.5, 0.52, 0.5, 0.51]),
    }


def test_a_drop_that_both_controls_lack_is_rl_s():
    rs = rl_specific_block(_arms([1.60, 1.61, 1.62, 1.60]))
    assert rs is not None and rs["controls"] == ["rs_sft", "grpo_shuffled"]
    e = rs["endpoints"]
    assert e["strategy_entropy_rarefied"]["verdict"] == "rl_specific"
    assert e["strategy_entropy_rarefied"]["vs_sft"]["diff"] < 0
    assert e["train_success"]["verdict"] == "no_change"
    assert e["shift:shift_homonym"]["verdict"] == "no_change"


def test_a_drop_rejection_sampling_sft_shares_is_not_rl_s():
    rs = rl_specific_block(_arms([1.40, 1.41, 1.42, 1.43]))  # rejection-sampling SFT squeezes as much
    assert rs is not None
    assert rs["endpoints"]["strategy_entropy_rarefied"]["verdict"] == "not_rl_specific"
    table = "\n".join(rl_specific_table({"rl_specific": rs}))
    assert "| `strategy_entropy_rarefied` | -0.200" in table and "no: a control moves as far" in table


def test_without_a_control_or_with_one_seed_there_is_no_verdict():
    arms = _arms([1.60, 1.61, 1.62, 1.60])
    del arms["grpo_shuffled"]
    assert rl_specific_block(arms) is None
    assert rl_specific_table({}) == []
    one = {"diff": -0.2, "ci": None}
    assert rl_specific_verdict({"diff": -0.2, "ci": [-0.3, -0.1]}, {"rs_sft": one}) == "unknown"


def test_a_control_on_the_other_side_is_not_rl_s():
    same = {"diff": -0.2, "ci": [-0.3, -0.1]}
    other = {"diff": 0.2, "ci": [0.1, 0.3]}
    assert rl_specific_verdict(same, {"rs_sft": same, "grpo_shuffled": same}) == "rl_specific"
    assert rl_specific_verdict(same, {"rs_sft": same, "grpo_shuffled": other}) == "not_rl_specific"


def test_the_headline_says_per_controls_run_whether_the_change_is_rl_s(tmp_path):
    import json

    import pytest

    from searchgym.errors import ConfigError
    from searchgym.experiments.squeeze.endpoints import controls_blocks
    from searchgym.experiments.squeeze.report import _controls_clause

    assert "Not yet compared" in _controls_clause({})
    run = tmp_path / "controls"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"world": {"seed": 0}, "config": {"seeds": 4}}))
    with pytest.raises(ConfigError, match="rs_sft,grpo_shuffled"):
        controls_blocks([str(run)])
    with pytest.raises(ConfigError, match="cannot read"):
        controls_blocks([str(tmp_path / "missing")])
    rs = rl_specific_block(_arms([1.40, 1.41, 1.42, 1.43]))
    (run / "summary.json").write_text(json.dumps({"world": {"seed": 0}, "config": {"seeds": 4}, "rl_specific": rs}))
    block = controls_blocks([str(run)])
    assert block["controls_random_effects"] is None  # one world: no random effects
    clause = _controls_clause(block)
    assert "on world 0 (4 seeds): strategy entropy not RL's" in clause
    assert "`shift_homonym` no change" in clause and "template entropy unknown" in clause


def _world(seed: int, rs_entropy: list[float], shift: float) -> dict:
    arms = _arms(rs_entropy)
    for a in arms.values():  # each world its own level: the random effects must difference it away
        a["strategy_entropy_rarefied"]["values"] = [x + shift for x in a["strategy_entropy_rarefied"]["values"]]
    return {"config": {"world_seed": seed, "seeds": 4}, "world": {"seed": seed}, "arms": arms,
            "rl_specific": rl_specific_block(arms)}


def test_the_controls_rule_with_worlds_as_random_effects(tmp_path):
    """Three worlds where GRPO drops strategy entropy and rejection-sampling SFT does not: RL's under random
    effects, and the headline and the docs table say so; where rejection-sampling SFT drops as far on one
    world and not on the others, the pooled interval cannot call it RL's."""
    import json

    from searchgym.experiments.squeeze.endpoints import controls_blocks, rl_specific_random_effects
    from searchgym.experiments.squeeze.report import _controls_clause, rl_specific_random_effects_table

    runs = []
    for w, shift in ((0, 0.0), (1, 0.3), (5, -0.2)):
        d = tmp_path / f"w{w}"
        d.mkdir()
        (d / "summary.json").write_text(json.dumps(_world(w, [1.60, 1.61, 1.62, 1.60], shift)))
        runs.append(str(d))
    block = controls_blocks(runs)
    re_ = block["controls_random_effects"]
    assert re_["worlds"] == [0, 1, 5] and re_["k_worlds"] == 3
    e = re_["endpoints"]["strategy_entropy_rarefied"]
    assert abs(e["vs_sft"]["diff"] + 0.2) < 1e-9 and e["vs_sft"]["k"] == 3
    assert e["verdict"] == "rl_specific"
    assert re_["endpoints"]["train_success"]["verdict"] == "no_change"
    clause = _controls_clause(block)
    assert "worlds 0, 1, 5 as random effects: strategy entropy RL's" in clause
    table = "\n".join(rl_specific_random_effects_table(block))
    assert "t on 2 df" in table and "| `strategy_entropy_rarefied` | -0.200 [" in table

    mixed = [_world(0, [1.40, 1.41, 1.42, 1.43], 0.0), _world(1, [1.60, 1.61, 1.62, 1.60], 0.0),
             _world(5, [1.62, 1.60, 1.61, 1.61], 0.0)]
    assert rl_specific_random_effects(mixed)["endpoints"]["strategy_entropy_rarefied"]["verdict"] == "not_rl_specific"
    assert rl_specific_random_effects(mixed[:1]) is None
