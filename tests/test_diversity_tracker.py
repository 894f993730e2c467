"""The online DiversityTracker."""

from __future__ import annotations

import json
import math

import pytest

from searchgym.diversity import DiversityTracker
from searchgym.errors import ConfigError
from searchgym.trajectory import Step, Trajectory

TEMPLATES = ["who directed {e}", "{e} director", "director of the film {e}", "{e} film crew",
             "when was {e} released"]
FILMS = ["Ravenhill", "Port Elsin", "Castamere", "Oren Vale", "Dunmore", "Hollow Pines", "Greywater", "Sablecrest"]


def _traj(i: int, queries: list[str], film: str, *, titles: list[list[str]] | None = None) -> Trajectory:
    steps = [Step(action=f"<search>{q}</search>", kind="search", query=q, doc_ids=[f"d{i}", f"d{i + 1}"],
                  extra={"titles": titles[j]} if titles else {}) for j, q in enumerate(queries)]
    steps.append(Step(action="<answer>x</answer>", kind="answer", reward=1.0))
    return Trajectory(episode_id=str(i), question_id=film, question=f"Who directed {film}?", answers=["x"],
                      steps=steps, reward=float(i % 2), num_searches=len(queries))


def _batch(n_templates: int, n: int = 40) -> list[Trajectory]:
    return [_traj(i, [TEMPLATES[i % n_templates].format(e=FILMS[i % len(FILMS)])], FILMS[i % len(FILMS)])
            for i in range(n)]


def test_update_returns_flat_metrics_and_logs_jsonl(tmp_path):
    tr = DiversityTracker(log_dir=tmp_path, tensorboard=False)
    m = tr.update(0, _batch(5), token_entropies=[[0.0, 0.5], [2.0]])
    assert m["diversity/slot/entropy"] == pytest.approx(math.log(5))
    assert m["diversity/slot/effective_number"] == pytest.approx(5.0)
    assert m["diversity/string/n_templates"] == 40.0  # (template, film) pairs: lcm(5, 8) = 40
    # each film is asked 5 times (i = f, f+8, ...), once with each of the 5 templates
    assert m["diversity/slot/first_query_within_entropy"] == pytest.approx(math.log(5))
    assert m["policy/token_entropy_mean"] == pytest.approx(2.5 / 3)
    assert m["policy/reward_mean"] == pytest.approx(0.5)
    assert m["alarm/collapse"] == 0.0
    assert all(isinstance(v, float) for v in m.values())
    tr.update(1, [t.to_dict() for t in _batch(5)])  # dicts are accepted too
    tr.close()
    lines = [json.loads(x) for x in (tmp_path / "diversity.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [0, 1]
    assert lines[0]["diversity/slot/entropy"] == pytest.approx(math.log(5))


def test_collapse_alarm_threshold_is_respected():
    tr = DiversityTracker(alarm_fraction=0.5)
    tr.update(0, _batch(5))
    m1 = tr.update(1, _batch(3))      # log 3 = 1.10 >= 0.5 * log 5 = 0.80
    m2 = tr.update(2, _batch(2))      # log 2 = 0.69 <  0.80
    m3 = tr.update(3, _batch(1))      # 0
    assert (m1["alarm/collapse"], m2["alarm/collapse"], m3["alarm/collapse"]) == (0.0, 1.0, 1.0)
    assert [a["step"] for a in tr.alarms] == [2, 3]
    assert tr.alarms[0]["level"] == "slot" and tr.alarms[0]["baseline"] == pytest.approx(math.log(5))
    assert m2["alarm/entropy_ratio"] == pytest.approx(math.log(2) / math.log(5))
    s = tr.summary()
    assert s["updates"] == 4 and len(s["alarms"]) == 2
    assert s["levels"]["slot"]["top_templates"][0][0] == "who directed <E>"


def test_moves_and_process_metrics_from_trajectories():
    tr = DiversityTracker(levels=("slot",))
    trajs = [_traj(i, ["Ravenhill director", "Ravenhill director", "Mara Quill biography"], "Ravenhill",
                   titles=[["Ravenhill (film)", "Mara Quill"], ["Ravenhill (film)"], ["Mara Quill"]])
             for i in range(4)]
    m = tr.update(0, trajs)
    assert m["diversity/moves/repeat"] == pytest.approx(0.5)
    assert m["diversity/moves/new_hop"] == pytest.approx(0.5)   # "mara quill" came from retrieved titles
    assert m["diversity/process/duplicate_query_rate"] == pytest.approx(1 / 3)
    assert m["diversity/process/queries_per_episode"] == pytest.approx(3.0)
    assert 0 <= m["diversity/process/new_document_yield"] <= 1
    # third query: new terms mara, quill, biography; the first two were in the retrieved titles
    assert m["diversity/process/ctar"] == pytest.approx(2 / 3)


def test_bad_configuration_is_a_typed_error():
    with pytest.raises(ConfigError):
        DiversityTracker(levels=("nope",))
    with pytest.raises(ConfigError):
        DiversityTracker(alarm_fraction=1.5)
    with pytest.raises(ConfigError):
        DiversityTracker().update(0, ["not a trajectory"])


def test_semantic_level_with_a_given_embedder():
    # a deterministic bag-of-letters embedder: near-identical strings share a cluster
    import numpy as np

    def embed(texts):
        out = np.zeros((len(texts), 26))
        for i, t in enumerate(texts):
            for ch in t:
                if "a" <= ch <= "z":
                    out[i, ord(ch) - 97] += 1
        return out

    tr = DiversityTracker(levels=("string", "semantic"), embedder=embed, semantic_threshold=0.05)
    trajs = [_traj(0, ["ravenhill director"], "R"), _traj(1, ["director ravenhill"], "R"),
             _traj(2, ["zzz qqq"], "Z")]
    m = tr.update(0, trajs)
    assert m["diversity/semantic/n_templates"] == 2.0
    assert m["diversity/string/n_templates"] == 3.0


def test_tracker_logs_the_core_names_and_rarefies_to_a_fixed_size():
    tr = DiversityTracker(levels=("slot",), rarefy_n=20, n_boot=30)
    m = tr.update(0, _batch(5))           # 40 queries, taken at 20
    assert m["diversity/slot/n"] == 20.0
    assert m["diversity/slot/entropy_ci_low"] <= m["diversity/slot/entropy"] <= m["diversity/slot/entropy_ci_high"]
    assert m["diversity/slot/entropy"] <= math.log(5) + 1e-9
    assert m["diversity/slot/effective_number"] == pytest.approx(math.exp(m["diversity/slot/entropy"]))
    assert m["diversity/strategy/share/entity+relation"] + m["diversity/strategy/share/copy-question"] \
        + m["diversity/strategy/share/question-fragment"] + m["diversity/strategy/share/rephrase"] > 0.99
    assert m["diversity/grounded_share"] == 1.0 and m["diversity/well_formed/slot/n"] == 20.0
    assert "diversity/slot/mi_question" in m
    small = tr.update(1, _batch(5, n=10))  # fewer queries than rarefy_n: all of them, and n says so
    assert small["diversity/slot/n"] == 10.0
    assert tr.last_stats is not None and tr.last_stats.n_queries == 10
    with pytest.raises(ConfigError):
        DiversityTracker(rarefy_n=0)
