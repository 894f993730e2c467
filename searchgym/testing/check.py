"""``check_search_env``: conformance checks for any environment built on searchgym.

Use it in your own test suite on your variant (another corpus, another reward, a subclass, a wrapper)::

    from searchgym.testing import check_search_env
    report = check_search_env(gymnasium.make("searchgym/SearchQA-v0", reward="f1"))

or through the pytest fixture ``search_env_checker`` that searchgym's pytest plugin provides.
"""

from __future__ import annotations

import json
import math
import os
import random
import tempfile
import warnings
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from searchgym.trajectory import STEP_KINDS, Trajectory, TrajectoryWriter, load_trajectories

_TAGS = ("search", "answer", "tool_call", "think", "information")


def _rand_text(rng: random.Random, n: int) -> str:
    alphabet = "abc xyz<>/{}[]\":,\n\t\\\x00\x01\x1b\x7fé字😀\u200b\ud7ff"
    return "".join(rng.choice(alphabet) for _ in range(n))


def _gen_actions(rng: random.Random) -> list[Callable[[], Any]]:
    """Factories of hostile actions; each call draws one."""

    def tag(name: str, body: str, close: bool = True) -> str:
        return f"<{name}>{body}" + (f"</{name}>" if close else "")

    return [
        lambda: _rand_text(rng, rng.randint(0, 200)),
        lambda: "",
        lambda: tag(rng.choice(_TAGS), _rand_text(rng, 20), close=False),
        lambda: f"</{rng.choice(_TAGS)}>" + tag("search", "q"),
        lambda: tag("search", tag("search", "nested")) + "</search>",
        lambda: tag("search", ""),
        lambda: tag("search", "   \n\t "),
        lambda: tag("answer", ""),
        lambda: tag("search", "q" * rng.randint(2_000, 20_000)),
        lambda: "<search>" * rng.randint(1, 2000) + "x" * rng.randint(0, 5000),
        lambda: tag("think", _rand_text(rng, 50)) + tag(rng.choice(("search", "answer")), _rand_text(rng, 30)),
        lambda: tag("search", "\x00\x01\x02 control \x1b[31m chars \x7f"),
        lambda: tag("tool_call", _rand_text(rng, 40)),
        lambda: tag("tool_call", "{" * rng.randint(1, 5000)),
        lambda: tag("tool_call", "[" * 20_000 + "]" * 20_000),
        lambda: tag("tool_call", json.dumps({"name": "search", "arguments": {"query": rng.choice(
            [1, None, [], {}, ["a", 2], True, 1.5, "ok"])}})),
        lambda: tag("tool_call", json.dumps({"name": "search", "arguments": {"query_list": rng.choice(
            [[], "x", [None], [["a"]], ["a"] * 50, 3])}})),
        lambda: tag("tool_call", json.dumps({"name": "answer", "arguments": rng.choice(
            [{}, {"answer": None}, {"answer": ["a"]}, {"answer": 3}, "not json", "[1]", []])})),
        lambda: tag("tool_call", json.dumps({"name": rng.choice(["", "rm -rf", None, 3, "SEARCH"]),
                                             "arguments": {"query": "q"}})),
        lambda: tag("tool_call", json.dumps([1, 2, 3])),
        lambda: rng.choice([None, 0, 1.5, b"<search>q</search>", b"\xff\xfe", ["<search>q</search>"], object(),
                            {"name": "search"}, {"name": "search", "arguments": {"query": 7}}, ("a",)]),
        lambda: tag("search", "ok query") + tag("answer", "late"),
    ]


def _assert_step(env: gym.Env, out: Any, action: Any) -> tuple[bool, bool, dict]:
    what = repr(action)[:120]
    assert isinstance(out, tuple) and len(out) == 5, f"step({what}) must return a 5-tuple, got {type(out)}"
    obs, reward, terminated, truncated, info = out
    assert obs in env.observation_space, f"step({what}) returned an observation outside the observation space"
    assert isinstance(reward, (int, float)) and math.isfinite(float(reward)), \
        f"step({what}) returned a non-finite or non-numeric reward {reward!r}"
    assert isinstance(terminated, bool) and isinstance(truncated, bool), \
        f"step({what}) must return bool terminated/truncated"
    assert isinstance(info, dict), f"step({what}) must return a dict info"
    if "kind" in info:
        assert info["kind"] in STEP_KINDS, f"info['kind'] is {info['kind']!r}, not one of {STEP_KINDS}"
    return terminated, truncated, info


def _fuzz(env: gym.Env, n: int, seed: int, big_action: bool) -> dict[str, int]:
    rng = random.Random(seed)
    makers = _gen_actions(rng)
    counts = {"steps": 0, "episodes": 0, "invalid": 0, "search": 0, "answer": 0, "reset_needed": 0}
    env.reset(seed=seed)
    big = "<search>" + "A" * (1 << 20) + "</search>" if big_action else None
    for i in range(n):
        action = big if (big is not None and i == n // 2) else rng.choice(makers)()
        terminated, truncated, info = _assert_step(env, env.step(action), action)
        counts["steps"] += 1
        kind = info.get("kind")
        if kind in counts:
            counts[kind] += 1
        if terminated or truncated:
            counts["episodes"] += 1
            try:
                env.step("<answer> after the end </answer>")
            except gym.error.ResetNeeded:
                counts["reset_needed"] += 1
            else:
                raise AssertionError("a step after the episode ended must raise gymnasium.error.ResetNeeded")
            obs, _ = env.reset()
            assert obs in env.observation_space, "reset() returned an observation outside the observation space"
    return counts


def _scripted_episode(env: gym.Env, seed: int) -> tuple[list[dict], dict]:
    _, info = env.reset(seed=seed)
    q = str(info.get("question", "")) or "question"
    infos = []
    for action in (f"<think>look it up</think><search> {q} </search>", "not an action",
                   '<tool_call>{"name": "search", "arguments": {"query_list": ["a b", "c d"]}}</tool_call>',
                   "<answer> a guess </answer>"):
        _, _, te, tr, inf = env.step(action)
        infos.append(inf)
        if te or tr:
            break
    return infos, info


def _roundtrip(env: gym.Env, seed: int) -> Trajectory:
    infos, reset_info = _scripted_episode(env, seed)
    base = env.unwrapped
    assert hasattr(base, "trajectory"), "the unwrapped env must expose trajectory() (SearchEnv does)"
    traj = base.trajectory(agent="check", policy_step=3)
    assert traj.question_id == str(reset_info.get("question_id", traj.question_id))
    assert len(traj.steps) == len(infos), f"trajectory has {len(traj.steps)} steps, the episode had {len(infos)}"
    for s, inf in zip(traj.steps, infos):
        assert s.kind == inf["kind"] and list(s.doc_ids) == list(inf["doc_ids"]), "trajectory steps disagree with infos"
    last = infos[-1]
    if "em" in last:
        assert traj.em == last["em"] and traj.num_searches == last["num_searches"]
    fd, path = tempfile.mkstemp(suffix=".jsonl")
    os.close(fd)
    try:
        with TrajectoryWriter(path) as w:
            w.write(traj)
        back = load_trajectories(path)
    finally:
        os.unlink(path)
    assert len(back) == 1 and back[0].to_dict() == traj.to_dict(), "trajectory JSONL round trip changed the record"
    assert back[0].queries == traj.queries
    return traj


def _determinism(env: gym.Env, seed: int) -> None:
    def run() -> list[Any]:
        out: list[Any] = []
        for k in range(3):
            obs, info = env.reset(seed=seed) if k == 0 else env.reset()
            out.append((obs, info.get("question_id")))
            o, r, te, tr, inf = env.step(f"<search> {info.get('question', '')} </search>")
            out.append((o, r, te, tr, inf.get("doc_ids")))
        return out

    assert run() == run(), "reset(seed=s) followed by the same actions must reproduce questions and results"


def check_search_env(env: gym.Env, *, n_fuzz: int = 200, seed: int = 0, big_action: bool = True,
                     skip_check_env: bool = False) -> dict[str, Any]:
    """Check an environment built on searchgym; raise AssertionError naming the first problem.

    Runs Gymnasium's ``check_env``; a seeded fuzz of ``n_fuzz`` hostile actions (random text, unbalanced,
    nested and empty tags, over-long queries, a 1 MB action, NUL and control characters, malformed tool-call
    JSON, wrong argument types, non-text objects) in which every step must return a valid observation and
    a step after the end must raise ``gymnasium.error.ResetNeeded``; seeded reproducibility of questions
    and results; and the Trajectory JSONL round trip. Returns a small report.
    """
    report: dict[str, Any] = {}
    if not skip_check_env:
        from gymnasium.utils.env_checker import check_env

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # Gymnasium's render/close checks rebuild the env from env.spec, deep-copying its kwargs (a
            # corpus, a retriever object, an HTTP client...); check the same things on this env instead.
            check_env(env.unwrapped, skip_render_check=True, skip_close_check=True)
        base = env.unwrapped
        if base.render_mode is not None:
            base.reset(seed=seed)
            frame = base.render()
            assert frame is None or isinstance(frame, str), "render() must return text (ansi) or None"
        report["check_env"] = "passed"
    report["fuzz"] = _fuzz(env, n_fuzz, seed, big_action)
    _determinism(env, seed)
    report["determinism"] = "passed"
    traj = _roundtrip(env, seed)
    report["trajectory"] = {"steps": len(traj.steps), "num_searches": traj.num_searches}
    if not skip_check_env:
        env.close()
        env.close()  # closing twice must be allowed (Gymnasium's close check)
    return report
