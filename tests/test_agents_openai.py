"""OpenAIAgent against a real OpenAI-compatible server on loopback (FastAPI + uvicorn, scripted policy).

(No ``from __future__ import annotations``: FastAPI reads the handler's ``Request`` annotation at runtime.)
"""

import socket
import threading
import time

import gymnasium as gym
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

import searchgym  # noqa: F401
from searchgym.agents.heuristics import HeuristicAgent
from searchgym.agents.openai import OpenAIAgent, close_open_tag
from searchgym.agents.rollout import rollout
from searchgym.errors import AgentUnavailableError
from searchgym.trajectory import load_trajectories


def scripted_app(*, fail_after: int | None = None, api_key: str | None = None):
    """/v1/chat/completions answering as the ``decompose`` heuristic would, given the conversation so far.

    Like real OpenAI servers it drops the stop string from the returned text. After ``fail_after``
    requests it answers 503 (a server going down mid-run).
    """
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    app = FastAPI()
    state = {"requests": 0, "max_concurrent": 0, "active": 0, "lock": threading.Lock()}
    app.state.stats = state

    @app.post("/v1/chat/completions")
    async def chat(req: Request):
        body = await req.json()
        with state["lock"]:
            state["requests"] += 1
            n_req = state["requests"]
        if api_key is not None and req.headers.get("authorization") != f"Bearer {api_key}":
            return JSONResponse({"error": {"message": "bad key"}}, status_code=401)
        if fail_after is not None and n_req > fail_after:
            return JSONResponse({"error": {"message": "overloaded"}}, status_code=503)
        msgs = [m for m in body["messages"] if m["role"] != "system"]
        agent = HeuristicAgent("decompose", seed=0)
        text = ""
        for m in msgs:
            if m["role"] == "user":
                info = {} if m is msgs[0] else {"kind": "search"}
                text = agent.act([m["content"]], [info])[0]
        for s in body.get("stop") or []:
            if s in text:
                text = text[: text.index(s)]
                break
        return {"id": f"cmpl-{n_req}", "object": "chat.completion", "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 0, "completion_tokens": len(text.split()), "total_tokens": 0}}

    return app


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, app):
        import uvicorn

        self.port = free_port()
        self.app = app
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.time() + 20
        while not self.server.started:
            if time.time() > deadline:
                raise RuntimeError("loopback server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@pytest.fixture(scope="module")
def vec():
    env = gym.make_vec("searchgym/SearchQA-v0", num_envs=8, vectorization_mode="vector_entry_point", split="dev")
    yield env
    env.close()


def test_close_open_tag():
    stop = ["</search>", "</answer>"]
    assert close_open_tag("<think>x</think> <search> q ", stop) == "<think>x</think> <search> q </search>"
    assert close_open_tag("<answer> a", stop) == "<answer> a</answer>"
    assert close_open_tag("<answer> a</answer>", stop) == "<answer> a</answer>"
    assert close_open_tag("no tags", stop) == "no tags"


def test_openai_agent_rolls_out_through_a_loopback_server(vec, monkeypatch):
    monkeypatch.setenv("SG_TEST_KEY", "sekret")
    with Server(scripted_app(api_key="sekret")) as srv, \
            OpenAIAgent(srv.url, "scripted", api_key_env="SG_TEST_KEY", concurrency=4, temperature=0.0) as agent:
        trajs = rollout(agent, vec, 10, progress=False)
        reference = rollout(HeuristicAgent("decompose"), vec, 10, progress=False)
        requests = srv.app.state.stats["requests"]
        # per-slot chat history: user prompt, assistant action, user observation, assistant action
        agent.reset()
        agent.act(["Question: Who directed The Quiet Harbour?\n"], [{}])
        info = ('\n\n<information>Doc 1(Title: "The Quiet Harbour") The Quiet Harbour was directed by Ivo '
                'Lannet.</information>\n\n')
        agent.act([info], [{"kind": "search"}])
        msgs = agent.messages(0)
    assert len(trajs) == 10
    # the remote policy plays exactly like the local one (the closing tag the server dropped is restored)
    by_q = {t.question_id: t for t in reference}
    for t in trajs:
        ref = by_q[t.question_id]
        assert [s.action for s in t.steps] == [s.action for s in ref.steps]
        assert t.em == ref.em
    assert sum(t.em for t in trajs) >= 6
    assert requests == sum(len(t.steps) for t in trajs)
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant"]
    assert msgs[1]["content"].endswith("</search>") and msgs[3]["content"].endswith("<answer> Ivo Lannet </answer>")


def test_wrong_key_is_a_clear_error_without_retries(vec):
    with Server(scripted_app(api_key="right")) as srv, \
            OpenAIAgent(srv.url, "scripted", api_key_env="SG_TEST_NO_SUCH_VAR", max_retries=3) as agent:
        with pytest.raises(AgentUnavailableError, match="HTTP 401"):
            agent.act(["Question: Who founded Kelto Works?\n"], [{}])
        assert agent.retries == 0


def test_dead_server_bounded_retries_clear_error():
    port = free_port()  # nothing listens here
    agent = OpenAIAgent(f"http://127.0.0.1:{port}", "m", max_retries=2, timeout=2, backoff=0.01)
    t0 = time.perf_counter()
    with pytest.raises(AgentUnavailableError, match=r"unavailable after 3 attempts") as ei:
        agent.act(["Question: Who founded Kelto Works?\n"], [{}])
    assert time.perf_counter() - t0 < 30
    assert "127.0.0.1" in str(ei.value) and agent.requests == 3
    agent.close()


def test_server_dying_mid_run_keeps_finished_episodes(vec, tmp_path):
    out = tmp_path / "partial.jsonl"
    with Server(scripted_app(fail_after=25)) as srv, \
            OpenAIAgent(srv.url, "scripted", max_retries=1, backoff=0.01, concurrency=2) as agent, \
            pytest.raises(AgentUnavailableError, match="HTTP 503"):
        rollout(agent, vec, 40, out=out, progress=False)
    done = load_trajectories(out)  # a valid JSONL of the episodes finished before the server went down
    assert 1 <= len(done) < 40
    assert all(t.steps[-1].kind == "answer" for t in done)
