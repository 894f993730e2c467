"""The squeeze headline's intervals with worlds as random effects, from the runs' per-seed ``summary.json``.

    python scripts/squeeze_random_effects.py results/squeeze-default-v3 results/squeeze-world1-v3 \
        results/squeeze-world5-v3 [--arm grpo] [--base sft] [--json OUT.json]

Prints one markdown table per arm (arm − continued SFT, or − ``--base``, e.g. rs_sft for the RL-specific
contrast: DerSimonian–Laird with a t interval on k − 1 df, HKSJ beside it, τ², k worlds); with ``--json`` also
writes the blocks. Worlds whose start failed the competence gate are left out (as the headline does). Two runs of
one world from different SFT starts are two units (random effects over worlds and starts); the same start given
twice is refused."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from searchgym.experiments.squeeze.random_effects import random_effects_block, random_effects_lines

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", help="run directories (each with summary.json), one per SFT start; a "
                                            "world may have several (their t interval keeps worlds - 1 df)")
    ap.add_argument("--arm", action="append", help="arm(s) set against --base (default: grpo)")
    ap.add_argument("--base", default="sft", help="the arm each --arm is set against (default sft, continued SFT; "
                                                  "rs_sft: rejection-sampling SFT, the RL-specific contrast)")
    ap.add_argument("--json", help="also write the blocks to this file")
    a = ap.parse_args(argv)
    sums = []
    for r in a.runs:
        p = Path(r) / "summary.json" if Path(r).is_dir() else Path(r)
        if not p.exists():
            print(f"no {p}: give `searchgym squeeze --out DIR` run directories", file=sys.stderr)
            return 2
        s = json.loads(p.read_text())
        if (s.get("competence") or {}).get("passed") is False:
            print(f"left out: {p} (its SFT start failed the competence gate)", file=sys.stderr)
            continue
        sums.append(s)
    from searchgym.errors import ConfigError

    blocks = {}
    try:
        for arm in a.arm or ["grpo"]:
            blocks[arm] = random_effects_block([s for s in sums if arm in s.get("arms", {})], arm, a.base)
            print("\n".join(random_effects_lines(blocks[arm])) + "\n")
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.json:
        Path(a.json).write_text(json.dumps(blocks, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
