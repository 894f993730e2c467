"""First contact (issue 22): a user corpus without questions is refused with a message that says what to pass,
through gym.make and through the classes themselves."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import searchgym  # noqa: F401 - registers the env ids
from searchgym.envs import SearchEnv, SearchVectorEnv
from searchgym.errors import ConfigError


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl"
    rows = [{"id": str(i), "contents": f'"Place {i}"\nPlace {i} is a town by river number {i}.'} for i in range(6)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    qa = path.with_name("qa.jsonl")
    qa.write_text(json.dumps({"id": "q1", "question": "Which river is by Place 3?", "golden_answers": ["3"]}) + "\n")
    return path, qa


@pytest.mark.parametrize("make", [lambda **kw: gym.make("searchgym/SearchQA-v0", **kw),
                                  lambda **kw: gym.make_vec("searchgym/SearchQA-v0", num_envs=2,
                                                            vectorization_mode="vector_entry_point", **kw),
                                  lambda **kw: SearchEnv(**kw), lambda **kw: SearchVectorEnv(2, **kw)],
                         ids=["make", "make_vec", "SearchEnv", "SearchVectorEnv"])
def test_user_corpus_without_dataset_is_an_error_naming_dataset(corpus, make):
    with pytest.raises(ConfigError, match=r"without dataset=.*Pass dataset=QA_FILE"):
        make(corpus=str(corpus[0]))
    with pytest.raises(ConfigError, match=r"retriever='http://127\.0\.0\.1:9/retrieve' was given without dataset="):
        make(retriever="http://127.0.0.1:9/retrieve")


def test_with_a_dataset_or_a_named_world_split_it_builds(corpus):
    env = gym.make("searchgym/SearchQA-v0", corpus=str(corpus[0]), dataset=str(corpus[1]))
    _, info = env.reset(seed=0)
    assert info["question"] == "Which river is by Place 3?"
    world = gym.make("searchgym/SearchQA-v0", corpus=str(corpus[0]), split="dev")  # on purpose: world questions
    assert len(world.unwrapped.examples) > 100
    assert gym.make("searchgym/SearchQA-v0").unwrapped.top_k == 3  # the default needs nothing
