"""Token entropy by segment (reasoning / query / answer) and the forking-token share (issue 21 §3)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("transformers")

from searchgym.train.segments import FORKING_THRESHOLD, segment_entropy, tag_ids, token_segments


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from searchgym.train.tiny_lm import TinyLMConfig, create_tiny_lm, load_lm

    d = tmp_path_factory.mktemp("lm")
    cfg = TinyLMConfig(vocab_size=300, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32,
                       max_positions=128)
    text = ("Question: who founded the mill? <think> the mill </think> <search> mill founder </search>"
            " <answer> Ada </answer>")
    create_tiny_lm([text] * 4, d / "m", cfg, seed=0)
    return load_lm(d / "m")[1]


def test_segments_follow_the_tags_and_reset_at_observations(tok):
    opens, closes = tag_ids(tok)
    assert set(opens.values()) == {"reasoning", "query", "answer"} and len(closes) == 3

    def ids(text):
        return tok.encode(text, add_special_tokens=False)

    agent1 = ids("<think> the mill </think> <search> mill founder </search>")
    obs = ids(" <information> Ada founded it </information> ")
    agent2 = ids("<answer> Ada </answer>")
    seq = agent1 + obs + agent2
    mask = [1] * len(agent1) + [0] * len(obs) + [1] * len(agent2)
    segs = token_segments(seq, mask, opens, closes)
    assert segs[0] == "reasoning" and segs[len(agent1) - 1] == "query"
    assert set(segs[len(agent1):len(agent1) + len(obs)]) == {""}
    assert segs[len(agent1) + len(obs)] == "answer" and segs[-1] == "answer"
    # entropies: reasoning tokens high, the rest low -> per-segment means and the forking share
    ent = [2.0 if s == "reasoning" else 0.1 for s in segs]
    st = segment_entropy([SimpleNamespace(ids=seq, mask=mask, entropies=ent)], tok)
    assert st["token_entropy_reasoning"] == pytest.approx(2.0) and st["token_entropy_answer"] == pytest.approx(0.1)
    n_agent = sum(mask)
    assert st["forking_share"] == pytest.approx(segs.count("reasoning") / n_agent)
    assert 2.0 > FORKING_THRESHOLD > 0.1
    assert sum(st[f"token_share_{s}"] for s in ("reasoning", "query", "answer", "other")) == pytest.approx(1.0)
