"""Agreement of the strategy classes with hand labels (issue 20 §2): accuracy and Cohen's kappa.

    python scripts/strategy_agreement.py [tests/fixtures/diversity/labelled_queries.json] [--confusion]

Each group of the file is a question, the evidence retrieved earlier in the episode, and queries with the
class a careful reader gives them. Prints n, agreement, Cohen's kappa, and per class precision / recall.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from searchgym.diversity.strategy import STRATEGIES, EvidenceContext, classify

DEFAULT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "diversity" / "labelled_queries.json"


def cohen_kappa(a: list[str], b: list[str]) -> float:
    n = len(a)
    po = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    pe = sum(ca[k] * cb[k] for k in set(ca) | set(cb)) / (n * n)
    return (po - pe) / (1 - pe) if pe < 1 else 1.0


def score(path: Path = DEFAULT) -> dict:
    data = json.loads(path.read_text(encoding="utf-8"))
    gold, pred, rows = [], [], []
    for g in data["groups"]:
        ctx = EvidenceContext()
        ctx.add(g["ev"], [])
        for query, label in g["items"]:
            got = classify(query, g["q"], ctx).strategy
            gold.append(label)
            pred.append(got)
            rows.append((g["q"], query, label, got))
    n = len(gold)
    per = {}
    for c in STRATEGIES:
        tp = sum(1 for x, y in zip(gold, pred) if x == c and y == c)
        ng, np_ = gold.count(c), pred.count(c)
        if ng or np_:
            per[c] = {"gold": ng, "predicted": np_, "precision": tp / np_ if np_ else None,
                      "recall": tp / ng if ng else None}
    return {"n": n, "agreement": sum(x == y for x, y in zip(gold, pred)) / n, "kappa": cohen_kappa(gold, pred),
            "per_class": per, "disagreements": [r for r in rows if r[2] != r[3]]}


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    res = score(Path(args[0]) if args else DEFAULT)
    print(f"n = {res['n']} hand-labelled queries: agreement {res['agreement']:.3f}, Cohen's kappa {res['kappa']:.3f}")
    print(f"{'class':20} {'gold':>5} {'pred':>5} {'precision':>9} {'recall':>7}")
    for c, v in res["per_class"].items():
        p = "-" if v["precision"] is None else f"{v['precision']:.2f}"
        r = "-" if v["recall"] is None else f"{v['recall']:.2f}"
        print(f"{c:20} {v['gold']:>5} {v['predicted']:>5} {p:>9} {r:>7}")
    if "--confusion" in sys.argv:
        for q, query, label, got in res["disagreements"]:
            print(f"  {label:18} -> {got:18} {query!r}  [{q}]")


if __name__ == "__main__":
    main()
