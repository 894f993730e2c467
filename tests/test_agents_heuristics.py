"""Heuristic agents against the real environment (embedded world, real bm25s), and their parsing helpers."""

from __future__ import annotations

import collections

import gymnasium as gym
import pytest

import searchgym  # noqa: F401  (registers the env ids)
from searchgym.agents.analysis import answer_type, keywords, parse_spec
from searchgym.agents.base import is_new_episode, parse_action, parse_information, parse_question
from searchgym.agents.heuristics import STRATEGIES, DiverseAgent, HeuristicAgent
from searchgym.agents.reader import Memory, Reader, extract_facts
from searchgym.agents.registry import HEURISTIC_NAMES, make_agent
from searchgym.agents.rollout import rollout, summarize
from searchgym.errors import ConfigError


@pytest.fixture(scope="module")
def vec():
    env = gym.make_vec("searchgym/SearchQA-v0", num_envs=16, vectorization_mode="vector_entry_point", split="train")
    yield env
    env.close()


def test_names_cover_the_issue():
    assert set(HEURISTIC_NAMES) >= {"question", "keywords", "entity", "rephrase", "decompose", "prf", "random",
                                    "diverse"}
    assert len(STRATEGIES) >= 7


@pytest.mark.parametrize("name", HEURISTIC_NAMES)
def test_every_heuristic_plays_valid_episodes(vec, name):
    agent = make_agent(name, seed=1)
    trajs = rollout(agent, vec, 12, progress=False)
    assert len(trajs) == 12
    for t in trajs:
        assert t.steps[-1].kind == "answer"  # the agent answered before the budget ran out
        assert all(s.kind in ("search", "answer") for s in t.steps)  # no invalid actions
        assert 1 <= t.num_searches <= 4
        assert t.agent == name
        assert t.prediction
        for s in t.steps:
            assert s.action.startswith("<think>")
    # one-hop questions are answerable by every strategy
    one_hop = [t for t in trajs if t.family in ("attribute", "yesno")]
    assert one_hop and sum(t.em for t in one_hop) / len(one_hop) >= 0.5


def test_decompose_solves_bridge_questions_well_above_chance(vec):
    world_env = vec.envs[0]
    bridge_ids = {ex.id for ex in world_env.examples if ex.family == "bridge"}
    trajs = rollout(HeuristicAgent("decompose"), vec, 60, progress=False, seed=3)
    bridge = [t for t in trajs if t.question_id in bridge_ids]
    assert len(bridge) >= 10
    em = sum(t.em for t in bridge) / len(bridge)
    assert em >= 0.7, em
    # it reads the bridge entity and searches for it: two or more searches per bridge question
    assert all(t.num_searches >= 2 for t in bridge if t.em)
    # the one-query strategy does not get there
    q = rollout(HeuristicAgent("question"), vec, 60, progress=False, seed=3)
    q_bridge = [t for t in q if t.question_id in bridge_ids]
    assert sum(t.em for t in q_bridge) / len(q_bridge) < em - 0.4


def test_strategies_issue_distinct_queries(vec):
    ex = next(e for e in vec.envs[0].examples if e.family == "bridge")
    first = {}
    for name in STRATEGIES:
        agent = HeuristicAgent(name, seed=0)
        prompt = f"Answer the given question. Question: {ex.question}\n"
        kind, q = parse_action(agent.act([prompt], [{}])[0])
        assert kind == "search" and q
        first[name] = q
    assert len(set(first.values())) >= 6, first
    assert first["question"] == ex.question
    assert "?" not in first["keywords"] and " the " not in f" {first['keywords']} "


def test_diverse_samples_strategies_with_weights_and_seed(vec):
    agent = DiverseAgent({"question": 3.0, "decompose": 1.0, "random": 0.0}, seed=7)
    trajs = rollout(agent, vec, 80, progress=False)
    assert set(agent.chosen) == {"question", "decompose"}  # weight 0 is never drawn
    share = agent.chosen["question"] / sum(agent.chosen.values())
    assert 0.55 <= share <= 0.92, agent.chosen
    assert len(trajs) == 80
    again = DiverseAgent({"question": 3.0, "decompose": 1.0, "random": 0.0}, seed=7)
    rollout(again, vec, 80, progress=False)
    assert again.chosen == agent.chosen  # seeded
    with pytest.raises(ConfigError, match="unknown strategies"):
        DiverseAgent({"nope": 1.0})


def test_agent_state_is_per_slot_and_resets():
    agent = HeuristicAgent("decompose")
    obs = ["Question: Who directed The Quiet Harbour?\n", "Question: In what year was Mara Quell born?\n"]
    a = agent.act(obs, [{}, {}])
    assert "The Quiet Harbour" in a[0] and "Mara Quell" in a[1]
    info = "\n\n<information>Doc 1(Title: \"The Quiet Harbour\") The Quiet Harbour was directed by Ivo Lannet." \
           "</information>\n\n"
    out = agent.act([info], [{"kind": "search"}], indices=[0])
    assert parse_action(out[0]) == ("answer", "Ivo Lannet")
    assert agent.state(1) is not None and agent.state(1).question.startswith("In what year")
    agent.reset([1])
    assert agent.state(1) is None and agent.state(0) is not None
    agent.reset()
    assert agent.state(0) is None


def test_parsers_on_search_r1_text():
    prompt = ("Answer the given question. You must conduct reasoning inside <think> and </think> ... For example, "
              "<answer> Beijing </answer>. Question: Who founded Kelto Works?\n")
    assert parse_question(prompt) == "Who founded Kelto Works?"
    assert parse_question("ignored", {"question": "From info?"}) == "From info?"
    assert parse_question("Question: Name the founder of Kelto Works.?\n") == "Name the founder of Kelto Works."
    assert is_new_episode(prompt, {}) and not is_new_episode("\n\n<information>x</information>", {})
    assert not is_new_episode(prompt, {"kind": "invalid"})
    docs = parse_information('\n\n<information>Doc 1(Title: "Kelto Works (history)") Kelto Works was founded by '
                             'Ana Berl. The company employs 1,200 people.\nDoc 2(Title: "Ana Berl") Ana Berl was '
                             'born in 1901.</information>\n\n')
    assert [d.title for d in docs] == ["Kelto Works (history)", "Ana Berl"]
    assert docs[1].text == "Ana Berl was born in 1901."
    facts = extract_facts(docs[0].title, docs[0].text)
    assert ("Kelto Works", "organisation.founder", "Ana Berl") in {(f.entity, f.relation, f.value) for f in facts}
    assert keywords("What is the capital of Foo?") == ["capital", "Foo"]
    assert answer_type("In what year was X born?") == "year" and answer_type("Is X in Y?") == "yes_no"


def test_world_question_grammar_parses_chains():
    spec = parse_spec("At what elevation in metres does the city where the director of Narrow Compass was born lie?")
    assert spec is not None and spec.kind == "ask" and spec.subject == "Narrow Compass"
    assert [c[0] for c in spec.chain] == ["film.director", "person.born_in", "city.elevation"]
    yn = parse_spec("Answer yes or no: Thaispirel Zanfowick worked as a journalist.")
    assert yn is not None and yn.kind == "yesno" and yn.obj == "journalist"
    cmp_ = parse_spec("Who was taller, Waisnoen Loard or Dias Testremar?")
    assert cmp_ is not None and cmp_.kind == "compare" and cmp_.other == "Dias Testremar"
    assert parse_spec("Who won the 1998 world cup?") is None


def test_span_reader_on_real_data_text():
    """Plain span scoring (no world grammar) on Wikipedia-like passages."""
    mem = Memory()
    mem.add(parse_information(
        '<information>Doc 1(Title: "Eiffel Tower") The Eiffel Tower was completed in 1889 in Paris. It was designed '
        'by the engineering company of Gustave Eiffel.\nDoc 2(Title: "Paris") Paris is the capital of France. '
        'It has a population of 2,102,650.</information>'))
    reader = Reader()
    assert reader.answer("When was the Eiffel Tower completed?", mem)[0] == "1889"
    assert reader.answer("What is the population of Paris?", mem)[0] == "2,102,650"
    assert reader.answer("Who designed the Eiffel Tower?", mem)[0] == "Gustave Eiffel"
    assert reader.answer("Is Paris the capital of France?", mem)[0] == "yes"


def test_summary_counts_families(vec):
    trajs = rollout(HeuristicAgent("entity"), vec, 20, progress=False)
    s = summarize(trajs)
    fams = collections.Counter(t.family for t in trajs)
    assert s["all"]["episodes"] == 20
    for f, c in fams.items():
        assert s[f]["episodes"] == c
    assert 0.0 <= s["all"]["recall"] <= 1.0 and s["all"]["invalid"] == 0.0


def test_single_env_rollout_and_samples():
    env = gym.make("searchgym/SearchQA-v0", split="dev")
    trajs = rollout(HeuristicAgent("random", seed=2), env, 3, samples=2, progress=False)
    assert len(trajs) == 6
    assert [t.question_id for t in trajs][::2] == [t.question_id for t in trajs][1::2]
    assert {t.extra["sample"] for t in trajs} == {0, 1}


def test_heuristics_respect_the_env_search_budget():
    env = gym.make("searchgym/SearchQA-v0", split="dev", max_turns=1)
    trajs = rollout(HeuristicAgent("decompose"), env, 6, progress=False)
    assert all(t.num_searches == 1 and t.steps[-1].kind == "answer" for t in trajs)
    env0 = gym.make("searchgym/SearchQA-v0", split="dev", max_turns=0)
    trajs = rollout(HeuristicAgent("prf"), env0, 3, progress=False)
    assert all(t.num_searches == 0 and [s.kind for s in t.steps] == ["answer"] for t in trajs)


class StackedInfoVec:
    """A vector env that offers only Gymnasium's standard API (stacked infos), as RayVectorEnv does."""

    def __init__(self, vec):
        self._vec = vec
        self.num_envs = vec.num_envs

    def reset(self, **kw):
        return self._vec.reset(**kw)

    def step(self, actions):
        return self._vec.step(actions)

    def get_attr(self, name):
        return self._vec.get_attr(name)

    def set_agent(self, *a):
        self._vec.set_agent(*a)

    def pop_finished_trajectories(self):
        return self._vec.pop_finished_trajectories()


def test_rollout_on_a_standard_api_vector_env(vec):
    direct = rollout(HeuristicAgent("decompose"), vec, 10, progress=False, seed=4)
    proxied = rollout(HeuristicAgent("decompose"), StackedInfoVec(vec), 10, progress=False, seed=4)
    key = lambda ts: sorted((t.question_id, t.prediction, t.num_searches) for t in ts)
    assert key(direct) == key(proxied)
