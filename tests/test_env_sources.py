"""SearchEnv over other inputs: a corpus file + QA file, an index directory, an HTTP retrieval server,
a Retriever object; and the errors for inputs that cannot work."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from searchgym.data import World
from searchgym.envs import SearchEnv
from searchgym.errors import ConfigError, CorpusFormatError
from searchgym.retrieval import BM25Retriever, build_index

pytest.importorskip("uvicorn")
from helpers import load_server_fixture

live = load_server_fixture("live")


@pytest.fixture(scope="module")
def small():
    w = World.generate_for_passages(80, seed=5)
    return w.passages, w.split("train")


@pytest.fixture(scope="module")
def files(small, tmp_path_factory):
    passages, examples = small
    d = tmp_path_factory.mktemp("envsrc")
    corpus = d / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(p.to_search_r1()) + "\n" for p in passages), encoding="utf-8")
    qa = d / "qa.jsonl"  # FlashRAG format
    qa.write_text("".join(json.dumps({"id": e.id, "question": e.question, "golden_answers": e.answers}) + "\n"
                          for e in examples), encoding="utf-8")
    return corpus, qa


def _play(env):
    _, info = env.reset(seed=0)
    ex = env.unwrapped.example
    _, _, _, _, si = env.step(f"<search> {info['question']} </search>")
    _, reward, term, _, fi = env.step(f"<answer> {ex.answers[0]} </answer>")
    return info, si, reward, term, fi


def test_corpus_file_and_flashrag_dataset(files, small):
    corpus, qa = files
    env = gym.make("searchgym/SearchQA-v0", corpus=str(corpus), dataset=str(qa))
    info, si, reward, term, fi = _play(env)
    ids = {p.id for p in small[0]}
    assert info["question_id"] in {e.id for e in small[1]}
    assert si["doc_ids"] and set(si["doc_ids"]) <= ids
    assert (reward, term, fi["em"]) == (1.0, True, 1)


def test_index_directory(files, small, tmp_path):
    corpus, _qa = files
    idx = build_index(str(corpus), tmp_path / "idx", show_progress=False)
    env = SearchEnv(corpus=str(idx), dataset=list(small[1]))
    _, si, reward, _, _ = _play(env)
    assert si["doc_ids"] and reward == 1.0
    # the index's retriever is shared by the next env made from the same directory
    assert SearchEnv(corpus=str(idx), dataset=list(small[1])).retriever is env.retriever


def test_http_retriever_url(small):
    from searchgym.retrieval.server import create_app

    local = BM25Retriever(small[0])
    with live.LiveServer(create_app(local)) as srv:
        env = SearchEnv(retriever=srv.url, dataset=list(small[1]))
        _, si, reward, _, _ = _play(env)
        ref = [h.id for h in local.search(si["query"], 3)]
        assert si["doc_ids"] == ref and reward == 1.0


def test_retriever_object_and_cache(small):
    r = BM25Retriever(small[0])
    env = SearchEnv(retriever=r, dataset=list(small[1]))
    assert env.retriever is r
    cached = SearchEnv(retriever=r, dataset=list(small[1]), cache=True)
    _, si, *_ = _play(cached)
    assert type(cached.retriever).__name__ == "CachedRetriever" and si["doc_ids"]


def test_bad_inputs(small, tmp_path):
    with pytest.raises(ConfigError, match="corpus"):
        SearchEnv(dataset=list(small[1]))  # questions without their corpus
    with pytest.raises(CorpusFormatError):
        SearchEnv(corpus=str(tmp_path / "missing.jsonl"), dataset=list(small[1]))
    with pytest.raises(ConfigError):
        SearchEnv(dataset=str(tmp_path / "missing.jsonl"))
    with pytest.raises(ConfigError):
        SearchEnv(retriever=object(), dataset=list(small[1]))
    with pytest.raises(ConfigError):
        SearchEnv(dataset=[])
