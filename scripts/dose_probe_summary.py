"""GRPO − continued SFT on train-pool success, seed by seed, from the dose probe's files (docs/squeeze.md, "A dose
that learns: probe").

Reads any number of ``scripts/lm_dose.py --comparator ... --json FILE`` outputs (one world, one start, one learning
rate each: the probe's) and, with ``--legacy``, the per-seed rows of an earlier hand-assembled ``summary.json``
(seeds whose GRPO figure came from the issue's lead run); prints each seed's GRPO and comparator success and KL, and
the mean difference with its 95% t interval and one-sided t p over seeds. A seed found twice is refused: the files
must be distinct runs.

    python scripts/dose_probe_summary.py DOSE.json... [--legacy SUMMARY.json] [--lr 0.0002] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any


class ProbeFileError(ValueError):
    """A file that is not a dose probe's output (or lacks the comparator)."""


def seeds_from_dose(path: Path, lr: str) -> list[dict[str, Any]]:
    """Per-seed rows of one ``lm_dose.py --json`` file at learning rate ``lr``."""
    try:
        res = json.loads(path.read_text(encoding="utf-8"))
        runs = res["lrs"][lr]["runs"]
    except (OSError, ValueError) as e:
        raise ProbeFileError(f"{path}: cannot read it as JSON ({e})") from e
    except (KeyError, TypeError) as e:
        raise ProbeFileError(f"{path}: not an lm_dose.py output with learning rate {lr} ({e!r} missing)") from e
    rows = []
    for r in runs:
        c = r.get("comparator")
        if not c:
            raise ProbeFileError(f"{path}: seed {r.get('seed')} has no comparator (run lm_dose.py --comparator)")
        rows.append({"seed": int(r["seed"]), "grpo_success": r["success"], "grpo_kl_last": r.get("kl_last"),
                     "grpo_source": str(path), "comparator": c.get("arm"), "sft_success": c["success"],
                     "sft_kl_last": c.get("kl_last"), "sft_steps": c.get("steps"),
                     "start_success": res.get("start_success")})
    return rows


def seeds_from_legacy(path: Path) -> list[dict[str, Any]]:
    """Per-seed rows of the 2026-11-27 probe's hand-assembled ``summary.json``."""
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
        return [{"seed": int(s["seed"]), "grpo_success": s["grpo_success"], "grpo_kl_last": s.get("grpo_kl_last"),
                 "grpo_source": s.get("grpo_source", str(path)), "comparator": "sft_kl",
                 "sft_success": s["sft_kl_success"], "sft_kl_last": s.get("sft_kl_kl_last"), "sft_steps": None,
                 "start_success": d.get("start_success")} for s in d["seeds"]]
    except (OSError, ValueError) as e:
        raise ProbeFileError(f"{path}: cannot read it as JSON ({e})") from e
    except (KeyError, TypeError) as e:
        raise ProbeFileError(f"{path}: not the probe's summary.json ({e!r} missing)") from e


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean GRPO − comparator, its 95% t interval and one-sided t p (H1: GRPO above), over the seeds."""
    import numpy as np
    from scipy.stats import t

    from searchgym.experiments.squeeze.stats import t_interval

    d = [r["grpo_success"] - r["sft_success"] for r in rows]
    n = len(d)
    out: dict[str, Any] = {"n_seeds": n, "mean": float(np.mean(d)) if d else None, "ci95": t_interval(d),
                           "one_sided_p": None}
    if n >= 2:
        se = float(np.std(d, ddof=1)) / math.sqrt(n)
        out["one_sided_p"] = float(t.sf(out["mean"] / se, n - 1)) if se > 0 else None
        out["grpo_sd"] = float(np.std([r["grpo_success"] for r in rows], ddof=1))
        out["sft_sd"] = float(np.std([r["sft_success"] for r in rows], ddof=1))
    return out


def _f(x: float | None, sign: bool = False) -> str:
    return "–" if x is None else (f"{x:+.3f}" if sign else f"{x:.3f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path, help="lm_dose.py --json outputs (one world and start)")
    ap.add_argument("--legacy", type=Path, default=None, help="an earlier probe summary.json with per-seed rows")
    ap.add_argument("--lr", default="0.0002", help="the learning rate's key in the files (default 0.0002)")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows and the summary here")
    a = ap.parse_args(argv)
    try:
        rows = seeds_from_legacy(a.legacy) if a.legacy else []
        for f in a.files:
            rows += seeds_from_dose(f, a.lr)
    except ProbeFileError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    seen = [r["seed"] for r in rows]
    dup = sorted({s for s in seen if seen.count(s) > 1})
    if dup:
        print(f"error: seed(s) {dup} appear more than once across the inputs", file=sys.stderr)
        return 2
    if not rows:
        print("error: no seeds (give lm_dose.py --json files or --legacy)", file=sys.stderr)
        return 2
    rows.sort(key=lambda r: r["seed"])
    s = summarise(rows)
    print("| seed | GRPO success | GRPO KL at the end | continued SFT success | SFT KL at the end | GRPO − SFT |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['seed']} | {_f(r['grpo_success'])} | {_f(r['grpo_kl_last'])} | {_f(r['sft_success'])} "
              f"| {_f(r['sft_kl_last'])} | {_f(r['grpo_success'] - r['sft_success'], True)} |")
    ci = f"[{s['ci95'][0]:+.3f}, {s['ci95'][1]:+.3f}]" if s["ci95"] else "(one seed: no interval)"
    p = f"{s['one_sided_p']:.3f}" if s["one_sided_p"] is not None else "–"
    print(f"\nGRPO − continued SFT on train-pool success: {s['mean']:+.3f} {ci} over {s['n_seeds']} seeds "
          f"(95% t interval; one-sided t p {p})")
    if a.json:
        a.json.write_text(json.dumps({"seeds": rows, "summary": s}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
