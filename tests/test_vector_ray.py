"""RayVectorEnv on a real local Ray (one module-scoped session): same API and results as SearchVectorEnv."""

from __future__ import annotations

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from searchgym.envs import RayVectorEnv, SearchVectorEnv


@pytest.fixture(scope="module")
def ray_session():
    started = not ray.is_initialized()
    if started:
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    if started:
        ray.shutdown()


def _actions(n, t):
    return ["<search> capital city </search>" if (i + t) % 3 == 0 else
            "<answer> x </answer>" if (i + t) % 3 == 1 else "nonsense" for i in range(n)]


def test_ray_vector_env_matches_the_local_batched_env(ray_session):
    n = 5
    rvec = RayVectorEnv(n, num_workers=2, max_turns=2)
    lvec = SearchVectorEnv(n, max_turns=2)
    try:
        assert rvec.metadata["autoreset_mode"] == lvec.metadata["autoreset_mode"]
        ro, ri = rvec.reset(seed=3)
        lo, li = lvec.reset(seed=3)
        assert ro == lo and list(ri["question_id"]) == list(li["question_id"])
        for t in range(7):
            acts = _actions(n, t)
            r, l_ = rvec.step(acts), lvec.step(acts)
            assert r[0] == l_[0]
            for a, b in zip(r[1:4], l_[1:4]):
                np.testing.assert_array_equal(a, b)
            assert set(r[4]) == set(l_[4])
            for key in ("kind", "doc_ids", "em"):
                if key in l_[4]:
                    assert list(map(str, r[4][key])) == list(map(str, l_[4][key]))
        rt, lt = rvec.pop_finished_trajectories(), lvec.pop_finished_trajectories()
        assert len(rt) == len(lt) > 0
        assert sorted(t.question_id for t in rt) == sorted(t.question_id for t in lt)
        assert rvec.get_attr("top_k") == (3,) * n
    finally:
        rvec.close()
    assert ray.is_initialized()  # a session this env did not start stays up


def test_ray_vector_env_bad_arguments(ray_session):
    from searchgym.errors import ConfigError

    with pytest.raises(ConfigError):
        RayVectorEnv(2, num_workers=3)
    with pytest.raises(ConfigError, match="top_k"):
        RayVectorEnv(2, num_workers=1, top_k=0)


def test_ray_vector_env_caps_unpopped_trajectories_in_bytes(ray_session):
    from searchgym.envs.vector import trajectory_nbytes

    cap = 200_000
    rvec = RayVectorEnv(4, num_workers=2, max_turns=1, max_finished_bytes=cap)
    try:
        rvec.reset(seed=0)
        action = "t" * 30_000 + "<answer> a </answer>"
        for _ in range(10):
            rvec.step([action] * 4)  # every other step ends 4 episodes: 20 in all, ~32 kB each
        trajs = rvec.pop_finished_trajectories()
        assert trajs and sum(trajectory_nbytes(t) for t in trajs) <= cap
        assert rvec.dropped_trajectories > 0 and len(trajs) + rvec.dropped_trajectories == 20
    finally:
        rvec.close()
