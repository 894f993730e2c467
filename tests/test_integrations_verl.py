"""verl: the tool config loads through verl's own ``load_all_tools``; the tool executes; compute_score.

verl pins transformers < 5.11, so these run in their own venv (``make test-integrations``); the main
``make test`` skips them when verl is not installed.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

pytest.importorskip("verl")

from verl.tools.base_tool import BaseTool
from verl.tools.tool_registry import load_all_tools

from searchgym.integrations.verl import TOOL_CONFIG, SearchgymSearchTool, compute_score


@pytest.fixture(scope="module")
def tool():
    tools = load_all_tools(TOOL_CONFIG, None)
    assert len(tools) == 1
    return tools[0]


def _run(tool, params):
    async def go():
        iid, _ = await tool.create(create_kwargs={})
        try:
            return await tool.execute(iid, params)
        finally:
            await tool.release(iid)
    return asyncio.run(go())


def test_yaml_loads_a_base_tool_named_search(tool):
    assert isinstance(tool, SearchgymSearchTool) and isinstance(tool, BaseTool)
    schema = tool.get_openai_tool_schema()
    assert tool.name == "search" and schema.function.parameters.required == ["query_list"]


def test_execute_searches_every_query_of_the_list(tool):
    resp, reward, metrics = _run(tool, {"query_list": ["capital of Kaitrland", "Thihaven country"]})
    assert reward == 0.0
    assert metrics["status"] == "success" and metrics["queries"] == ["capital of Kaitrland", "Thihaven country"]
    assert metrics["total_results"] == 6  # topk 3 per query
    assert resp.text.startswith("<information>Doc 1(Title:") and "---" in resp.text
    assert "Kaitrland" in resp.text


@pytest.mark.parametrize("params", [{}, {"query_list": 5}, {"query_list": [1, 2]}, {"query_list": []},
                                    {"other": "x"}])
def test_bad_arguments_get_a_corrective_message_not_an_exception(tool, params):
    resp, _reward, metrics = _run(tool, params)
    assert metrics["status"] == "error" and metrics["error"]
    assert "My previous action is invalid" in resp.text and "Error:" in resp.text


def test_compute_score_reads_tool_calls_and_tags():
    sol = ('<think>look</think><tool_call>{"name": "search", "arguments": {"query_list": ["a b", "c"]}}'
           '</tool_call><tool_response>...</tool_response><search> d </search><answer> 1,205 </answer>')
    out = compute_score("searchgym_world", sol, {"target": ["1205", "1,205"]}, {"index": 0})
    assert out == {"score": 1.0, "em": 1, "f1": 1.0, "num_searches": 2, "queries": ["a b", "c", "d"]}
    wrong = compute_score("searchgym_world", "<answer> Paris </answer>", ["1205"], None)
    assert wrong["score"] == 0.0 and wrong["num_searches"] == 0 and wrong["queries"] == []
    none = compute_score("searchgym_world", "no answer at all", {"target": ["x"]}, None)
    assert none["score"] == 0.0 and none["f1"] == 0.0


def test_tool_config_path_is_printed_for_the_command_line():
    out = subprocess.run([sys.executable, "-m", "searchgym.integrations.verl"], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == TOOL_CONFIG and TOOL_CONFIG.endswith(".yaml")


def test_concurrent_calls_each_get_their_own_answer(tool):
    queries = [f"capital of {c}" for c in ("Kaitrland", "Hakania", "Jafavia")] * 4

    async def go():
        async def one(q):
            iid, _ = await tool.create()
            try:
                return await tool.execute(iid, {"query_list": [q]})
            finally:
                await tool.release(iid)
        return await asyncio.gather(*(one(q) for q in queries))

    results = asyncio.run(go())
    for q, (resp, _reward, metrics) in zip(queries, results, strict=True):
        assert metrics["queries"] == [q] and q.split()[-1] in resp.text
