"""pytest plugin (entry point ``pytest11: searchgym``): the ``search_env_checker`` fixture.

It loads in every pytest run of an environment where searchgym is installed, so it imports nothing heavy:
the checker (and gymnasium) load only when a test asks for the fixture.

    def test_my_variant(search_env_checker):
        env = gymnasium.make("searchgym/SearchQA-v0", reward="f1")
        search_env_checker(env, n_fuzz=100)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


@pytest.fixture
def search_env_checker() -> Callable[..., dict[str, Any]]:
    """``check_search_env(env, *, n_fuzz=200, seed=0)``: check_env + hostile fuzz + trajectory round trip."""
    from searchgym.testing.check import check_search_env

    return check_search_env
