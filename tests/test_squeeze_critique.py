"""The environment's critique of a failed episode (Critique-GRPO arm, issue 21 §4): built only from what the env
knows, in a fixed order of precedence."""

from __future__ import annotations

from types import SimpleNamespace as NS

from searchgym.data.qa import QAExample
from searchgym.experiments.squeeze.critique import critique_kind, critique_question


def _traj(*steps):
    return NS(steps=list(steps))


def _step(kind="search", query="", gold=None):
    return NS(kind=kind, query=query, queries=[query] if query else [], gold_hit=gold)


NAMED = QAExample("q1", "Who founded Corvale Mills?", ["Ada Brand"], metadata={"subject": ["Corvale Mills"]})
NICK = QAExample("q2", "Who founded the Amber Heron?", ["Ada Brand"],
                 metadata={"subject": ["Corvale Mills"], "alias": "the Amber Heron"})


def test_critique_kinds():
    assert critique_kind(_traj(_step("invalid"), _step(query="x", gold=True)), NAMED) == "malformed"
    assert critique_kind(_traj(_step(query="Corvale Mills founder", gold=False)), NAMED) == "no_gold"
    assert critique_kind(_traj(_step(query="Corvale Mills founder", gold=True)), NAMED) == "wrong_answer"
    # a nickname question: unresolved unless some query names the real subject
    assert critique_kind(_traj(_step(query="Amber Heron founder", gold=False)), NICK) == "nickname"
    assert critique_kind(_traj(_step(query="Amber Heron", gold=False), _step(query="Corvale Mills founder", gold=True)),
                         NICK) == "wrong_answer"


def test_critique_question_keeps_the_gold():
    ex = critique_question(NICK, "nickname")
    assert ex.id == NICK.id and ex.answers == NICK.answers and ex.question.startswith(NICK.question)
    assert "nickname" in ex.question[len(NICK.question):]
