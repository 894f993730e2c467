"""Testing helpers for environments built on searchgym: ``check_search_env`` and a pytest fixture.

``check_search_env`` loads on first use, so this package stays light.
"""

from __future__ import annotations

from typing import Any


def check_search_env(env: Any, *, n_fuzz: int = 200, seed: int = 0, big_action: bool = True,
                     skip_check_env: bool = False) -> dict[str, Any]:
    """See :func:`searchgym.testing.check.check_search_env`."""
    from searchgym.testing.check import check_search_env as _check

    return _check(env, n_fuzz=n_fuzz, seed=seed, big_action=big_action, skip_check_env=skip_check_env)


__all__ = ["check_search_env"]
