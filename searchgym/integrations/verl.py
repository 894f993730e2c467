"""verl: ``SearchgymSearchTool`` (a ``verl.tools.base_tool.BaseTool``), its tool config, ``compute_score``.

verl 0.9 removed its own search tool; this one takes the same ``query_list`` argument and runs each call
as one ``SearchEnv`` search step (same parsing, retrieval and ``<information>`` formatting as everywhere in
searchgym), over an in-process index, an ``http://`` retrieval server or a ``ray://APP`` Ray Serve app
(neither of the last two needs a dataset: the tool only searches). Config keys (verl 0.9.1)::

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

from importlib import resources
from pathlib import Path
from typing import Any

from searchgym.integrations._common import require
from searchgym.integrations.verl_search import SearchToolCore

TOOL_CONFIG = str(Path(str(resources.files("searchgym.integrations") / "configs" / "verl_search_tool.yaml")))

require("verl")

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse


class SearchgymSearchTool(BaseTool):
    """``search(query_list: list[str])`` over searchgym's retrieval, one SearchEnv search step per call
    (:class:`~searchgym.integrations.verl_search.SearchToolCore`, here in verl's types).

    Config keys: ``corpus`` (None: the embedded world), ``retriever`` (None / ``bm25`` / ``dense`` /
    ``hybrid`` / an ``http://`` URL / ``ray://APP``), ``topk`` (3), ``world_seed`` (0). A call with a missing or
    wrong-typed ``query_list`` gets the env's corrective message back (tool reward 0), never an exception.
    """

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None = None):
        config = dict(config or {})
        if tool_schema is None:
            tool_schema = OpenAIFunctionToolSchema.model_validate(_default_schema())
        super().__init__(config, tool_schema)
        self._core = SearchToolCore(config)

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        return await self._core.create(instance_id), ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
                      ) -> tuple[ToolResponse, float, dict]:
        text, reward, metrics = await self._core.execute(instance_id, parameters)
        return ToolResponse(text=text), reward, metrics

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        return 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        await self._core.release(instance_id)


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
