"""Training stdout logs (verl on Ray, torchrun): text -> sample records.

Every line may carry ANSI colour codes and a process prefix (``(main_task pid=12345)``,
``(WorkerDict pid=7, ip=10.0.0.2)``, ``[rank0]:``); both are stripped. A sample is the text printed after a
``Solution string:`` marker (the decoded prompt + response, possibly over many lines) up to the next
marker, separator or step line; ``Golden answers:`` / ``Extracted answer:`` lines beside it are kept as its
fields. The training step of a sample is the one of the nearest preceding step line (``epoch 0, step 17``,
``step:17 - …``, ``global_step 17``). One linear pass.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_PREFIX = re.compile(r"^(?:\([^()\n]{0,120}?pid=\d+[^()\n]{0,80}\)\s?|\[rank\d+\]:\s?)+")
_STEP = re.compile(r"^\s*(?:epoch\s*\d+\s*[,:|]\s*)?(?:global[_ ])?step\s*[:=]?\s*(\d+)\b", re.IGNORECASE)
# marker (lower case, at a line start) -> (record field, whether it starts a new sample)
_MARKERS: dict[str, tuple[str, bool]] = {
    "solution string:": ("sequence", True),   # Search-R1's qa_em reward (a whole decoded sequence)
    "[prompt]": ("input", True),               # verl's NaiveRewardManager: prompt, then response
    "[response]": ("output", False),
    "golden answers:": ("golden_answers", False), "golden answer:": ("golden_answers", False),
    "ground truth:": ("golden_answers", False), "[ground_truth]": ("golden_answers", False),
    "extracted answer:": ("prediction", False),
    "[score]": ("score", False),
}
_SEPARATOR = re.compile(r"^\s*(?:-{8,}|={8,})\s*$")
SAMPLE_MARKER = "Solution string:"


def clean_line(line: str) -> str:
    """A log line without ANSI codes and process prefixes."""
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    if line[:1] in "([":
        line = _PREFIX.sub("", line, count=1)
    return line


def looks_like_training_log(head: str) -> bool:
    low = head.lower()
    return SAMPLE_MARKER.lower() in low or ("[prompt]" in low and "[response]" in low)


def training_log_records(text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) per printed sample: ``sequence`` (Search-R1's solution string) or ``input`` +
    ``output`` (verl's ``[prompt]`` / ``[response]``), ``step`` (or None), and ``golden_answers``,
    ``prediction``, ``score`` where printed. A field runs over the lines up to the next marker, separator or
    step line."""
    step: int | None = None
    cur: dict[str, Any] | None = None
    cur_line = 0
    key = ""
    buf: list[str] = []
    pending: dict[str, Any] = {}  # answers printed just before their sample (Search-R1 prints them first)

    def close_field() -> None:
        nonlocal buf
        if cur is not None and key:
            cur[key] = "\n".join(buf).strip() if key in ("sequence", "input", "output") else " ".join(buf).strip()
        buf = []

    def flush() -> Iterator[tuple[int, dict[str, Any]]]:
        nonlocal cur, key
        close_field()
        if cur is not None and ("sequence" in cur or "output" in cur):
            yield cur_line, cur
        cur, key = None, ""

    for lineno, raw in enumerate(text.split("\n"), 1):
        line = clean_line(raw)
        m = _STEP.match(line)
        if m and len(line) < 2000:
            yield from flush()
            step = int(m.group(1))
            pending = {}
            continue
        low = line.lstrip().lower()
        marker = next((k for k in _MARKERS if low.startswith(k)), None)
        if marker is not None:
            field, starts = _MARKERS[marker]
            body = line.lstrip()[len(marker):].strip()
            if starts or cur is None and field in ("output",):
                yield from flush()
                cur = {"step": step, **pending}
                pending = {}
                cur_line = lineno
            elif cur is None or field in cur or (field == key):
                if cur is not None and field in cur:
                    yield from flush()  # a second answer line: it belongs to the next sample
                if cur is None:
                    pending[field] = body
                    continue
            close_field()
            key = field
            buf = [body]
            continue
        if _SEPARATOR.match(line):
            yield from flush()
            continue
        if cur is not None and key:
            buf.append(line)
    yield from flush()


_QUOTED = re.compile(r"'([^']*)'|\"([^\"]*)\"")


def _norm(s: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", s.lower()).replace(" a ", " ").replace(" the ", " ").split())


def exact_match(rec: dict[str, Any]) -> int | None:
    """1/0 when the sample printed both its golden answers and its extracted answer (the exact match that
    Search-R1's reward prints them for: normalised prediction equal to one golden answer), else None."""
    gold, pred = rec.get("golden_answers"), rec.get("prediction")
    if not isinstance(gold, str) or not isinstance(pred, str) or pred.strip() in ("", "None"):
        return None if not isinstance(gold, str) or not isinstance(pred, str) else 0
    answers = [a or b for a, b in _QUOTED.findall(gold)] or [gold]
    return int(_norm(pred) in {_norm(a) for a in answers})
