"""SearchEnv behaviour on the embedded world: registration, observations, rewards, budget, seeding."""

from __future__ import annotations

import gymnasium as gym
import pytest

import searchgym
from searchgym.envs import AnswerAction, ResetNeeded, SearchAction, SearchEnv
from searchgym.envs.prompts import INVALID_MESSAGES, SEARCH_R1_TEMPLATE
from searchgym.errors import ConfigError


@pytest.fixture(scope="module")
def env():
    e = gym.make("searchgym/SearchQA-v0")
    yield e
    e.close()


def _gold_answer_episode(env, seed=0):
    obs, info = env.reset(seed=seed)
    ex = env.unwrapped.example
    return obs, info, ex


def test_registered_ids_and_make_without_args():
    for env_id in searchgym.envs.ENV_IDS:
        assert env_id in gym.registry
        assert gym.registry[env_id].vector_entry_point == "searchgym.envs.registration:make_search_vector_env"
    e = gym.make("searchgym:searchgym/SearchQA-v0")
    assert isinstance(e.unwrapped, SearchEnv)
    assert (e.unwrapped.top_k, e.unwrapped.max_turns) == (3, 4)


def test_reset_prompt_and_info(env):
    obs, info = env.reset(seed=0)
    q = info["question"]
    assert obs == SEARCH_R1_TEMPLATE.replace("{question}", q if q.endswith("?") else q + "?")
    for key in ("question", "question_id", "family", "hops", "split"):
        assert key in info
    assert info["split"] == "train" and info["family"] and isinstance(info["hops"], int)
    assert obs in env.observation_space


def test_search_observation_is_search_r1_format(env):
    _, info = env.reset(seed=1)
    obs, reward, term, trunc, info = env.step(f"<think>go</think><search> {info['question']} </search>")
    assert (reward, term, trunc) == (0.0, False, False)
    assert obs.startswith("\n\n<information>Doc 1(Title: \"") and obs.endswith("</information>\n\n")
    assert obs.count("\nDoc ") == 2  # Doc 2 and Doc 3 each start a line
    assert info["kind"] == "search" and len(info["doc_ids"]) == 3 and len(info["titles"]) == 3
    assert info["num_searches"] == 1 and info["family"]
    passages = {p.id: p for p in env.unwrapped.retriever.passages}
    first = passages[info["doc_ids"][0]]
    assert f'Doc 1(Title: "{first.title}") {first.text}' in obs
    gold = set(env.unwrapped.example.supporting_ids)
    assert info["gold_hit"] == bool(gold & set(info["doc_ids"]))


def test_gold_answer_gets_reward_one(env):
    _, info, ex = _gold_answer_episode(env, seed=2)
    obs, reward, term, trunc, info = env.step(f"<answer> {ex.answers[0]} </answer>")
    assert (obs, reward, term, trunc) == ("", 1.0, True, False)
    assert info["em"] == 1 and info["f1"] == 1.0 and info["prediction"] == ex.answers[0]
    assert info["answers"] == list(ex.answers) and info["kind"] == "answer"
    traj = env.unwrapped.trajectory()
    assert (traj.em, traj.reward, traj.prediction, traj.num_searches) == (1, 1.0, ex.answers[0], 0)


def test_wrong_answer_and_step_after_end_raises(env):
    env.reset(seed=3)
    _, reward, term, _, info = env.step(AnswerAction("certainly not this"))
    assert (reward, term, info["em"]) == (0.0, True, 0)
    with pytest.raises(gym.error.ResetNeeded):
        env.step("<answer> again </answer>")
    with pytest.raises(ResetNeeded, match="reset"):
        env.unwrapped.step("<search> q </search>")


def test_step_before_reset_raises():
    e = SearchEnv()
    with pytest.raises(gym.error.ResetNeeded):
        e.step("<search> q </search>")


def test_invalid_action_message_and_penalty():
    e = SearchEnv(invalid_penalty=0.25)
    e.reset(seed=0)
    obs, reward, term, trunc, info = e.step("I think the answer is Paris")
    assert obs == INVALID_MESSAGES["search_r1"] and "My previous action is invalid." in obs
    assert (reward, term, trunc, info["kind"]) == (-0.25, False, False, "invalid")
    assert info["error"]


def test_budget_exhaustion_then_truncation():
    e = SearchEnv(max_turns=2, invalid_penalty=0.1)
    _, _info = e.reset(seed=0)
    obs1, *_ = e.step("<search> first </search>")
    assert "used all" not in obs1
    obs2, _, _, _, info2 = e.step("<search> second </search>")
    assert "I have used all 2 searches" in obs2 and info2["num_searches"] == 2
    obs3, reward, term, trunc, info3 = e.step("<search> third </search>")  # refused, and the last step
    assert info3["kind"] == "invalid" and "budget" in info3["error"] and info3["num_searches"] == 2
    assert "I have used all 2 searches" in obs3
    assert (term, trunc) == (False, True)
    assert reward == pytest.approx(-0.1) and info3["em"] == 0 and info3["prediction"] is None
    traj = e.trajectory()
    assert [s.kind for s in traj.steps] == ["search", "search", "invalid"]
    assert traj.extra["truncated"] is True and traj.reward == pytest.approx(-0.1)


def test_invalid_actions_count_toward_max_steps():
    e = SearchEnv(max_turns=1, max_steps=3)
    e.reset(seed=0)
    assert e.step("x")[3] is False
    assert e.step("y")[3] is False
    assert e.step("z")[3] is True


def test_seeding_reproduces_order_and_results(env):
    def run(seed):
        out = []
        for k in range(5):
            _, info = env.reset(seed=seed) if k == 0 else env.reset()
            _, _, _, _, si = env.step(f"<search> {info['question']} </search>")
            out.append((info["question_id"], tuple(si["doc_ids"])))
        return out

    a, b, c = run(7), run(7), run(8)
    assert a == b and a != c
    assert len({q for q, _ in a}) == 5  # a shuffled pass visits distinct questions


def test_reset_options_pick_a_question(env):
    e = env.unwrapped
    _, info = env.reset(options={"index": 5})
    assert info["question_id"] == e.examples[5].id
    qid = e.examples[9].id
    assert env.reset(options={"question_id": qid})[1]["question_id"] == qid
    assert env.reset(options={"example": e.examples[11]})[1]["question_id"] == e.examples[11].id
    with pytest.raises(ConfigError):
        env.reset(options={"question_id": "nope"})


def test_unshuffled_order_is_file_order():
    e = SearchEnv(shuffle=False, split="dev")
    ids = [e.reset(seed=0)[1]["question_id"]] + [e.reset()[1]["question_id"] for _ in range(3)]
    assert ids == [ex.id for ex in e.examples[:4]]


def test_tool_call_template_and_parallel_queries():
    e = SearchEnv(prompt_template="tool_call")
    obs, _ = e.reset(seed=0)
    assert "<tools>" in obs and '"name": "search"' in obs
    obs, _, _, _, info = e.step('<tool_call>{"name": "search", "arguments": {"query_list": ["a city", "a river"]}}'
                                "</tool_call>")
    assert info["queries"] == ["a city", "a river"] and info["num_searches"] == 1
    assert "---\n" in obs and len(info["doc_ids"]) == 6
    obs, *_ = e.step("nonsense")
    assert '<tool_call>{"name": "search"' in obs  # the corrective message speaks the tool-call format
    traj = e.step(SearchAction(queries=["x y", "z"])) and e.trajectory()
    assert traj.queries == ["a city", "a river", "x y", "z"]


def test_chat_observation_format():
    e = SearchEnv(observation_format="chat", prompt_template="tool_call")
    obs, info = e.reset(seed=0)
    assert info["messages"] == [{"role": "user", "content": obs}]
    obs, _, _, _, info = e.step(SearchAction("capital"))
    assert obs.startswith("<information>") and obs.endswith("</information>")
    assert info["messages"] == [{"role": "tool", "content": obs}]
    short = SearchEnv(observation_format="chat", max_turns=1)
    short.reset(seed=0)
    obs, *_ = short.step("<search> capital </search>")
    assert obs.endswith("</information>\nI have used all 1 search. I should now give the final answer between "
                        "<answer> and </answer>.")


def test_passage_truncation():
    e = SearchEnv(passage_chars=20)
    e.reset(seed=0)
    obs, *_ = e.step("<search> capital city </search>")
    for line in obs.strip().removeprefix("<information>").removesuffix("</information>").splitlines():
        assert len(line.split(") ", 1)[1]) <= 20
    e = SearchEnv(passage_tokens=3)
    e.reset(seed=0)
    obs, *_ = e.step("<search> capital city </search>")
    for line in obs.strip().removeprefix("<information>").removesuffix("</information>").splitlines():
        assert len(line.split(") ", 1)[1].split()) <= 3


def test_custom_prompt_reward_and_top_k():
    e = SearchEnv(prompt_template="Q: {question}\nA:", reward="f1 - 0.5*search_cost", top_k=5)
    obs, _info = e.reset(seed=0)
    assert obs.startswith("Q: ") and obs.endswith("\nA:")
    _, _, _, _, si = e.step("<search> capital city </search>")
    assert len(si["doc_ids"]) == 5
    ans = e.example.answers[0]
    _, reward, term, _, fi = e.step(f"<answer>{ans}</answer>")
    assert term and reward == pytest.approx(1.0 - 0.5) and fi["outcome_reward"] == pytest.approx(0.5)
    e2 = SearchEnv(prompt_template=lambda ex: f"custom {ex.id}")
    assert e2.reset(seed=0)[0].startswith("custom ")


@pytest.mark.parametrize("kw", [{"top_k": 0}, {"max_turns": -1}, {"observation_format": "xml"},
                                {"prompt_template": "no placeholder"}, {"reward": "bleu"},
                                {"retriever": "sparse"}, {"dataset": "no_such_split"}, {"passage_chars": 0},
                                {"render_mode": "human"}])
def test_bad_arguments_raise_config_error(kw):
    with pytest.raises(ConfigError):
        SearchEnv(**kw)


def test_render_ansi():
    e = SearchEnv(render_mode="ansi")
    e.reset(seed=0)
    e.step("<search> q </search>")
    text = e.render()
    assert "Question:" in text and "<information>" in text


def test_observations_are_in_the_space_and_infos_fresh(env):
    obs, _info = env.reset(seed=4)
    obs2, *_, info2 = env.step("<search> x </search>")
    obs3, *_, info3 = env.step("<search> y </search>")
    assert all(o in env.observation_space for o in (obs, obs2, obs3))
    assert info2 is not info3 and info2["doc_ids"] is not info3["doc_ids"]
    info2["doc_ids"].append("mutated")  # a caller mutating an info must not touch the record
    assert "mutated" not in env.unwrapped.trajectory().steps[0].doc_ids


def test_docstring_examples_run():
    import doctest

    import searchgym.envs.env as env_module
    import searchgym.rewards as rewards_module

    for mod in (env_module, rewards_module):
        result = doctest.testmod(mod)
        assert result.attempted > 0 and result.failed == 0, mod.__name__
