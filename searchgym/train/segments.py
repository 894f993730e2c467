"""Token entropy by segment of the agent's text: reasoning (``<think>``), query (``<search>``), answer
(``<answer>``), and the share of high-entropy "forking" tokens (issue 21 §3).

The two-phase view of RL on reasoning models separates planning tokens (here: reasoning and the choice of query)
from execution tokens; "Beyond the 80/20 rule" (Wang et al. 2025) found that the high-entropy minority of
tokens, the forks where the text branches, carries RL's learning signal, with the 80th percentile of token
entropy at about 0.672 nats in their runs: :data:`FORKING_THRESHOLD`.

A segment opens at its tag token and closes after its closing tag; agent tokens outside any tag and the tags'
neighbours are ``other``. Tags must be single tokens of the tokenizer (the tiny LM's grammar tokens are); for a
tokenizer that splits them, every agent token is ``other``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

SEGMENTS = ("reasoning", "query", "answer", "other")
FORKING_THRESHOLD = 0.672
_OPEN = {"<think>": "reasoning", "<search>": "query", "<answer>": "answer"}
_CLOSE = ("</think>", "</search>", "</answer>")


def tag_ids(tokenizer: Any) -> tuple[dict[int, str], set[int]]:
    """``({opening tag id: segment}, {closing tag ids})`` for the tags that are single tokens."""
    opens: dict[int, str] = {}
    closes: set[int] = set()
    for tag, seg in _OPEN.items():
        ids = tokenizer.encode(tag, add_special_tokens=False)
        if len(ids) == 1:
            opens[int(ids[0])] = seg
    for tag in _CLOSE:
        ids = tokenizer.encode(tag, add_special_tokens=False)
        if len(ids) == 1:
            closes.add(int(ids[0]))
    return opens, closes


def token_segments(ids: Sequence[int], mask: Sequence[int], opens: dict[int, str], closes: set[int]) -> list[str]:
    """The segment of every position (``""`` off the agent's tokens)."""
    out: list[str] = []
    cur = "other"
    for t, m in zip(ids, mask):
        if not m:
            cur = "other"  # an observation or the prompt ends whatever the agent had open
            out.append("")
            continue
        if t in opens:
            cur = opens[t]
        out.append(cur)
        if t in closes:
            cur = "other"
    return out


def segment_entropy(episodes: Sequence[Any], tokenizer: Any,
                    threshold: float = FORKING_THRESHOLD) -> dict[str, float]:
    """Mean token entropy per segment over the episodes' agent tokens (NaN-free: absent segments are left out),
    each segment's share of the agent tokens, and ``forking_share``: the share with entropy > ``threshold``."""
    opens, closes = tag_ids(tokenizer)
    by: dict[str, list[float]] = {s: [] for s in SEGMENTS}
    for e in episodes:
        for seg, h in zip(token_segments(e.ids, e.mask, opens, closes), e.entropies):
            if seg:
                by[seg].append(float(h))
    n = sum(len(v) for v in by.values())
    out: dict[str, float] = {}
    for s, v in by.items():
        if v:
            out[f"token_entropy_{s}"] = float(np.mean(v))
        out[f"token_share_{s}"] = len(v) / n if n else 0.0
    allh = [h for v in by.values() for h in v]
    out["forking_share"] = float(np.mean([h > threshold for h in allh])) if allh else 0.0
    return out


__all__ = ["FORKING_THRESHOLD", "SEGMENTS", "segment_entropy", "tag_ids", "token_segments"]
