"""Strategy classes on hand-written queries (every class at least once), word sources, question copying."""

from __future__ import annotations

import pytest

from searchgym.diversity.strategy import (
    GROUNDED,
    STRATEGIES,
    EvidenceContext,
    classify,
    episode_strategies,
    is_malformed,
)

Q = "Who wrote the novel Ravenhill?"
EVIDENCE = ["Ravenhill is a novel by Jure Pemstanov, published in 1990 in Muzland."]
TITLES = ["Ravenhill (novel)"]

CASES = [
    ("Who wrote the novel Ravenhill?", "copy-question"),
    ("who wrote the novel ravenhill", "copy-question"),
    ("who wrote the novel Ravenhill wikipedia", "copy-question"),  # 5 of its 6 tokens, all 5 of the question's
    ("the novel Ravenhill who wrote", "copy-question"),  # reordered
    ("novel Ravenhill wrote", "question-fragment"),  # keywords: 3 of the question's 5 tokens, no copy
    ("who wrote the novel Ravenhill wikipedia page text", "entity+relation"),  # 5 of 8 own tokens: no copy
    ("novel Ravenhill", "question-fragment"),
    ("wrote ravenhill", "question-fragment"),
    ("Ravenhill", "entity-lookup"),
    ("the Ravenhill", "entity-lookup"),
    ("Ravenhill author", "entity+relation"),
    ("ravenhill publication date", "entity+relation"),
    ("Jure Pemstanov birthplace", "bridge"),
    ("where was jure pemstanov born", "bridge"),
    ("author of the novel", "rephrase"),
    ("capital of France", "off-task"),
    ("Kubearwick population", "off-task"),
    ("", "malformed"),
    ("   ", "malformed"),
    ('<tool_call>{"name": "search", "arguments": {"query": "x"}}</tool_call>', "malformed"),
    ("ravenhill " * 20, "malformed"),
    (" ".join(f"w{i}" for i in range(40)), "malformed"),
    ("?? -- 1990 !!", "malformed"),
]


@pytest.mark.parametrize(("query", "want"), CASES)
def test_strategy_classes_on_hand_written_queries(query, want):
    ev = EvidenceContext()
    ev.add(EVIDENCE, TITLES)
    assert classify(query, Q, ev).strategy == want


def test_every_class_is_exercised():
    assert {w for _, w in CASES} == set(STRATEGIES)
    assert GROUNDED == set(STRATEGIES) - {"off-task", "malformed"}


def test_word_sources_and_copy_flag():
    ev = EvidenceContext()
    ev.add(EVIDENCE, TITLES)
    s = classify("Jure Pemstanov birthplace", Q, ev)
    assert s.from_question == 0.0 and s.from_evidence == pytest.approx(2 / 3)
    assert s.from_neither == pytest.approx(1 / 3) and not s.copies_question
    c = classify("who wrote the novel ravenhill", Q, ev)
    assert c.copies_question and c.from_question == 1.0
    # a fragment holds < 80% of the question's tokens: not a copy
    assert not classify("novel Ravenhill", Q, ev).copies_question


def test_bridge_needs_evidence_retrieved_earlier():
    # without evidence the same name is off-task (it is neither in the question nor retrieved)
    assert classify("Jure Pemstanov birthplace", Q, None).strategy == "off-task"
    # parallel queries of one turn do not see each other's results
    got = episode_strategies(["Ravenhill author", "Jure Pemstanov", "Jure Pemstanov born"], Q,
                             evidence=[EVIDENCE, [], []], titles=[TITLES, [], []], turns=[0, 0, 1])
    assert [g.strategy for g in got] == ["entity+relation", "off-task", "bridge"]


def test_malformed_detector_keeps_ordinary_queries():
    for q in ("who wrote Ravenhill", "population of Muzland in 1990", "Émile Zola", "AT&T founder", "C++ creator"):
        assert not is_malformed(q), q
