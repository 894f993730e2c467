"""The figures each reader fixture reads to, for the regression test (``test_diversity_readers_golden.py``).

``python tests/readers_golden.py OUT.json`` writes them with whatever ``searchgym`` is on the path: it was run
once on the tree before the generic reader, so that the test holds every file that read then to the same
figures (episodes, queries, evidence, titles, question, reward, success, step, read statistics).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent / "fixtures" / "diversity"
CASES: list[tuple[str, dict[str, Any]]] = [
    (str(p.relative_to(HERE)), {}) for sub in ("wild", "structural")
    for p in sorted((HERE / sub).iterdir())] + [
    ("verl_rollouts", {}), ("search_r1_dump.jsonl", {}),
    ("generic_queries.jsonl", {"text_field": "gen.queries", "step_field": "iter",
                               "question_field": "meta.question"}),
    ("wild/custom_tags.jsonl", {"query_tags": ("<query>", "</query>")}),
]


def figures(rel: str, kw: dict[str, Any]) -> dict[str, Any]:
    from searchgym.diversity.readers import read_run
    from searchgym.errors import SearchGymError

    try:
        run = read_run(HERE / rel, **kw)
    except SearchGymError as exc:
        return {"error": type(exc).__name__}
    st = run.read_stats.to_dict()
    st.pop("notes")
    eps = [{"queries": e.queries, "turns": e.turns, "evidence": e.evidence, "titles": e.titles,
            "question": e.question, "reward": e.reward, "success": e.success, "step": e.step,
            "malformed": e.malformed, "answer": e.answer, "series": e.series} for e in run.episodes]
    return {"fmt": run.fmt, "stats": st, "episodes": eps}


def all_figures() -> dict[str, Any]:
    return {f"{rel} {json.dumps(kw, sort_keys=True)}": figures(rel, kw) for rel, kw in CASES}


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(json.dumps(all_figures(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
