"""Fixtures shared by several test modules."""

from __future__ import annotations

import pytest


@pytest.fixture
def one_thread():
    """Restore torch's intra-op thread count after a test that sets it (squeeze runs set 1 or 2)."""
    torch = pytest.importorskip("torch")
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)
