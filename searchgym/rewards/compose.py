"""Reward terms by name, and their composition into one episode reward.

A reward spec may be:

- a name: ``"em"`` (default), ``"sub_em"``, ``"f1"``, ``"format"``, ``"search_cost"``, ``"retrieval_hit"``;
- an expression over names: ``"em + 0.2*format - 0.05*search_cost"``;
- a list of specs (summed) or a dict ``{name: weight}``;
- a callable ``fn(ctx: RewardContext) -> float``, or ``fn(prediction, answers) -> float`` (Search-R1's
  ``compute_score`` shape; detected from the signature);
- a :class:`Reward` object.

A name used without a weight gets its default weight (``search_cost`` counts searches and defaults to
-0.05 per search; ``format`` 0.1; ``retrieval_hit`` 0.2); ``- name`` always subtracts.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from searchgym.errors import ConfigError
from searchgym.rewards.shaping import RewardContext, format_term, retrieval_hit_term, search_count_term

TermFn = Callable[[RewardContext], float]

# name -> (term function, default weight)
REWARD_TERMS: dict[str, tuple[TermFn, float]] = {
    "em": (lambda c: float(c.exact_match()), 1.0),
    "sub_em": (lambda c: float(c.substring_match()), 1.0),
    "f1": (lambda c: c.token_f1(), 1.0),
    "format": (format_term, 0.1),
    "search_cost": (search_count_term, -0.05),
    "retrieval_hit": (retrieval_hit_term, 0.2),
}


def register_reward(name: str, fn: TermFn, weight: float = 1.0) -> None:
    """Make ``name`` usable in reward specs (``reward="name"``) with a default weight."""
    if not callable(fn):
        raise ConfigError(f"reward term {name!r} must be callable, got {type(fn).__name__}")
    REWARD_TERMS[name] = (fn, float(weight))


def _adapt_callable(fn: Callable[..., Any]) -> TermFn:
    """Accept ``fn(ctx)`` or ``fn(prediction, answers)``."""
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    except (TypeError, ValueError):
        params = []
    if len(params) >= 2:
        return lambda c: float(fn(c.prediction, c.answers))
    return lambda c: float(fn(c))


_TERM_RE = re.compile(r"\s*([+-])?\s*(?:(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+)\s*\*\s*)?([A-Za-z_]\w*)\s*")


class Reward:
    """A weighted sum of named terms. ``reward(ctx)`` returns the total; ``reward.parts(ctx)`` each term."""

    def __init__(self, terms: Sequence[tuple[str, float, TermFn]]):
        if not terms:
            raise ConfigError("a reward needs at least one term")
        self.terms = list(terms)
        self.names = [n for n, _, _ in self.terms]

    def parts(self, ctx: RewardContext) -> dict[str, float]:
        return {name: float(fn(ctx)) for name, _, fn in self.terms}

    def __call__(self, ctx: RewardContext) -> float:
        return float(sum(w * fn(ctx) for _, w, fn in self.terms))

    def __repr__(self) -> str:
        return "Reward(" + " + ".join(f"{w:g}*{n}" for n, w, _ in self.terms) + ")"


def _named(name: str, weight: float | None) -> tuple[str, float, TermFn]:
    try:
        fn, default = REWARD_TERMS[name]
    except KeyError:
        raise ConfigError(
            f"unknown reward term {name!r}; choose from {sorted(REWARD_TERMS)}, pass a callable, "
            "or register one with searchgym.rewards.register_reward") from None
    return name, default if weight is None else float(weight), fn


def _parse_expr(spec: str) -> list[tuple[str, float, TermFn]]:
    out, pos = [], 0
    spec = spec.strip()
    while pos < len(spec):
        m = _TERM_RE.match(spec, pos)
        if not m or m.end() == pos or (out and m.group(1) is None):
            raise ConfigError(f"cannot parse reward spec {spec!r} at position {pos}; "
                              "write e.g. 'em + 0.2*format - 0.05*search_cost'")
        sign, weight, name = m.groups()
        if weight is None:
            # A bare name keeps its default weight; "- name" always subtracts (a cost stays a cost).
            default = REWARD_TERMS.get(name, (None, 1.0))[1]
            out.append(_named(name, -abs(default) if sign == "-" else None))
        else:
            out.append(_named(name, -float(weight) if sign == "-" else float(weight)))
        pos = m.end()
    return out


def make_reward(spec: Any = "em") -> Reward:
    """Build a :class:`Reward` from a spec (see the module docstring)."""
    if spec is None:
        spec = "em"
    if isinstance(spec, Reward):
        return spec
    if isinstance(spec, str):
        return Reward(_parse_expr(spec))
    if isinstance(spec, Mapping):
        return Reward([_named(str(k), v) for k, v in spec.items()])
    if callable(spec):
        name = getattr(spec, "__name__", "custom")
        return Reward([(name, 1.0, _adapt_callable(spec))])
    if isinstance(spec, Sequence):
        terms: list[tuple[str, float, TermFn]] = []
        for item in spec:
            terms.extend(make_reward(item).terms)
        return Reward(terms)
    raise ConfigError(f"reward must be a name, expression, list, dict or callable, got {type(spec).__name__}")
