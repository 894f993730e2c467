"""The metrics log shared by the trainers: ``metrics.jsonl`` holds one JSON row per step, and after a resume
exactly the rows of the steps the checkpoint covers (lines an interrupted run wrote after its last
checkpoint are dropped, so the resumed run's file equals the uninterrupted one's)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

METRICS = "metrics.jsonl"


def sync_metrics(out_dir: str | Path | None, history: list[dict[str, Any]], *, resumed: bool) -> None:
    """Make ``out_dir/metrics.jsonl`` hold exactly ``history`` (the checkpoint's rows) when resuming, and
    nothing when starting fresh."""
    if out_dir is None:
        return
    from searchgym.train.checkpoint import atomic_write_text

    path = Path(out_dir) / METRICS
    if resumed:
        atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in history))
    else:
        path.unlink(missing_ok=True)


def append_metrics(out_dir: str | Path | None, row: dict[str, Any]) -> None:
    if out_dir is None:
        return
    with open(Path(out_dir) / METRICS, "a") as f:
        f.write(json.dumps(row) + "\n")
