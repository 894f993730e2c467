"""Independent, seeded pieces of a stage (one split's outcome table, one seed's arms) in worker processes.

Each piece is a pure function of its arguments and seeds its own random streams, so a stage's result is the same
bit for bit with one process or several (the workers run as many torch threads as the stage does in-process).
Workers are spawned, not forked: a forked torch process can deadlock on the parent's thread pools.
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def _set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


@contextmanager
def worker_pool(jobs: int, tasks: int, threads: int = 1) -> Iterator[Executor | None]:
    """``min(jobs, tasks)`` spawned worker processes with ``threads`` torch threads each, or None (run in this
    process) when that is one or fewer."""
    n = min(int(jobs), int(tasks))
    if n <= 1:
        yield None
        return
    with ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context("spawn"), initializer=_set_threads,
                             initargs=(threads,)) as pool:
        yield pool


def ordered_map(fn: Callable[[T], R], items: Iterable[T], jobs: int | Executor = 1, threads: int = 1) -> list[R]:
    """``[fn(x) for x in items]``, in ``jobs`` worker processes of ``threads`` torch threads when ``jobs`` > 1, or
    in the pool ``jobs`` when one is given (one pool for several stages spawns its workers once). ``fn`` and the
    items must pickle (a module-level function, a ``functools.partial`` of one). Put the longest items first: the
    workers take them in order."""
    xs: Sequence[Any] = list(items)
    if isinstance(jobs, Executor):
        return list(jobs.map(fn, xs))
    with worker_pool(jobs, len(xs), threads) as pool:
        if pool is None:
            return [fn(x) for x in xs]
        return list(pool.map(fn, xs))


__all__ = ["ordered_map", "worker_pool"]
