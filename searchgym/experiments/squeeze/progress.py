"""The squeeze run's progress lines: stages numbered ``[i/N]`` in the order they run (issue 35 §3: the counter
never repeats or goes back), and a heartbeat line whenever nothing was logged for ``every`` seconds, so a long
stage is never silent.

A stage module announces a stage by logging ``"[stage] TITLE"`` (:data:`STAGE`); :class:`Progress` numbers it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

STAGE = "[stage] "


def planned_stages(cfg: object) -> int:
    """How many stage lines a run of ``cfg`` prints when every stage runs (``--resume`` may skip some: the
    counter then jumps, never goes back)."""
    c: Any = cfg
    n = 0
    if not c.only_start and c.strategy_seeds > 0:
        n += 1 + int(getattr(c, "contextual_seeds", 0) > 0)    # the strategy policy, the organism
    n += 1                                                     # the world
    n += 2 if c.trains_start() else 1                          # the LM start: (pretraining, demos + SFT) or one
    n += 1                                                     # the competence gate
    if not c.only_start:
        n += int(c.arm_jobs() <= 1)                            # the start's evaluation (a pool job when > 1)
        n += 2                                                 # the arms, the report
    return n


class Progress:
    """A ``log`` callable that numbers stage lines and prints a heartbeat after ``every`` quiet seconds."""

    def __init__(self, log: Callable[[str], None], total: int, every: float = 10.0):
        self._log = log
        self.total = total
        self.every = every
        self.done = 0
        self.title = "starting"
        self._t_stage = self._last = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __call__(self, msg: str) -> None:
        if msg.startswith(STAGE):
            self.stage(msg[len(STAGE):])
        else:
            self._emit(msg)

    def stage(self, title: str) -> None:
        self.done += 1
        self.total = max(self.total, self.done)  # a stage not planned (a shipped start that does not fit)
        self.title = title.split(":")[0]
        self._t_stage = time.monotonic()
        self._emit(f"[{self.done}/{self.total}] {title}")

    def _emit(self, msg: str) -> None:
        with self._lock:
            self._last = time.monotonic()
            self._log(msg)

    def _beat(self) -> None:
        while not self._stop.wait(min(1.0, self.every / 4)):
            now = time.monotonic()
            if now - self._last >= self.every:
                self._emit(f"      ... {self.title}: {now - self._t_stage:.0f}s in this stage")

    def __enter__(self) -> Progress:  # noqa: PYI034 (Self needs Python 3.11)
        if self.every > 0:
            self._thread = threading.Thread(target=self._beat, name="squeeze-heartbeat", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
