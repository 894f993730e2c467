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

import functools
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

    def __init__(self, corpus: Any = None, dataset: Any = None, *, split: str = "train", **env_kwargs: Any):
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


def create_app(corpus: Any = None, dataset: Any = None, *, split: str = "train", max_concurrent_envs: int = 64,
               **env_kwargs: Any) -> Any:
    """The FastAPI app (``openenv.core.env_server.create_fastapi_app``) serving :class:`SearchgymOpenEnv`."""
    from openenv.core.env_server.http_server import create_fastapi_app

    factory = functools.partial(SearchgymOpenEnv, corpus, dataset, split=split, **env_kwargs)
    factory().env.close()  # build the index now (and fail here on bad arguments), not in the first session
    return create_fastapi_app(factory, SearchAction, SearchObservation, max_concurrent_envs=max_concurrent_envs)


__all__ = ["SearchAction", "SearchObservation", "SearchState", "SearchgymOpenEnv", "create_app"]
