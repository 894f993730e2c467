"""Agent names -> agents: the heuristic strategies by name, an HF model by path/hub name, or an OpenAI server."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from searchgym.errors import ConfigError

# every strategy of searchgym.agents.heuristics.STRATEGIES, and the mix of them (a test keeps the two equal)
HEURISTIC_NAMES = ("question", "keywords", "entity", "rephrase", "decompose", "hops", "prf", "random", "diverse")


def available_agents() -> list[str]:
    """The heuristic agent names (``make_agent`` also takes a model path, ``hf:NAME`` or an OpenAI server)."""
    return list(HEURISTIC_NAMES)


def _is_model_ref(spec: str) -> bool:
    return spec.startswith("hf:") or Path(spec).expanduser().exists() or ("/" in spec and " " not in spec)


def make_agent(
    spec: str,
    *,
    seed: int = 0,
    base_url: str | None = None,
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_new_tokens: int = 64,
    device: str = "cpu",
    dtype: str | None = None,
    trust_remote_code: bool = False,
    weights: dict[str, float] | None = None,
    think: bool = True,
    **kwargs: Any,
) -> Any:
    """Build an agent from a name.

    - a heuristic strategy name (``question``, ``keywords``, ``entity``, ``rephrase``, ``decompose``,
      ``hops``, ``prf``, ``random``) or ``diverse`` (``weights`` picks the mix);
    - with ``base_url``: an :class:`~searchgym.agents.openai.OpenAIAgent` for model ``spec`` on that server;
    - a local model directory, ``org/name`` or ``hf:name``: an :class:`~searchgym.agents.lm.LMAgent`.

    An unknown name raises :class:`ConfigError` listing the available names.
    """
    from searchgym.agents.heuristics import STRATEGIES, DiverseAgent, HeuristicAgent

    if base_url:
        from searchgym.agents.openai import OpenAIAgent

        return OpenAIAgent(base_url, spec, temperature=temperature, top_p=top_p, max_tokens=max_new_tokens,
                           seed=seed, **kwargs)
    if spec == "diverse":
        return DiverseAgent(weights, seed=seed, think=think)
    if spec in STRATEGIES:
        return HeuristicAgent(spec, seed=seed, think=think)
    if _is_model_ref(spec):
        from searchgym.agents.lm import LMAgent

        name = spec.removeprefix("hf:")
        return LMAgent(name, device=device, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
                       trust_remote_code=trust_remote_code, dtype=dtype, seed=seed)
    close = difflib.get_close_matches(spec, HEURISTIC_NAMES, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ConfigError(
        f"unknown agent {spec!r}.{hint} Available agents: {', '.join(HEURISTIC_NAMES)}; or a Hugging Face model "
        f"(a local directory, org/name or hf:name), or a model served by an OpenAI-compatible server "
        f"(--base-url URL).")
