"""RecordTrajectory: one JSONL line per episode, read back by searchgym.trajectory."""

from __future__ import annotations

import gymnasium as gym

from searchgym.envs import RecordTrajectory, SearchAction
from searchgym.envs.wrappers import trajectory_from_infos
from searchgym.trajectory import TrajectoryWriter, load_trajectories


def _episode(env, seed, answer_gold):
    _, info = env.reset(seed=seed)
    env.step(f"<think>first</think><search> {info['question']} </search>")
    env.step("bad action")
    env.step(SearchAction(queries=["one thing", "another thing"]))
    ex = env.unwrapped.example
    return env.step(f"<answer> {ex.answers[0] if answer_gold else 'nope'} </answer>")


def test_record_trajectory_writes_and_reads_back(tmp_path):
    path = tmp_path / "runs" / "traj.jsonl"
    env = RecordTrajectory(gym.make("searchgym/SearchQA-v0", invalid_penalty=0.5), path, agent="scripted",
                           policy_step=7)
    infos = [_episode(env, 0, True)[4], _episode(env, 1, False)[4]]
    env.reset(seed=2)
    for _ in range(5):  # a truncated episode is recorded too
        *_, trunc, _ = env.step("<search> again </search>")
    assert trunc
    env.close()
    trajs = load_trajectories(path)
    assert len(trajs) == 3
    t0, t1, t2 = trajs
    assert (t0.agent, t0.policy_step, t0.em, t0.reward) == ("scripted", 7, 1, 1.0 - 0.5)
    assert [s.kind for s in t0.steps] == ["search", "invalid", "search", "answer"]
    assert t0.steps[0].action.startswith("<think>first</think>")
    assert t0.queries[1:] == ["one thing", "another thing"]
    assert t0.num_searches == 2 and t0.prediction == infos[0]["prediction"]
    assert t0.steps[0].gold_hit is not None and t0.steps[0].doc_ids
    assert (t1.em, t1.f1, t1.prediction) == (0, 0.0, "nope")
    assert t2.prediction is None and t2.num_searches == 4 and t2.steps[-1].kind == "invalid"
    assert t0.family and t0.split == "train" and t0.answers


def test_trajectory_from_infos_matches_env_record(tmp_path):
    env = gym.make("searchgym/SearchQA-v0")
    _obs, reset_info = env.reset(seed=3)
    transitions = []
    for action in ("<search> capital </search>", "???", "<answer> x </answer>"):
        _, r, _, _, info = env.step(action)
        transitions.append((action, r, info))
    rebuilt = trajectory_from_infos(reset_info, transitions, seed=3).to_dict()
    direct = env.unwrapped.trajectory().to_dict()
    for key in ("episode_id", "question_id", "question", "answers", "family", "split", "prediction", "reward",
                "em", "f1", "num_searches", "seed"):
        assert rebuilt[key] == direct[key], key
    assert [s["doc_ids"] for s in rebuilt["steps"]] == [s["doc_ids"] for s in direct["steps"]]


def test_shared_writer_is_left_open(tmp_path):
    path = tmp_path / "t.jsonl"
    with TrajectoryWriter(path) as w:
        env = RecordTrajectory(gym.make("searchgym/SearchQA-v0"), w)
        _episode(env, 0, True)
        env.close()
        _episode(RecordTrajectory(gym.make("searchgym/SearchQA-v0"), w), 1, True)
    assert len(load_trajectories(path)) == 2
