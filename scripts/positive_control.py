"""Does the template measure fire? The squeeze's positive control, seed by seed, from ``grpo_positive`` runs.

    python scripts/positive_control.py results/squeeze-controls2-w0-v3 results/squeeze-controls2-w1-v3 \
        results/squeeze-controls2-w5-v3 [--last 5] [--json OUT.json]

``grpo_positive`` pays an episode only when every query has one template (``positive_target.json``). Per seed this
prints how much of that reward the policy learned (the paid share of its rollouts over the first and the last
``--last`` steps, ``charts/shaped_reward``) beside the change in rarefied template entropy against the run's own SFT
start, and the rank correlation of the two over all seeds. A measure that fires falls where the paid share rose;
a seed that never learned its reward says nothing about the measure."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ARM = "grpo_positive"


def seed_rows(run: Path, last: int) -> list[dict]:
    """One row per seed of ``run``'s positive control: world, seed, target template, paid share first/last,
    template entropy (rarefied) and its change against the run's start."""
    s = json.loads((run / "summary.json").read_text())
    start = s["start"]["template_entropy_rarefied"]
    start = start["mean"] if isinstance(start, dict) else start
    seeds = sorted((run / "arms" / ARM).glob("seed*"), key=lambda p: int(p.name[4:]))
    values = s["arms"][ARM]["template_entropy_rarefied"]["values"]
    if len(values) != len(seeds):
        raise ValueError(f"{run}: {len(values)} seed values in summary.json, {len(seeds)} seed folders")
    rows = []
    for d, h in zip(seeds, values):
        paid = [r.get("charts/shaped_reward") for r in map(json.loads, (d / "metrics.jsonl").read_text().splitlines())]
        if any(p is None for p in paid):
            raise ValueError(f"{d}/metrics.jsonl: a row without charts/shaped_reward (not a grpo_positive arm?)")
        rows.append({"world": s["world"]["seed"], "seed": int(d.name[4:]),
                     "target": json.loads((d / "positive_target.json").read_text())["template"],
                     "paid_first": sum(paid[:last]) / len(paid[:last]), "paid_last": sum(paid[-last:]) / len(paid[-last:]),
                     "template_entropy": h, "change": h - start})
    return rows


def main(argv: list[str] | None = None) -> int:
    from scipy.stats import spearmanr

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", help="`searchgym squeeze --arms grpo_positive` run directories")
    ap.add_argument("--last", type=int, default=5, help="steps averaged at each end of training (default 5)")
    ap.add_argument("--json", help="also write the rows and the correlation to this file")
    a = ap.parse_args(argv)
    rows = []
    for r in map(Path, a.runs):
        if not (r / "summary.json").exists() or not (r / "arms" / ARM).is_dir():
            print(f"{r}: not a run with the {ARM} arm (no summary.json or arms/{ARM}/)", file=sys.stderr)
            return 2
        try:
            rows += seed_rows(r, a.last)
        except (ValueError, KeyError, OSError) as e:
            print(f"{r}: {e}", file=sys.stderr)
            return 2
    print("| world | seed | paid template | paid share, first → last steps | template entropy (rarefied) | change |")
    print("|---:|---:|---|---:|---:|---:|")
    for x in rows:
        print(f"| {x['world']} | {x['seed']} | `{x['target']}` | {x['paid_first']:.3f} → {x['paid_last']:.3f} | "
              f"{x['template_entropy']:.3f} | {x['change']:+.3f} |")
    rho = None
    if len(rows) >= 3:
        rho = spearmanr([x["paid_last"] for x in rows], [x["change"] for x in rows])
        print(f"\nSpearman rank correlation, paid share at the end vs template-entropy change: {rho.statistic:+.2f} "
              f"(p {rho.pvalue:.1g}, {len(rows)} seeds)")
    if a.json:
        out = {"rows": rows, "spearman": None if rho is None else {"rho": float(rho.statistic),
                                                                    "p": float(rho.pvalue), "n": len(rows)}}
        Path(a.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
