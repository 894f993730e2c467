"""Issue 35 §8: `squeeze --help` lists every arm (it used to cut the list at `grp…`), and `--arms all` runs them."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner


@pytest.mark.parametrize("columns", ["60", "100"])
def test_help_lists_every_arm_uncut(columns):
    from searchgym.cli import app
    from searchgym.experiments.squeeze.config import ARM_LABELS

    res = CliRunner().invoke(app, ["squeeze", "--help"], env={"COLUMNS": columns, "TERM": "dumb"})
    assert res.exit_code == 0, res.output
    words = set(re.findall(r"[a-z_]+", res.output))
    assert set(ARM_LABELS) <= words, sorted(set(ARM_LABELS) - words)
    assert "…" not in res.output.split("--arms", 1)[1].split("--steps", 1)[0]


def test_arms_all_means_every_lm_arm():
    from searchgym.experiments.squeeze.commands import _arms
    from searchgym.experiments.squeeze.config import ARM_LABELS

    assert _arms("all") == tuple(ARM_LABELS)
    assert {"sft_kl", "rs_sft", "grpo_shuffled", "grpo_positive"} <= set(_arms("all"))
    assert _arms("sft, grpo") == ("sft", "grpo")
