#!/usr/bin/env python
"""World benchmark: generation time and peak memory by size, and which BM25 query strategies find the gold
passages of each question family.

Part 1 (scale). Each size is generated in its own subprocess so that its peak RSS (``ru_maxrss``) is its own.
Targets (issue 4): 10k passages in <= 10 s; 1M passages in <= 5 min and <= 4 GB.

Part 2 (strategies). Over the default world (all splits; ``comparison`` lives in ``shift_family``), with the
real ``searchgym.retrieval.BM25Retriever`` (defaults: English stopwords, no stemming), top-3 per query:

- ``full question``: the question text as one query;
- ``entity+relation``: one query "<named entity> <relation noun>" (for the first hop only);
- ``question, then hops``: the full question, then "<bridge> <relation noun>" for each later hop;
- ``decompose``: "<entity> <relation noun>" for every hop (two queries for a comparison);
- ``name only``: "<entity>" for every hop.

A multi-hop strategy learns the next bridge entity only by reading it: the follow-up query for hop i+1
is issued only if the gold passage of hop i was among the previous query's hits (otherwise the chain
stops). Recall@3 = share of a question's gold passages found in the union of its queries' top-3 hits,
averaged per family; "all@3" = share of questions whose gold passages were all found.

    python scripts/bench_world.py            # 10k + 100k, strategies on the default world
    python scripts/bench_world.py --quick    # 10k only, 300 questions per family
    python scripts/bench_world.py --large    # adds 1M passages
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import defaultdict

TARGETS = {10_000: (10.0, None), 1_000_000: (300.0, 4096.0)}

_CHILD = """
import json, resource, sys, time
t = time.perf_counter()
from searchgym.data import World
w = World.generate_for_passages(int(sys.argv[1]), seed=0)
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "passages": len(w.passages), "questions": len(w.questions),
                  "entities": len(w.entities), "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def bench_scale(sizes: list[int]) -> list[dict]:
    rows = []
    for n in sizes:
        out = subprocess.run([sys.executable, "-c", _CHILD, str(n)], capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        r["target"] = n
        rows.append(r)
        print(f"  generated {n:,}: {r['seconds']:.1f} s, {r['rss_mb']:.0f} MB", file=sys.stderr)
    return rows


def print_scale(rows: list[dict]) -> None:
    print("\n### World generation (one process per size; seconds include the import)\n")
    print("| passages asked | passages | entities | questions | seconds | peak RSS (MB) | target | met |")
    print("|---:|---:|---:|---:|---:|---:|---|---|")
    for r in rows:
        t_s, t_mb = TARGETS.get(r["target"], (None, None))
        target = " and ".join(x for x in (f"<= {t_s:.0f} s" if t_s else "",
                                          f"<= {t_mb:.0f} MB" if t_mb else "") if x) or "-"
        met = "-"
        if t_s or t_mb:
            ok = (t_s is None or r["seconds"] <= t_s) and (t_mb is None or r["rss_mb"] <= t_mb)
            met = "yes" if ok else "NO"
        print(f"| {r['target']:,} | {r['passages']:,} | {r['entities']:,} | {r['questions']:,} | "
              f"{r['seconds']:.2f} | {r['rss_mb']:.0f} | {target} | {met} |")


# -- strategies ----------------------------------------------------------------------------------------
def _noun(rel_key: str) -> str:
    from searchgym.data.world.schema import REL

    return REL[rel_key].noun


def _plans(q, strategy: str) -> list[list]:
    """Query plans: a list of chains; a chain is a list of (query or None, gold id of that hop).

    ``None`` means "the entity of this hop, read from the previous hop's passage": filled in at run time.
    """
    m = q.metadata
    fam = m["family"]
    gold = q.supporting_ids
    if fam == "comparison":
        a, b = m["subject"]
        noun = _noun(m["relations"][0])
        if strategy in ("full question",):
            return [[(q.question, None)]]
        if strategy == "question, then hops":
            return [[(q.question, None)], [(f"{b} {noun}", None)]]
        if strategy == "entity+relation":
            return [[(f"{a} {noun}", None)]]
        if strategy == "name only":
            return [[(a, None)], [(b, None)]]
        return [[(f"{a} {noun}", None)], [(f"{b} {noun}", None)]]
    names = [m["subject"][0], *m["bridge"]]
    rels = m["relations"]
    if strategy == "full question":
        return [[(q.question, None)]]
    if strategy == "entity+relation":
        return [[(f"{names[0]} {_noun(rels[0])}", None)]]
    chain = []
    for i, (name, rel) in enumerate(zip(names, rels)):
        if strategy == "question, then hops" and i == 0:
            query = q.question
        elif strategy == "name only":
            query = name
        else:
            query = f"{name} {_noun(rel)}"
        chain.append((query, gold[i - 1] if i > 0 else None))
    return [chain]


STRATEGIES = ("full question", "entity+relation", "question, then hops", "decompose", "name only")


def evaluate(world, retriever, per_family: int | None) -> dict[str, dict[str, tuple[float, float, int]]]:
    by_family = defaultdict(list)
    for q in world.questions:
        by_family[q.metadata["family"]].append(q)
    out: dict[str, dict[str, tuple[float, float, int]]] = {}
    for fam, qs in by_family.items():
        qs = qs[:per_family] if per_family else qs
        out[fam] = {}
        for strat in STRATEGIES:
            recalls, alls, n_queries = [], [], 0
            # Run the chains hop by hop, batching each hop over all questions.
            plans = [_plans(q, strat) for q in qs]
            found: list[set[str]] = [set() for _ in qs]
            pending = [(qi, ci, 0) for qi, chains in enumerate(plans) for ci in range(len(chains))]
            while pending:
                queries = [plans[qi][ci][hop][0] for qi, ci, hop in pending]
                n_queries += len(queries)
                hits = retriever.batch_search(queries, k=3)
                nxt = []
                for (qi, ci, hop), hs in zip(pending, hits):
                    found[qi] |= {h.id for h in hs}
                    chain = plans[qi][ci]
                    if hop + 1 < len(chain):
                        need = chain[hop + 1][1]  # the previous hop's gold passage names the bridge
                        if need is None or need in found[qi]:
                            nxt.append((qi, ci, hop + 1))
                pending = nxt
            for q, f in zip(qs, found):
                gold = set(q.supporting_ids)
                recalls.append(len(gold & f) / len(gold))
                alls.append(float(gold <= f))
            out[fam][strat] = (sum(recalls) / len(qs), sum(alls) / len(qs), n_queries / len(qs))
    return out


FAMILY_ORDER = ("attribute", "yesno", "intersection", "bridge", "three_hop", "comparison")


def print_strategies(res: dict, world) -> None:
    from searchgym.data import HELD_OUT

    print(f"\n### Recall@3 of the gold passages per family (BM25, default world: {len(world.passages):,} "
          f"passages)\n")
    print("| family | questions | " + " | ".join(STRATEGIES) + " | best hand-made |")
    print("|---|---:|" + "---:|" * len(STRATEGIES) + "---|")
    counts = defaultdict(int)
    for q in world.questions:
        counts[q.metadata["family"]] += 1
    for fam in FAMILY_ORDER:
        if fam not in res:
            continue
        cells = [f"{res[fam][s][0]:.2f}" for s in STRATEGIES]
        hand = [s for s in STRATEGIES if s != "full question"]
        best = max(hand, key=lambda s: res[fam][s][0])
        tag = "" if fam in HELD_OUT["train_families"] else " (held out)"
        print(f"| {fam}{tag} | {counts[fam]:,} | " + " | ".join(cells)
              + f" | {best}: {res[fam][best][0]:.2f} |")
    print("\nAll gold passages found (all@3) / queries per question:\n")
    print("| family | " + " | ".join(STRATEGIES) + " |")
    print("|---|" + "---:|" * len(STRATEGIES))
    for fam in FAMILY_ORDER:
        if fam in res:
            print(f"| {fam} | " + " | ".join(f"{res[fam][s][1]:.2f} / {res[fam][s][2]:.1f}" for s in STRATEGIES)
                  + " |")
    train = [f for f in FAMILY_ORDER if f in HELD_OUT["train_families"] and f in res]
    print("\nMean recall@3 over the train families: "
          + ", ".join(f"{s} {sum(res[f][s][0] for f in train) / len(train):.2f}" for s in STRATEGIES))


def print_examples(world) -> None:
    print("\n### One example per family (default world, seed 0)\n")
    print("| family | hops | example question | gold answers | bridge (never in the question) |")
    print("|---|---:|---|---|---|")
    seen = set()
    for q in world.questions:
        fam = q.metadata["family"]
        if fam in seen or q.metadata["style"] != "s0":
            continue
        seen.add(fam)
        print(f"| {fam} | {q.metadata['hops']} | {q.question} | {', '.join(q.answers)} | "
              f"{', '.join(q.metadata['bridge']) or '-'} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="10k only; 300 questions per family")
    ap.add_argument("--large", action="store_true", help="add the 1M-passage world")
    ap.add_argument("--no-scale", action="store_true", help="skip the generation benchmark")
    args = ap.parse_args()

    from searchgym.data import default_world
    from searchgym.retrieval import BM25Retriever

    if not args.no_scale:
        sizes = [10_000] if args.quick else [10_000, 100_000]
        if args.large:
            sizes.append(1_000_000)
        print_scale(bench_scale(sizes))
    world = default_world()
    retriever = BM25Retriever(world.passages)
    res = evaluate(world, retriever, 300 if args.quick else None)
    print_strategies(res, world)
    print_examples(world)


if __name__ == "__main__":
    main()
