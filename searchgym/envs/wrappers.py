"""Wrappers: record every episode as a Trajectory JSONL line."""

from __future__ import annotations

import os
from typing import Any

import gymnasium as gym

from searchgym.trajectory import Step, Trajectory, TrajectoryWriter


def trajectory_from_infos(reset_info: dict[str, Any], transitions: list[tuple[Any, float, dict[str, Any]]],
                          *, agent: str | None = None, policy_step: int | None = None,
                          seed: int | None = None) -> Trajectory:
    """Rebuild a Trajectory from a reset info and the ``(action, reward, info)`` of each step.

    This is what :class:`RecordTrajectory` falls back to for environments that do not expose
    ``trajectory()``; SearchEnv's infos carry every field the schema needs.
    """
    steps: list[Step] = []
    for action, reward, info in transitions:
        extra: dict[str, Any] = {}
        queries = info.get("queries") or []
        if len(queries) > 1:
            extra["queries"] = list(queries)
        if info.get("titles"):
            extra["titles"] = list(info["titles"])
        if info.get("error"):
            extra["error"] = info["error"]
        raw = action if isinstance(action, str) else (
            action.to_text() if hasattr(action, "to_text") else repr(action))
        steps.append(Step(action=raw, kind=str(info.get("kind", "invalid")), query=info.get("query"),
                          doc_ids=list(info.get("doc_ids") or []), gold_hit=info.get("gold_hit"),
                          reward=float(reward), extra=extra))
    last = transitions[-1][2] if transitions else {}
    return Trajectory(
        episode_id=str(reset_info.get("episode_id", "")), question_id=str(reset_info.get("question_id", "")),
        question=str(reset_info.get("question", "")), answers=list(last.get("answers") or []),
        family=reset_info.get("family"), split=reset_info.get("split"), agent=agent, policy_step=policy_step,
        seed=seed, steps=steps, prediction=last.get("prediction"),
        reward=float(sum(r for _, r, _ in transitions)), em=int(last.get("em") or 0),
        f1=float(last.get("f1") or 0.0), num_searches=int(last.get("num_searches") or 0),
        extra={"hops": reset_info.get("hops")})


class RecordTrajectory(gym.Wrapper):
    """Write each finished episode (terminated or truncated) as one Trajectory JSONL line.

    Args:
        env: a SearchEnv, or any wrapped/derived env built on searchgym.
        path_or_writer: a file path (opened with ``mode``) or a ``TrajectoryWriter`` (left open on close).
        agent, policy_step: labels stored in every trajectory (``set_labels`` changes them mid-run).

    Each line is flushed when its episode ends; read them back with
    ``searchgym.trajectory.load_trajectories(path)``. ``wrapper.last_trajectory`` holds the latest one.
    """

    def __init__(self, env: gym.Env, path_or_writer: str | os.PathLike[str] | TrajectoryWriter, *,
                 agent: str | None = None, policy_step: int | None = None, mode: str = "w"):
        super().__init__(env)
        if isinstance(path_or_writer, TrajectoryWriter):
            self.writer, self._own = path_or_writer, False
        else:
            self.writer, self._own = TrajectoryWriter(path_or_writer, mode=mode), True
        self.agent, self.policy_step = agent, policy_step
        self.last_trajectory: Trajectory | None = None
        self._reset_info: dict[str, Any] = {}
        self._transitions: list[tuple[Any, float, dict[str, Any]]] = []
        self._seed: int | None = None

    def set_labels(self, agent: str | None = None, policy_step: int | None = None) -> None:
        self.agent, self.policy_step = agent, policy_step

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        obs, info = self.env.reset(seed=seed, options=options)
        self._reset_info, self._transitions, self._seed = dict(info), [], seed
        return obs, info

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._transitions.append((action, float(reward), info))
        if terminated or truncated:
            base = self.env.unwrapped
            if hasattr(base, "trajectory"):
                traj = base.trajectory(agent=self.agent, policy_step=self.policy_step)
            else:
                traj = trajectory_from_infos(self._reset_info, self._transitions, agent=self.agent,
                                             policy_step=self.policy_step, seed=self._seed)
            self.writer.write(traj)
            self.last_trajectory = traj
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        if self._own:
            self.writer.close()
        super().close()
