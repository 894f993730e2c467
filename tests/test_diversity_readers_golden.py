"""Regression: every reader fixture that read before the generic tree reader reads to the same figures now
(``fixtures/diversity/readers_golden.json``, written by ``tests/readers_golden.py`` on the older tree); a file
that could not be read then may be read now, except those named below."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.readers_golden import CASES, figures

GOLDEN = json.loads((Path(__file__).parent / "fixtures" / "diversity" / "readers_golden.json").read_text("utf-8"))


@pytest.mark.parametrize(("rel", "kw"), CASES, ids=[f"{r} {sorted(k)}" for r, k in CASES])
def test_fixture_reads_to_the_same_figures(rel, kw):
    key = f"{rel} {json.dumps(kw, sort_keys=True)}"
    assert key in GOLDEN, f"{key}: no golden figures; record them with tests/readers_golden.py on the older tree"
    old, new = GOLDEN[key], json.loads(json.dumps(figures(rel, kw)))
    if "error" in old:
        return  # unreadable before: reading it now is the point of the change
    assert new == old


def test_custom_tags_still_needs_its_flag():
    # a run whose only calls are in a grammar nobody declared stays unreadable without --query-tags
    assert "error" in figures("wild/custom_tags.jsonl", {})
