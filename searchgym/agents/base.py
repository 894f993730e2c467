"""The Agent protocol and the text helpers every agent shares.

An agent is batched and stateful per env slot: ``act(observations, infos)`` gets one observation (and
info dict) per slot and returns one raw action per slot in the environment's text grammar
(``<search>q</search>`` / ``<answer>a</answer>``). Slot ``i`` is position ``i`` of the batch, or
``indices[i]`` when the caller passes ``indices`` (a subset of slots). ``reset(indices)`` forgets the
episodes of those slots (all slots when ``None``); a fresh prompt observation also starts a new episode.

Agents read everything from the observation text (the question from the prompt, the passages from the
``<information>`` block), using ``info`` only as a shortcut, so they also work on remote or foreign envs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Agent(Protocol):
    name: str

    def act(self, observations: Sequence[str], infos: Sequence[dict] | None = None) -> list[str]: ...

    def reset(self, indices: Sequence[int] | None = None) -> None: ...


# --------------------------------------------------------------------------------------------------
# Parsing the environment's text


_INFO_RE = re.compile(r"<information>(.*?)(?:</information>|$)", re.DOTALL)
# "Doc 1(Title: t) text" (Search-R1); also "Doc 1 (Title: t)\ntext" (verl tool) and "Doc 1: text" (SkyRL).
_DOC_RE = re.compile(r"Doc\s*(\d+)\s*(?:\(Title:\s*(\"[^\"\n]*\"|[^\n]*?)\)(?=\s|$)\s*|:\s*)"
                     r"(.*?)(?=\n?Doc\s*\d+\s*[(:]|\Z)", re.DOTALL)
_QUESTION_RES = (
    re.compile(r"Question:\s*(.+?)\s*(?:\n|$)", re.DOTALL),
    re.compile(r"question\s*(?:is)?\s*[:：]\s*(.+?)\s*(?:\n|$)", re.IGNORECASE | re.DOTALL),
)


@dataclass(frozen=True)
class RetrievedDoc:
    rank: int
    title: str
    text: str


def _clean_question(q: str) -> str:
    q = q.strip()
    # prompt templates that always append "?" turn "Name the X of Y." into "Name the X of Y.?"
    return re.sub(r"([.?!])\?+$", r"\1", q)


def parse_question(observation: str, info: dict | None = None) -> str:
    """The question of an episode: ``info["question"]`` when present, else the prompt's ``Question:`` line."""
    if info:
        q = info.get("question")
        if isinstance(q, str) and q.strip():
            return q.strip()
    for rx in _QUESTION_RES:
        found = rx.findall(observation)
        if found:
            return _clean_question(found[-1])
    lines = [ln.strip() for ln in observation.strip().splitlines() if ln.strip()]
    qs = [ln for ln in lines if ln.endswith("?")]
    return (qs[-1] if qs else (lines[-1] if lines else "")).strip()


def parse_information(observation: str) -> list[RetrievedDoc]:
    """The passages of an ``<information>`` block (empty when there is none)."""
    docs: list[RetrievedDoc] = []
    for block in _INFO_RE.findall(observation):
        block = block.strip()
        if block.startswith("{") and '"result"' in block:  # SkyRL / verl JSON-wrapped results
            try:
                import json

                block = json.loads(block)["result"]
            except (ValueError, KeyError, TypeError):
                pass
        for m in _DOC_RE.finditer(block):
            title = (m.group(2) or "").strip().strip('"').strip()
            text = m.group(3).strip()
            if not title and "\n" in text:  # "Doc 1: "Title"\ntext" (contents form)
                first, rest = text.split("\n", 1)
                title, text = first.strip().strip('"'), rest.strip()
            docs.append(RetrievedDoc(rank=int(m.group(1)), title=title, text=text))
    return docs


def is_new_episode(observation: str, info: dict | None = None) -> bool:
    """Whether an observation is the prompt of a fresh episode (rather than a step's feedback)."""
    info = info or {}
    if "kind" in info:
        return False
    if "question_id" in info or "question" in info:
        return True
    head = observation.lstrip()
    return not (head.startswith("<information>") or "previous action is invalid" in head.lower())


def search_action(query: str, think: str | None = None) -> str:
    query = " ".join(query.replace("<", " ").replace(">", " ").split())
    pre = f"<think>{think}</think>\n" if think else ""
    return f"{pre}<search> {query} </search>"


def answer_action(answer: str, think: str | None = None) -> str:
    answer = " ".join(answer.replace("<", " ").replace(">", " ").split())
    pre = f"<think>{think}</think>\n" if think else ""
    return f"{pre}<answer> {answer} </answer>"


_SEARCH_RE = re.compile(r"<search>(.*?)</search>", re.DOTALL)
_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def parse_action(action: str) -> tuple[str, str | None]:
    """``("search", q)``, ``("answer", a)`` or ``("invalid", None)`` (first tag wins, as in Search-R1)."""
    m = re.search(r"<(search|answer)>(.*?)</\1>", action, re.DOTALL)
    if not m:
        return "invalid", None
    return m.group(1), m.group(2).strip()


def batch_indices(n: int, indices: Sequence[int] | None) -> list[int]:
    if indices is None:
        return list(range(n))
    idx = [int(i) for i in indices]
    if len(idx) != n:
        raise ValueError(f"got {n} observations but {len(idx)} indices")
    return idx


def infos_or_empty(infos: Sequence[Any] | None, n: int) -> list[dict]:
    if infos is None:
        return [{} for _ in range(n)]
    return [dict(i) if isinstance(i, dict) else {} for i in infos]
