"""Issue 35 §3: the squeeze run's stage counter runs in order ([1/N], [2/N], ... never twice, never back) and a
stage is never silent for more than the heartbeat's interval."""

from __future__ import annotations

import re
import time

from searchgym.experiments.squeeze.progress import STAGE, Progress, planned_stages

STAGE_RE = re.compile(r"^\[(\d+)/(\d+)\] ")


def assert_monotone_stages(lines: list[str]) -> list[tuple[int, int]]:
    """The [i/N] lines of a run's log: i goes 1, 2, 3, ... by one, N never below i and the last one is N."""
    seen = [(int(m.group(1)), int(m.group(2))) for x in lines if (m := STAGE_RE.match(x))]
    assert seen, lines
    assert [i for i, _ in seen] == list(range(1, len(seen) + 1)), seen
    assert all(i <= n for i, n in seen) and seen[-1][0] == seen[-1][1], seen
    return seen


def test_stage_lines_are_numbered_in_order_and_other_lines_pass_through():
    out: list[str] = []
    with Progress(out.append, total=3, every=0) as p:
        p(f"{STAGE}world: 40 entities")
        p("      detail")
        p.stage("SFT start")
        p(f"{STAGE}report")
    assert out == ["[1/3] world: 40 entities", "      detail", "[2/3] SFT start", "[3/3] report"]
    assert_monotone_stages(out)


def test_an_unplanned_stage_raises_the_total_never_the_count_back():
    out: list[str] = []
    with Progress(out.append, total=1, every=0) as p:
        p.stage("a")
        p.stage("b")
    assert out == ["[1/1] a", "[2/2] b"]


def test_a_quiet_stage_gets_a_heartbeat_line():
    out: list[str] = []
    with Progress(out.append, total=1, every=0.2) as p:
        p.stage("strategy policy: 9 arms")
        time.sleep(0.7)
    beats = [x for x in out if x.strip().startswith("...")]
    assert beats and all("strategy policy" in x for x in beats), out


def test_the_quick_preset_plans_its_stages():
    from searchgym.experiments.squeeze.config import SqueezeConfig

    quick = SqueezeConfig.preset(True, out="x", jobs=2)
    # strategy policy, organism, world, shipped start, gate, arms (with the start's evaluation), report
    assert planned_stages(quick) == 7
    one = SqueezeConfig.preset(True, out="x", jobs=1)
    assert planned_stages(one) == 8  # the start's evaluation is its own stage in one process
    assert planned_stages(SqueezeConfig.preset(True, out="x", only_start=True)) == 4  # world, start x2, gate
