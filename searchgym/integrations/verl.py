"""verl: ``SearchgymSearchTool`` (a ``verl.tools.base_tool.BaseTool``), its tool config, ``compute_score``.

verl 0.9 removed its own search tool; this one takes the same ``query_list`` argument and runs each call
as one ``SearchEnv`` search step (same parsing, retrieval and ``<information>`` formatting as everywhere in
searchgym), over an in-process index or an ``http://`` retrieval server. Config keys (verl 0.9.1)::

    actor_rollout_ref.rollout.multi_turn.enable=True
    actor_rollout_ref.rollout.multi_turn.tool_config_path=<TOOL_CONFIG>   # python -m searchgym.integrations.verl
    actor_rollout_ref.rollout.multi_turn.format=hermes                   # Qwen <tool_call> JSON
    actor_rollout_ref.rollout.multi_turn.max_assistant_turns=5
    reward.custom_reward_function.path=<this file>                       # searchgym.integrations.verl.__file__
    reward.custom_reward_function.name=compute_score
    data.train_files=<out>/train.parquet data.val_files=<out>/dev.parquet  # searchgym data export-world

``compute_score`` returns ``{"score", "em", "f1", "num_searches", "queries"}``: verl writes the extra keys
into ``rollout_data_dir/<step>.jsonl``, where ``searchgym analyze`` can read the queries.
"""

from __future__ import annotations

import asyncio
from importlib import resources
from pathlib import Path
from typing import Any
from uuid import uuid4

from searchgym.integrations._common import build_env, require

TOOL_CONFIG = str(Path(str(resources.files("searchgym.integrations") / "configs" / "verl_search_tool.yaml")))

require("verl")

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

_PLACEHOLDER = None


def _placeholder_example() -> Any:
    """The question posed to the tool's env: a search tool has no question, only queries."""
    global _PLACEHOLDER
    if _PLACEHOLDER is None:
        from searchgym.data import QAExample

        _PLACEHOLDER = QAExample(id="verl-tool", question="(search tool call)", answers=[])
    return _PLACEHOLDER


class SearchgymSearchTool(BaseTool):
    """``search(query_list: list[str])`` over searchgym's retrieval, one SearchEnv search step per call.

    Config keys: ``corpus`` (None: the embedded world), ``retriever`` (None / ``bm25`` / ``dense`` /
    ``hybrid`` / an ``http://`` URL), ``topk`` (3), ``world_seed`` (0). A call with a missing or wrong-typed
    ``query_list`` gets the env's corrective message back (tool reward 0), never an exception.
    """

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None = None):
        config = dict(config or {})
        if tool_schema is None:
            tool_schema = OpenAIFunctionToolSchema.model_validate(_default_schema())
        super().__init__(config, tool_schema)
        self._env_kwargs = {"corpus": config.get("corpus"), "retriever": config.get("retriever"),
                            "top_k": int(config.get("topk", config.get("top_k", 3))),
                            "world_seed": int(config.get("world_seed", 0)), "max_turns": 1, "budget_notice": False}
        self._idle: list[Any] = [self._new_env()]  # builds (or finds memoised) the retriever now, not mid-rollout
        self._instances: dict[str, dict[str, Any]] = {}

    def _new_env(self) -> Any:
        return build_env(**self._env_kwargs)

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        instance_id = instance_id or str(uuid4())
        self._instances[instance_id] = {"queries": []}
        return instance_id, ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
                      ) -> tuple[ToolResponse, float, dict]:
        # Retrieval may block (a remote server): run it off the event loop, one env per concurrent call.
        text, metrics = await asyncio.to_thread(self._search, parameters)
        state = self._instances.setdefault(instance_id, {"queries": []})
        state["queries"].extend(metrics.get("queries", []))
        return ToolResponse(text=text), 0.0, metrics

    def _search(self, parameters: Any) -> tuple[str, dict[str, Any]]:
        from searchgym.integrations._common import tool_step

        try:
            env = self._idle.pop()  # atomic under the GIL; concurrent calls each get their own env
        except IndexError:
            env = self._new_env()
        try:
            env.reset(options={"example": _placeholder_example()})
            args = dict(parameters) if isinstance(parameters, dict) else {"query_list": parameters}
            if "query" in args and "query_list" not in args and isinstance(args["query"], list):
                args["query_list"] = args.pop("query")
            text, info = tool_step(env, "search", args)
        finally:
            self._idle.append(env)
        if info is None or info["kind"] != "search":
            return text, {"status": "error", "error": (info or {}).get("error"), "query_count": 0,
                          "total_results": 0, "queries": []}
        return text, {"status": "success", "query_count": len(info["queries"]),
                      "total_results": len(info["doc_ids"]), "queries": list(info["queries"])}

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        return 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._instances.pop(instance_id, None)


def _default_schema() -> dict[str, Any]:
    import yaml

    cfg = yaml.safe_load(Path(TOOL_CONFIG).read_text(encoding="utf-8"))
    return cfg["tools"][0]["tool_schema"]


# -- reward -----------------------------------------------------------------------------------------------
# compute_score needs no verl: it lives in verl_reward (usable as a custom_reward_function path on its own)
from searchgym.integrations.verl_reward import compute_score


def main(argv: list[str] | None = None) -> int:
    """``python -m searchgym.integrations.verl`` prints the tool-config path (for the verl command line)."""
    print(TOOL_CONFIG)
    return 0


__all__ = ["TOOL_CONFIG", "SearchgymSearchTool", "compute_score"]


if __name__ == "__main__":
    raise SystemExit(main())
