"""The environment's critique of a failed episode, and the refinement attempts of the LM's ``grpo_critique`` arm
(Critique-GRPO, arXiv 2506.03106; issue 21 §4).

A critique is built only from what the environment knows about the episode: an invalid action, whether a
supporting (gold) passage was ever retrieved, and whether the question names its subject by a nickname that no
query resolved. The refinement poses the same question with the critique appended (``reset(options=
{"example": ...})``); the reward still compares the answer with the gold answers. Both attempts enter the GRPO
group (:func:`searchgym.train.rl.train_rl`'s ``refine``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

CRITIQUES = {
    "malformed": "your action was malformed; write one plain query between <search> and </search>.",
    "nickname": "the subject is a nickname that was never resolved; search for the nickname first to learn whose "
                "nickname it is, then search for that name.",
    "no_gold": "no passage you retrieved contains the answer; search for the question's entity with the relation.",
    "wrong_answer": "a passage you retrieved contains the answer, but your answer was wrong; read it again.",
}


def critique_kind(trajectory: Any, example: Any) -> str:
    """Which critique a failed episode gets (a key of :data:`CRITIQUES`)."""
    steps = list(trajectory.steps)
    if any(s.kind == "invalid" for s in steps):
        return "malformed"
    meta = example.metadata or {}
    if meta.get("alias"):
        names = [str(n).lower() for n in meta.get("subject") or []]
        queries = " ".join(q for s in steps for q in (s.queries or ([s.query] if s.query else []))).lower()
        if not any(n and n in queries for n in names):
            return "nickname"
    if any(s.gold_hit for s in steps):
        return "wrong_answer"
    return "no_gold"


def critique_question(example: Any, kind: str) -> Any:
    """The example posed again with the critique appended to its question."""
    return replace(example, question=f"{example.question} (Feedback on an earlier attempt: {CRITIQUES[kind]})")


def critique_refiner(examples: Iterable[Any]) -> Callable[[int, list[Any]], list[tuple[int, dict]]]:
    """``refine(step, episodes)`` for :func:`~searchgym.train.rl.train_rl`: one refinement per failed episode."""
    by_id = {ex.id: ex for ex in examples}

    def refine(step: int, episodes: list[Any]) -> list[tuple[int, dict]]:
        out = []
        for i, e in enumerate(episodes):
            ex = by_id.get(e.trajectory.question_id)
            if e.em > 0 or ex is None:
                continue
            out.append((i, {"example": critique_question(ex, critique_kind(e.trajectory, ex))}))
        return out

    return refine


__all__ = ["CRITIQUES", "critique_kind", "critique_question", "critique_refiner"]
