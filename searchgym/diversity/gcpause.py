"""Pause Python's cyclic garbage collector around allocation-heavy work (reading runs, labelling, statistics).

Reading and analysing a run allocate many small objects while the run's episodes stay alive; the collector's
generation-2 passes over them cost a quarter or more of the time, and reference counting frees these objects
anyway. A collector that was enabled is re-enabled afterwards, also when the work raises.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def gc_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def with_gc_paused(fn: F) -> F:
    """Decorator form of ``gc_paused``."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with gc_paused():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
