"""The worker pool the strategy-policy and organism stages share (their bit-for-bit parity with one process is
tested in tests/test_strategy_policy.py and tests/test_squeeze_organism.py, -m slow)."""

from __future__ import annotations

import functools
import time

from searchgym.experiments.squeeze.parallel import ordered_map, worker_pool


def _threads_after(delay: float, x: int) -> tuple[int, int]:
    import torch

    time.sleep(delay * (x % 2))  # odd items finish last: the results must still come back in order
    return x * x, torch.get_num_threads()


def test_ordered_map_in_workers_or_a_given_pool_equals_the_loop():
    fn = functools.partial(_threads_after, 0.2)
    items = list(range(5))
    serial = ordered_map(fn, items, 1)
    assert [v for v, _ in serial] == [x * x for x in items]
    with worker_pool(2, len(items), threads=1) as pool:
        assert pool is not None
        in_pool = ordered_map(fn, items, pool)
        again = ordered_map(fn, items[::-1], pool)  # one pool serves several stages
    assert [v for v, _ in in_pool] == [x * x for x in items] and {t for _, t in in_pool} == {1}
    assert [v for v, _ in again] == [x * x for x in items[::-1]]


def test_one_job_or_one_task_spawns_no_pool():
    with worker_pool(1, 10) as a, worker_pool(4, 1) as b:
        assert a is None and b is None
    assert ordered_map(abs, [-1, -2], 1) == [1, 2]


def test_the_arms_pool_goes_seed_by_seed_with_the_slowest_arms_of_a_seed_first():
    from searchgym.experiments.squeeze.experiment import _seed_then_longest

    todo = [(1, "sft", 1), (2, "grpo", 1), (3, "sft_kl", 1), (4, "grpo_kl", 1), (5, "ppo", 1), (6, "sft", 2),
            (7, "grpo", 2)]
    order = [(arm, seed) for _, arm, seed in sorted(todo, key=_seed_then_longest)]
    assert order == [("sft_kl", 1), ("sft", 1), ("ppo", 1), ("grpo", 1), ("grpo_kl", 1), ("sft", 2), ("grpo", 2)]
