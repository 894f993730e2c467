"""Moved: the squeeze experiment is :mod:`searchgym.experiments.squeeze` (this name is kept for old imports)."""

from searchgym.experiments.squeeze.experiment import *
from searchgym.experiments.squeeze.experiment import __all__  # noqa: F401
