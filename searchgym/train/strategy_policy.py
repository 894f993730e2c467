"""Moved: the strategy policy is :mod:`searchgym.experiments.squeeze.strategy_policy` (kept for old imports)."""

from searchgym.experiments.squeeze.strategy_policy import *
from searchgym.experiments.squeeze.strategy_policy import __all__  # noqa: F401
