"""Agents: heuristic query strategies, a Hugging Face causal-LM policy and an OpenAI-compatible policy.

All agents follow one protocol (:class:`searchgym.agents.base.Agent`): batched
``act(observations, infos) -> actions`` in the environment's text grammar, plus ``reset(indices)``.
Heavy modules (torch, transformers, httpx) load only when the agent that needs them is used.
The rollout loop is ``from searchgym.agents.rollout import rollout`` (``searchgym.agents.rollout`` is the module).
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "Agent": "searchgym.agents.base",
    "parse_question": "searchgym.agents.base",
    "parse_information": "searchgym.agents.base",
    "GenerationOutput": "searchgym.agents.lm",
    "generate": "searchgym.agents.lm",
    "load_model_and_tokenizer": "searchgym.agents.lm",
    "LMAgent": "searchgym.agents.lm",
    "OpenAIAgent": "searchgym.agents.openai",
    "HeuristicAgent": "searchgym.agents.heuristics",
    "DiverseAgent": "searchgym.agents.heuristics",
    "STRATEGIES": "searchgym.agents.heuristics",
    "Reader": "searchgym.agents.reader",
    "make_agent": "searchgym.agents.registry",
    "available_agents": "searchgym.agents.registry",
    "summarize": "searchgym.agents.rollout",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'searchgym.agents' has no attribute {name!r}")
