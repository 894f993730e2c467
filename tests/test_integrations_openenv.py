"""OpenEnv: ``searchgym serve-openenv`` on 127.0.0.1 played by OpenEnv's own ``GenericEnvClient``.

The server tests are ``slow``; ``make test-integrations`` runs them.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("openenv.core")
httpx = pytest.importorskip("httpx")

from openenv.core import GenericEnvClient

from searchgym.envs import SearchEnv
from searchgym.integrations.openenv import SearchAction, SearchgymOpenEnv


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture(scope="module")
def server():
    port = _free_port()
    exe = Path(sys.executable).with_name("searchgym")
    proc = subprocess.Popen([str(exe), "serve-openenv", "--port", str(port), "--split", "dev"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"serve-openenv exited: {proc.stderr.read().decode()[-2000:]}")
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("serve-openenv did not come up in 120 s")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@pytest.mark.slow  # starts the server (~15 s on a loaded 2-core machine)
def test_client_plays_an_episode_and_the_reward_matches_searchenv(server):
    ref = SearchEnv(dataset="dev", prompt_template="{question}")
    ref.reset(options={"index": 5})
    gold = ref.example.answers[0]
    with GenericEnvClient(base_url=server).sync() as env:
        r = env.reset(index=5)
        assert r.done is False and r.observation["question"] == ref.example.question
        assert ref.example.question in r.observation["text"]
        r = env.step({"kind": "search", "query": ref.example.question})
        assert r.observation["kind"] == "search" and r.observation["text"].startswith("<information>Doc 1(Title:")
        assert r.done is False and r.reward == 0.0 and r.observation["num_searches"] == 1
        r = env.step(SearchAction(kind="answer", answer=gold))
        assert r.done is True and r.reward == 1.0 and r.observation["em"] == 1
        state = env.state()
        assert state["done"] is True and state["queries"] == [ref.example.question] and state["reward"] == 1.0
        # after the end: a corrective observation, not an error
        r = env.step({"kind": "search", "query": "more"})
        assert r.observation["kind"] == "invalid" and "episode is over" in r.observation["text"]
        # a wrong answer scores 0
        env.reset(index=5)
        r = env.step({"kind": "answer", "answer": "certainly not " + gold})
        assert r.done is True and r.reward == 0.0


@pytest.mark.slow  # starts the server (~15 s on a loaded 2-core machine)
def test_bad_actions_get_corrective_observations(server):
    with GenericEnvClient(base_url=server).sync() as env:
        env.reset(index=0)
        r = env.step({"kind": "search"})
        assert r.observation["kind"] == "invalid" and "needs 'query'" in r.observation["error"]
        assert "My previous action is invalid" in r.observation["text"] and r.done is False
        r = env.step({"kind": "search", "query": 5})
        assert r.observation["kind"] == "invalid" and "must be a string" in r.observation["error"]
        r = env.step({"kind": "answer", "answer": ["a", "b"]})
        assert r.observation["kind"] == "invalid" and "must be a string" in r.observation["error"]
        with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
            env.step({"kind": "dance"})
        with pytest.raises(RuntimeError, match="must be in"):
            env.reset(index=10**6)
        r = env.reset(index=1)  # the session survives all of that
        assert r.done is False and r.observation["question"]


def test_environment_in_process_state_and_reset_by_question_id():
    env = SearchgymOpenEnv(dataset="dev")
    obs = env.reset(index=2)
    qid = obs.question_id
    obs2 = env.reset(question_id=qid)
    assert obs2.question == obs.question and env.state.question_id == qid and env.state.num_searches == 0
    out = env.step(SearchAction(kind="search", query="who founded"))
    assert out.kind == "search" and env.state.num_searches == 1 and env.state.step_count == 1


@pytest.mark.slow  # starts the server (~15 s on a loaded 2-core machine)
def test_serve_openenv_rejects_a_bad_dataset(tmp_path):
    exe = Path(sys.executable).with_name("searchgym")
    out = subprocess.run([str(exe), "serve-openenv", "--port", str(_free_port()), "--dataset",
                          str(tmp_path / "missing.jsonl")], check=False, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2 and "error" in out.stderr and "Traceback" not in out.stderr
