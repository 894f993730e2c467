"""verl's search tool without verl: ``SearchToolCore`` is what ``SearchgymSearchTool`` runs for each of verl's
``create`` / ``execute`` / ``release`` calls, so a user corpus or a remote retriever (``http://`` here, ``ray://``
in tests/test_serve_ray.py) works from the tool config alone, with no dataset: the tool only searches."""

from __future__ import annotations

import asyncio
import json

import pytest

from searchgym.data import World
from searchgym.integrations.verl_search import SearchToolCore
from searchgym.retrieval import BM25Retriever

pytest.importorskip("uvicorn")
from helpers import load_server_fixture

live = load_server_fixture("live")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    passages = World.generate_for_passages(80, seed=5).passages
    corpus = tmp_path_factory.mktemp("verlcore") / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(p.to_search_r1()) + "\n" for p in passages), encoding="utf-8")
    return passages, corpus


def call(core: SearchToolCore, params) -> tuple[str, float, dict]:
    """One tool call as verl makes it: create an instance, execute it, release it (on an event loop)."""

    async def go():
        iid = await core.create()
        try:
            return await core.execute(iid, params)
        finally:
            await core.release(iid)

    return asyncio.run(go())


def test_a_retrieval_server_and_a_corpus_file_need_no_dataset(small):
    from searchgym.retrieval.server import create_app

    passages, corpus = small
    queries = [passages[0].title, f"{passages[3].title} {passages[3].text.split()[0]}"]
    in_process = call(SearchToolCore({"corpus": str(corpus), "topk": 3}), {"query_list": queries})
    with live.LiveServer(create_app(BM25Retriever(passages))) as srv:
        core = SearchToolCore({"retriever": srv.url, "topk": 3})
        text, reward, metrics = call(core, {"query_list": queries})
        bad = call(core, {"query_list": 5})
    assert (text, reward, metrics) == in_process  # the same passages, the same <information> text
    assert metrics["status"] == "success" and metrics["queries"] == queries and metrics["total_results"] == 6
    assert passages[0].title in text
    assert bad[2]["status"] == "error" and "My previous action is invalid" in bad[0]


def test_the_embedded_world_still_needs_no_configuration():
    text, _reward, metrics = call(SearchToolCore({}), {"query_list": ["capital of Kaitrland"]})
    assert metrics["status"] == "success" and "Kaitrland" in text
