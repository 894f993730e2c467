"""TRL: ``SearchgymToolEnv`` as TRL sees it, and a real ``GRPOTrainer`` run with it (tools executed,
``diversity/*`` logged) on a tiny randomly initialised Qwen2 model with a tokenizer built here."""

from __future__ import annotations

import json
import pickle

import pytest

pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")

from transformers.utils import get_json_schema

from searchgym.errors import ConfigError, FrameworkVersionError
from searchgym.integrations import _common, require
from searchgym.integrations.trl import SearchgymToolEnv, diversity_reward, env_factory, make_dataset


@pytest.fixture(scope="module")
def rows():
    return make_dataset(split="dev", n=6, seed=1)


@pytest.fixture()
def env():
    return SearchgymToolEnv(dataset="dev")


def test_tools_are_exactly_search_and_answer_with_required_typed_arguments(env):
    import inspect

    public = sorted(n for n, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
                    if not n.startswith("_") and n not in ("reset", "get_reward"))
    assert public == ["answer", "search"]
    s = get_json_schema(env.search)["function"]
    assert s["parameters"] == {"type": "object", "required": ["query"], "properties": {
        "query": {"type": "string", "description": s["parameters"]["properties"]["query"]["description"]}}}
    a = get_json_schema(env.answer)["function"]
    assert a["parameters"]["required"] == ["answer"] and a["description"]


def test_make_dataset_rows_reset_to_their_question(rows, env):
    assert len(rows) == 6 and {"prompt", "question_id", "index", "question", "answers"} <= set(rows.column_names)
    row = rows[3]
    assert row["prompt"][0]["role"] == "user" and row["question"] in row["prompt"][0]["content"]
    assert env.reset(**row) is None  # the prompt already carries the question
    assert env.env.example.id == row["question_id"] and env.env.example.question == row["question"]
    # without a prompt column the env's prompt comes back (TRL appends it to the user message)
    assert row["question"] in env.reset(question_id=row["question_id"])


def test_search_then_answer_scores_exact_match(rows, env):
    row = rows[0]
    env.reset(**row)
    out = env.search(query=row["question"])
    assert out.startswith("<information>Doc 1(Title:")
    assert env.answer(answer=row["answers"][0]) == _common.ANSWER_RECORDED
    assert env.get_reward() == 1.0 and env.trajectory.num_searches == 1
    assert env.search(query="again") == _common.EPISODE_OVER  # after the end: a message, not an exception
    env.reset(**row)
    env.answer(answer="certainly not " + row["answers"][0])
    assert env.get_reward() == 0.0


@pytest.mark.parametrize("call", [lambda e: e.search(), lambda e: e.search(query=7), lambda e: e.search(q="x"),
                                  lambda e: e.search(query=""), lambda e: e.answer(), lambda e: e.answer(answer=[1])])
def test_missing_or_wrong_typed_arguments_get_a_corrective_observation(rows, env, call):
    env.reset(**rows[0])
    out = call(env)
    assert "My previous action is invalid" in out and "(Error:" in out
    assert env.trajectory.steps[-1].kind == "invalid" and not env.env.done


def test_unanswered_episode_is_closed_as_truncated(rows, env):
    env.reset(**rows[1])
    env.search(query="something")
    assert env.get_reward() == 0.0 and env.env.done and env.trajectory.extra["truncated"] is True


def test_pickle_keeps_arguments_and_shares_the_retriever(env):
    clone = pickle.loads(pickle.dumps(env))
    assert clone.env.retriever is env.env.retriever and clone.env.examples is env.env.examples
    made = pickle.loads(pickle.dumps(env_factory(dataset="dev", top_k=2)))()
    assert made.env.top_k == 2 and made.env.retriever is env.env.retriever


def test_unknown_question_id_says_what_to_do(env):
    with pytest.raises(ConfigError, match="not in this environment's dataset"):
        env.reset(question_id="nope", prompt=[{"role": "user", "content": "x"}])
    with pytest.raises(ConfigError, match="names no question"):  # a prompt the env cannot match to a question
        env.reset(prompt=[{"role": "user", "content": "What is 2+2?"}])


def test_diversity_reward_logs_the_group_queries_and_scores_zero(rows):
    envs = [SearchgymToolEnv(dataset="dev") for _ in range(4)]
    for i, e in enumerate(envs):
        e.reset(**rows[0])
        e.search(query=f"query number {i % 2}")
    logged: dict[str, float] = {}
    fn = diversity_reward()
    out = fn(prompts=[None] * 4, completions=[None] * 4, environments=envs,
             log_metric=lambda k, v: logged.__setitem__(k, v))
    assert out == [0.0] * 4
    assert logged and all(k.startswith("diversity/") for k in logged)
    string_entropy = [v for k, v in logged.items() if k.startswith("diversity/string/") and k.endswith("/entropy")]
    assert string_entropy and string_entropy[0] == pytest.approx(0.6931, abs=1e-3)  # two distinct queries, 2+2


def test_unsupported_framework_version_names_the_supported_range(monkeypatch):
    import importlib.metadata as md

    real = md.version
    monkeypatch.setattr(md, "version", lambda d: "0.9.0" if d == "trl" else real(d))
    monkeypatch.delenv(_common.SKIP_VERSION_CHECK_ENV, raising=False)
    with pytest.raises(FrameworkVersionError, match=r"trl 0\.9\.0 is not supported.*trl>=1\.16,<2"):
        require("trl")
    monkeypatch.setenv(_common.SKIP_VERSION_CHECK_ENV, "1")
    assert require("trl") == "0.9.0"
    with pytest.raises(ConfigError, match="unknown framework"):
        require("keras")


# -- a real GRPOTrainer run ----------------------------------------------------------------------------------
def _tool_call(name: str, **args: object) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


def _tiny_model_and_tokenizer():
    """A byte-level tokenizer whose extra tokens are whole tool calls, and a random 1-layer Qwen2.

    Sampling from the random model picks those tokens often enough that tool calls happen in every run.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
    from trl.chat_template_utils import qwen2_5_chat_template

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    queries = ["capital of Kaitrland", "Thihaven country", "elevation of Fiholm", "who founded Zeazemoor",
               "Brodismoor population", "river in Hakania"]
    tok.add_tokens([_tool_call("search", query=q) for q in queries]
                   + [_tool_call("search", q="missing query"), _tool_call("answer", answer="1205")])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        padding_side="left")
    tokenizer.chat_template = qwen2_5_chat_template
    cfg = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096,
                      eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                      tie_word_embeddings=True)
    torch.manual_seed(0)
    return Qwen2ForCausalLM(cfg), tokenizer


@pytest.mark.slow  # ~15 s: two GRPO steps on CPU
def test_grpo_trainer_executes_the_tools_and_logs_diversity(tmp_path, monkeypatch):
    from trl import GRPOConfig, GRPOTrainer

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    model, tokenizer = _tiny_model_and_tokenizer()
    made: list[SearchgymToolEnv] = []

    def factory() -> SearchgymToolEnv:
        made.append(SearchgymToolEnv(split="train"))
        return made[-1]

    div = diversity_reward()
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4,
                      max_completion_length=48, max_steps=2, logging_steps=1, report_to="none", use_cpu=True,
                      save_strategy="no", reward_weights=[0.0], max_tool_calling_iterations=2, seed=0)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, train_dataset=make_dataset(n=8),
                          environment_factory=factory, reward_funcs=[div], args=args)
    trainer.train()
    logs = [h for h in trainer.state.log_history if "tools/call_frequency" in h]
    assert len(logs) == 2
    assert sum(h["tools/call_frequency"] for h in logs) > 0
    assert all(h["tools/failure_frequency"] == 0 for h in logs)  # bad calls became observations, not errors
    assert any(k.startswith("diversity/") for h in logs for k in h)
    assert "rewards/SearchgymToolEnv/mean" in logs[0]  # get_reward() is the env's reward source
    searches = [s for e in made if e.env.example is not None for s in e.trajectory.steps if s.kind == "search"]
    assert searches and all(s.doc_ids for s in searches)  # real retrieval ran inside the trainer
    assert div.last and all(k.startswith("diversity/") for k in div.last)  # the last batch, as logged
