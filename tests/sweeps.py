"""Attack sweeps that keep one case in the fast suite.

A sweep of many hostile inputs through one code path costs a CLI start or an index build per case. ``make test``
runs the first case (the behaviour stays covered on every run); the others are ``slow``, and ``.ci/run`` runs them
(``make test-slow`` too)."""

from __future__ import annotations

from typing import Any

import pytest


def first_fast(cases: list[Any], ids: list[str] | None = None) -> list[Any]:
    """``cases`` for ``pytest.mark.parametrize``: the first as it is, the rest marked ``slow``."""
    out = []
    for i, case in enumerate(cases):
        values = case if isinstance(case, tuple) else (case,)
        marks = () if i == 0 else (pytest.mark.slow,)
        out.append(pytest.param(*values, marks=marks, id=ids[i] if ids else None))
    return out
