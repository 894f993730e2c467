"""Every world split and every heuristic agent is reachable from ``searchgym rollout``, and named in its help and
its errors; no help text cuts a list with an ellipsis (issue 35)."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from searchgym.agents.heuristics import STRATEGIES
from searchgym.agents.registry import HEURISTIC_NAMES
from searchgym.cli import app
from searchgym.data.world.schema import SPLITS_V3
from searchgym.envs.sources import WORLD_SPLITS


def _invoke(*args, env=None):
    return CliRunner().invoke(app, [*map(str, args)], env=env)


def test_the_cli_names_every_split_and_every_strategy():
    assert set(WORLD_SPLITS) == set(SPLITS_V3)
    assert set(HEURISTIC_NAMES) == {*STRATEGIES, "diverse"}
    out = " ".join(_invoke("rollout", "--help", env={"TERMINAL_WIDTH": "300"}).output.split())
    for name in (*WORLD_SPLITS, *HEURISTIC_NAMES):
        assert re.search(rf"\b{name}\b", out), name
    err = _invoke("rollout", "--agent", "hopz", "-n", "1", "--no-progress")
    assert err.exit_code != 0
    for name in HEURISTIC_NAMES:
        assert name in err.output, name


@pytest.mark.parametrize("split", ["shift_renamed", "shift_homonym"])
def test_version_3_splits_roll_out(split):
    r = _invoke("rollout", "--agent", "hops", "--split", split, "-n", 4, "--preset", "squeeze2", "--no-progress")
    assert r.exit_code == 0, r.output
    assert f"({split}): 4 episodes" in " ".join(r.output.split())


def test_the_world_version_follows_the_split():
    import gymnasium as gym

    env = gym.make("searchgym/SearchQA-v0", split="shift_homonym")
    _obs, info = env.reset(seed=0)
    assert info["split"] == "shift_homonym"
    from searchgym.errors import ConfigError

    with pytest.raises(ConfigError, match="world_version"):
        gym.make("searchgym/SearchQA-v0", split="shift_homonym", world_version=2)
    with pytest.raises(ConfigError, match="world_version must be one of"):
        gym.make("searchgym/SearchQA-v0", world_version=7)


def _walk(cmd, path=()):
    yield path
    for name, sub in sorted((getattr(cmd, "commands", None) or {}).items()):
        yield from _walk(sub, (*path, name))


def test_no_help_cuts_a_word_at_80_columns():
    assert re.search(r"\w…\s*│?\s*$", "│ sft,grpo,grp… │")  # what rich printed before
    for path in _walk(typer.main.get_command(app)):
        out = _invoke(*path, "--help", env={"TERMINAL_WIDTH": "80"}).output
        cut = [ln for ln in out.splitlines() if re.search(r"\w…\s*│?\s*$", ln)]  # a word cut at the border
        assert not cut, (path, cut)
