"""What verl's ``SearchgymSearchTool`` does, without verl: its config, its envs and its ``create`` / ``execute`` /
``release`` calls (:mod:`searchgym.integrations.verl` wraps each in verl's ``BaseTool`` / ``ToolResponse``).

Kept apart so the tool's behaviour is importable (and tested) where verl is not installed: verl pins its own
transformers and lives in its own venv, while the Ray Serve and HTTP retrievers it reaches are tested in the main one.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any
from uuid import uuid4


@functools.cache
def placeholder_example() -> Any:
    """The question posed to the tool's env: a search tool has no question, only queries."""
    from searchgym.data import QAExample

    return QAExample(id="verl-tool", question="(search tool call)", answers=[])


def env_kwargs(config: dict[str, Any]) -> dict[str, Any]:
    """``build_env`` arguments for the tool config (keys ``corpus``, ``retriever``, ``topk``, ``world_seed``).

    A corpus or retriever of the user's own (a file, an index directory, an ``http://`` server, ``ray://APP``)
    gets the placeholder question as its dataset: the tool only searches, so no questions are needed, and the env
    would otherwise refuse a user corpus without ``dataset=``."""
    from searchgym.envs.sources import RETRIEVER_KINDS

    retriever, corpus = config.get("retriever"), config.get("corpus")
    own = corpus is not None or not (retriever is None or retriever in RETRIEVER_KINDS)
    return {
        "corpus": corpus,
        "retriever": retriever,
        "dataset": [placeholder_example()] if own else None,
        "top_k": int(config.get("topk", config.get("top_k", 3))),
        "world_seed": int(config.get("world_seed", 0)),
        "max_turns": 1,
        "budget_notice": False,
    }


class SearchToolCore:
    """``search(query_list)`` as verl calls it: ``create`` an instance, ``execute`` it with the model's arguments
    (text for the model, tool reward 0, metrics), ``release`` it. Each call is one SearchEnv search step; a
    missing or wrong-typed ``query_list`` gets the env's corrective message back, never an exception."""

    def __init__(self, config: dict[str, Any] | None = None):
        self._env_kwargs = env_kwargs(dict(config or {}))
        # The first env builds (or finds memoised) the retriever now, not mid-rollout.
        self._idle: list[Any] = [self._new_env()]
        self.instances: dict[str, dict[str, Any]] = {}

    def _new_env(self) -> Any:
        from searchgym.integrations._common import build_env

        return build_env(**self._env_kwargs)

    async def create(self, instance_id: str | None = None) -> str:
        instance_id = instance_id or str(uuid4())
        self.instances[instance_id] = {"queries": []}
        return instance_id

    async def execute(self, instance_id: str, parameters: Any) -> tuple[str, float, dict[str, Any]]:
        # Retrieval may block (a remote server): run it off the event loop, one env per concurrent call.
        text, metrics = await asyncio.to_thread(self.search, parameters)
        state = self.instances.setdefault(instance_id, {"queries": []})
        state["queries"].extend(metrics.get("queries", []))
        return text, 0.0, metrics

    def search(self, parameters: Any) -> tuple[str, dict[str, Any]]:
        from searchgym.integrations._common import tool_step

        try:
            env = self._idle.pop()  # atomic under the GIL; concurrent calls each get their own env
        except IndexError:
            env = self._new_env()
        try:
            env.reset(options={"example": placeholder_example()})
            args = dict(parameters) if isinstance(parameters, dict) else {"query_list": parameters}
            if "query" in args and "query_list" not in args and isinstance(args["query"], list):
                args["query_list"] = args.pop("query")
            text, info = tool_step(env, "search", args)
        finally:
            self._idle.append(env)
        if info is None or info["kind"] != "search":
            return text, {
                "status": "error",
                "error": (info or {}).get("error"),
                "query_count": 0,
                "total_results": 0,
                "queries": [],
            }
        return text, {
            "status": "success",
            "query_count": len(info["queries"]),
            "total_results": len(info["doc_ids"]),
            "queries": list(info["queries"]),
        }

    async def release(self, instance_id: str) -> None:
        self.instances.pop(instance_id, None)
