"""OpenEnv: typed Action / Observation / State over ``SearchEnv``, and the app ``serve-openenv`` serves.

Serve it with ``searchgym serve-openenv`` (127.0.0.1:8000 by default) and play it from any OpenEnv client::

    from openenv.core import GenericEnvClient
    with GenericEnvClient(base_url="http://127.0.0.1:8000").sync() as env:
        r = env.reset(index=0)                       # r.observation["question"], ["text"] (the prompt)
        r = env.step({"kind": "search", "query": "capital of Kaitrland"})
        r = env.step({"kind": "answer", "answer": "Zeazemoor"})
        r.reward, r.done                             # exact match, True

Each WebSocket session gets its own env; all of them share one retriever. An action with a missing or
wrong-typed field gets the env's corrective observation (``observation["error"]`` says what was wrong).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import time
from typing import Any, Literal

from pydantic import Field, model_validator

from searchgym.errors import ConfigError
from searchgym.integrations._common import build_env, require, tool_step

require("openenv")

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State


class SearchAction(Action):
    """``kind="search"`` with a ``query``, or ``kind="answer"`` with an ``answer`` (ends the episode)."""

    kind: Literal["search", "answer"] = Field(description="'search' or 'answer'")
    query: str | None = Field(default=None, description="The search query (kind='search')")
    answer: str | None = Field(default=None, description="The final answer (kind='answer')")

    @model_validator(mode="before")
    @classmethod
    def _keep_wrong_types(cls, data: Any) -> Any:
        """A non-string ``query``/``answer`` is kept aside so the env answers it with a corrective observation
        (as it does for a malformed tool call) instead of OpenEnv rejecting the message."""
        if isinstance(data, dict):
            bad = {k: data[k] for k in ("query", "answer") if data.get(k) is not None and not isinstance(data[k], str)}
            if bad:
                data = {**data, **dict.fromkeys(bad)}
                data["metadata"] = {**(data.get("metadata") or {}), "invalid_arguments": bad}
        return data


class SearchObservation(Observation):
    """What the agent sees: the prompt after reset, passages after a search, a corrective message after an
    invalid action; ``question`` is the current question. ``reward`` and ``done`` come from the env."""

    text: str = Field(default="", description="Prompt, <information> passages, or a corrective message")
    question: str = Field(default="", description="The current question")
    question_id: str = Field(default="", description="Id of the current question")
    kind: str = Field(default="reset", description="reset | search | answer | invalid")
    error: str | None = Field(default=None, description="What was wrong with an invalid action")
    num_searches: int = Field(default=0, description="Searches so far in this episode")
    em: int | None = Field(default=None, description="Exact match of the answer (at the end)")


class SearchState(State):
    """The episode: its question, the searches so far, and whether it ended."""

    question_id: str | None = None
    question: str | None = None
    num_searches: int = 0
    queries: list[str] = Field(default_factory=list)
    done: bool = False
    reward: float = 0.0


class SearchgymOpenEnv(Environment[SearchAction, SearchObservation, SearchState]):
    """An OpenEnv ``Environment`` stepping a searchgym ``SearchEnv`` (arguments as ``SearchEnv``)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, corpus: Any = None, dataset: Any = None, *, split: str | None = None, **env_kwargs: Any):
        super().__init__()
        self.env = build_env(corpus, dataset, split=split, **env_kwargs)

    def reset(self, seed: int | None = None, episode_id: str | None = None, index: int | None = None,
              question_id: str | None = None, **kwargs: Any) -> SearchObservation:
        """A new episode: question ``index`` or ``question_id``, else the next one (``seed`` reshuffles)."""
        options: dict[str, Any] | None = None
        if index is not None:
            if isinstance(index, bool) or not isinstance(index, int):
                raise ConfigError(f"index must be an integer, got {index!r}")
            options = {"index": index}
        elif question_id is not None:
            options = {"question_id": str(question_id)}
        obs, info = self.env.reset(seed=seed, options=options)
        self._episode_id = episode_id or info["episode_id"]
        return SearchObservation(text=obs, question=info["question"], question_id=info["question_id"],
                                 kind="reset", done=False, reward=None)

    def step(self, action: SearchAction, timeout_s: float | None = None, **kwargs: Any) -> SearchObservation:
        env = self.env
        field = "query" if action.kind == "search" else "answer"
        raw = (action.metadata.get("invalid_arguments") or {}).get(field, getattr(action, field))
        args = {} if raw is None else {field: raw}
        text, info = tool_step(env, action.kind, args)
        ex = env.example
        question = ex.question if ex is not None else ""
        qid = str(ex.id) if ex is not None else ""
        if info is None:  # no episode, or it already ended
            return SearchObservation(text=text, question=question, question_id=qid, kind="invalid",
                                     error=text, done=env.done, reward=0.0)
        traj = env.trajectory()
        done = env.done
        return SearchObservation(
            text=text, question=question, question_id=qid, kind=info["kind"], error=info.get("error"),
            num_searches=info["num_searches"], em=info.get("em") if done else None, done=done,
            reward=float(traj.reward) if done else 0.0)

    @property
    def state(self) -> SearchState:
        env = self.env
        if env.example is None:
            return SearchState()
        traj = env.trajectory()
        return SearchState(episode_id=getattr(self, "_episode_id", traj.episode_id), step_count=len(traj.steps),
                           question_id=traj.question_id, question=traj.question, num_searches=traj.num_searches,
                           queries=traj.queries, done=env.done, reward=float(traj.reward))


def create_app(corpus: Any = None, dataset: Any = None, *, split: str | None = None, max_concurrent_envs: int = 64,
               guards: SessionGuards | None = None, **env_kwargs: Any) -> Any:
    """The ASGI app serving :class:`SearchgymOpenEnv`: OpenEnv's FastAPI app
    (``openenv.core.env_server.create_fastapi_app``) behind :class:`SessionGuardMiddleware`, which caps the
    WebSocket sessions at ``max_concurrent_envs`` and reaps idle ones (``guards``)."""
    from openenv.core.env_server.http_server import create_fastapi_app

    factory = functools.partial(SearchgymOpenEnv, corpus, dataset, split=split, **env_kwargs)
    factory().env.close()  # build the index now (and fail here on bad arguments), not in the first session
    guards = dataclasses.replace(guards or SessionGuards(), max_sessions=max_concurrent_envs)
    web = create_fastapi_app(factory, SearchAction, SearchObservation, max_concurrent_envs=max_concurrent_envs)
    return SessionGuardMiddleware(web, guards)


@dataclasses.dataclass(frozen=True)
class SessionGuards:
    """Bounds on what OpenEnv clients can hold.

    ``max_sessions``: WebSocket sessions at once (each holds an env). A new one arriving at the cap takes the
    place of the longest-idle session if that one has been idle for ``evict_idle_s`` (waiting up to
    ``admit_wait_s`` for one to become so); otherwise it is refused with close code 1013 and a reason.
    ``idle_s``: a session that sends nothing for this long is closed (code 1001). ``max_message_bytes``: a
    larger WebSocket message closes the connection (1009). ``max_body_bytes``: a larger HTTP body gets 413.
    The HTTP side (header size and time limits, keep-alive, connection count) is bounded by
    :class:`searchgym.retrieval.server.ServerGuards`, as for ``searchgym serve``."""

    max_sessions: int = 64
    idle_s: float = 300.0
    evict_idle_s: float = 5.0
    admit_wait_s: float = 10.0
    max_message_bytes: int = 4 * 1024 * 1024
    max_body_bytes: int = 4 * 1024 * 1024

    def __post_init__(self) -> None:
        bad = {k: v for k, v in dataclasses.asdict(self).items() if not (isinstance(v, (int, float)) and v > 0)}
        if bad:
            raise ConfigError(f"session guards must be positive numbers, got {bad}")


class _Session:
    __slots__ = ("closed", "done", "evict", "last")

    def __init__(self) -> None:
        self.last = time.monotonic()
        self.evict = asyncio.Event()
        self.done = asyncio.Event()
        self.closed = False


class SessionGuardMiddleware:
    """ASGI middleware in front of OpenEnv's app: the WebSocket session cap, idle reaping and eviction, and the
    HTTP body limit (see :class:`SessionGuards`). OpenEnv itself refuses sessions over its cap but never frees
    one: 64 clients that connect and go quiet used to lock every later client out."""

    def __init__(self, app: Any, guards: SessionGuards | None = None) -> None:
        self.app = app
        self.guards = guards or SessionGuards()
        self.sessions: set[_Session] = set()

    def __getattr__(self, name: str) -> Any:  # routes, state, ... of the wrapped FastAPI app
        return getattr(self.app, name)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
        elif scope["type"] == "http" and scope.get("method") in ("POST", "PUT", "PATCH"):
            await self._http(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    # -- HTTP: bounded bodies --------------------------------------------------------------------------
    async def _http(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        length = None
        for name, value in scope["headers"]:
            if name == b"content-length":
                length = value
        limit = self.guards.max_body_bytes
        if length is None or not length.isdigit():
            chunked = any(n == b"transfer-encoding" for n, _ in scope["headers"])
            if chunked:
                await _json_response(send, 411, "send the request body with a Content-Length header")
                return
        elif int(length) > limit:
            await _json_response(send, 413, f"request body of {int(length):,} bytes; the limit is {limit:,}")
            return
        await self.app(scope, receive, send)

    # -- WebSocket: the session cap, idle reaping ------------------------------------------------------
    def _longest_idle(self) -> _Session | None:
        live = [s for s in self.sessions if not s.evict.is_set()]
        return min(live, key=lambda s: s.last) if live else None

    async def _make_room(self) -> bool:
        """At the cap: close the longest-idle session once it has been idle ``evict_idle_s``; False when every
        session stayed active for ``admit_wait_s``."""
        g = self.guards
        deadline = time.monotonic() + g.admit_wait_s
        while len(self.sessions) >= g.max_sessions:
            victim = self._longest_idle()
            now = time.monotonic()
            if victim is not None and now - victim.last >= g.evict_idle_s:
                victim.evict.set()
                self.sessions.discard(victim)  # its place is taken now; its env is freed when it has closed
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(victim.done.wait(), 10)
                continue
            wait = g.evict_idle_s - (now - victim.last) if victim is not None else 0.05
            if now + wait > deadline:
                return False
            await asyncio.sleep(max(0.01, wait))
        return True

    async def _websocket(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        g = self.guards
        if len(self.sessions) >= g.max_sessions and not await self._make_room():
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": 1013,
                        "reason": f"all {g.max_sessions} sessions are active; retry later"})
            return
        session = _Session()
        self.sessions.add(session)

        async def guarded_receive() -> dict[str, Any]:
            while True:
                left = g.idle_s - (time.monotonic() - session.last)
                message = asyncio.ensure_future(receive())
                evicted = asyncio.ensure_future(session.evict.wait())
                done, _ = await asyncio.wait({message, evicted}, timeout=max(0.0, left),
                                             return_when=asyncio.FIRST_COMPLETED)
                if message in done:
                    evicted.cancel()
                    msg: dict[str, Any] = message.result()
                    session.last = time.monotonic()
                    size = len(msg.get("text") or "") + len(msg.get("bytes") or b"")
                    if size > g.max_message_bytes:
                        await close(1009, f"message over the {g.max_message_bytes:,}-byte limit")
                        return {"type": "websocket.disconnect", "code": 1009}
                    return msg
                message.cancel()
                evicted.cancel()
                if not session.evict.is_set() and time.monotonic() - session.last < g.idle_s:
                    continue
                reason = ("closed to make room for a new session" if session.evict.is_set()
                          else f"idle for {g.idle_s:g} s")
                await close(1001, reason)
                return {"type": "websocket.disconnect", "code": 1001}

        async def close(code: int, reason: str) -> None:
            if not session.closed:
                session.closed = True
                with contextlib.suppress(Exception):
                    await send({"type": "websocket.close", "code": code, "reason": reason})

        async def guarded_send(message: dict[str, Any]) -> None:
            if session.closed:
                return  # the guard closed it; OpenEnv's own close (or a late reply) goes nowhere
            if message.get("type") == "websocket.close":
                session.closed = True
                with contextlib.suppress(Exception):  # the client may be gone already: nothing to tell it
                    await send(message)
                return
            await send(message)

        try:
            await self.app(scope, guarded_receive, guarded_send)
        finally:
            self.sessions.discard(session)
            session.done.set()


async def _json_response(send: Any, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


def serve(app: Any, *, host: str = "127.0.0.1", port: int = 8000, log_level: str = "warning",
          guards: Any = None) -> None:
    """Run ``app`` (from :func:`create_app`) with uvicorn and the HTTP guards of ``searchgym serve``
    (:class:`searchgym.retrieval.server.ServerGuards`: a request head over 64 KiB is answered 431 without being
    buffered, slow heads 408, idle connections closed), and WebSocket messages bounded by the app's guards."""
    import uvicorn

    from searchgym.retrieval.server import ServerGuards, server_config

    session_guards = getattr(app, "guards", None)
    max_message = session_guards.max_message_bytes if isinstance(session_guards, SessionGuards) else 4 << 20
    config = server_config(app, host=host, port=port, guards=guards or ServerGuards(), log_level=log_level,
                           ws_max_size=max_message, ws_max_queue=4)
    server = uvicorn.Server(config)
    server.run()
    if not server.started:
        raise ConfigError(f"the server did not start on {host}:{port} (port in use?)")


__all__ = ["SearchAction", "SearchObservation", "SearchState", "SearchgymOpenEnv", "SessionGuardMiddleware",
           "SessionGuards", "create_app", "serve"]
