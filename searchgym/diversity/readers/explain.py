"""``analyze FILE --explain``: what the readers see in the first records of a file.

For each of the first records: where each field was found (as a JMESPath expression, the ``--map`` that
reproduces it), the competing readings of its calls and why the others lost, and what is missing. When nothing
is found: the record's tree of keys with candidate strings, and a suggested ``--map``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from searchgym.diversity.readers import containers as C
from searchgym.diversity.readers import fields as F
from searchgym.diversity.readers.detection import _detect_file, _files, _NotJSON, _records, _tags
from searchgym.diversity.readers.records import ReadStats
from searchgym.diversity.readers.transcripts import _Opts
from searchgym.diversity.readers.tree import Explanation, parse_tree
from searchgym.errors import TrajectoryFormatError

_QUERY_HINTS = ("query", "queries", "kw", "keyword", "keywords", "search", "term", "terms", "q", "request")
_NOT_QUERY = ("id", "url", "uri", "href", "type", "role", "name", "op", "kind", "status", "date", "time")
MAX_LINES = 60


def explain(path: str | Path, *, records: int = 3, query_tags: Any = None,
            search_tools: tuple[str, ...] = ()) -> str:
    """The ``--explain`` text of a run file (the first file of a folder)."""
    p = Path(path)
    f = _files(p)[0][1]
    src = C.load(f)
    opts = _Opts(query_tags=_tags(query_tags), text_field=None, step_field=None, question_field=None,
                 reward_field=None, success_threshold=1.0, search_tools=search_tools)
    try:
        fmt: str | None = _detect_file(src, opts)
    except TrajectoryFormatError:
        fmt = None
    try:
        recs = [r for _, _, r in _take(_records(src, ReadStats(format="auto"), lenient=True), records)]
    except _NotJSON:
        return f"{f}: format {fmt}\nplain text: read as a log (react-log / train-log); --map applies to JSON records"
    opts.explain, opts.explain_limit = [], records
    if fmt == "tree":
        for i, rec in enumerate(recs):
            if isinstance(rec, dict):
                parse_tree(rec, f, i + 1, ReadStats(format="tree"), opts, None)
        fmt = next((k for k in opts.labels if k), "tree")
    out = [_head(f, fmt)]
    for ex in opts.explain:
        out.extend(_lines(ex))
    if not any("queries" in ex.found for ex in opts.explain) and recs and isinstance(recs[0], dict):
        out.extend(_unreadable(recs))
    elif opts.explain:
        out.append("map that reproduces this reading: " + _as_map(opts.explain[0]))
    return "\n".join(out)


def _head(f: Path, fmt: str | None) -> str:
    if fmt is None:
        return f"{f}: no transcript (chat turns, a text with calls) and no search call was found by structure"
    if fmt == "tree":
        return f"{f}: format tree (the generic reader: search calls by structure)"
    if fmt in ("searchgym", "react-log", "train-log"):
        return f"{f}: format {fmt}"
    return f"{f}: format {fmt} (the generic reader: the record's {fmt} transcript read whole; below, its competing " \
           "readings)"


def _take(it: Any, n: int) -> list[Any]:
    got = []
    for x in it:
        got.append(x)
        if len(got) >= n:
            break
    return got


def _short(v: Any, n: int = 70) -> str:
    s = json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else repr(v)
    return s if len(s) <= n else s[:n - 1] + "…"


def _lines(ex: Explanation) -> list[str]:
    out = [f"{ex.where}:"]
    for name, (expr, val) in ex.found.items():
        out.append(f"  {name:<10} <- {expr}" + (f"   e.g. {_short(val)}" if val is not None else ""))
    for name, expr, score, verdict in ex.readings:
        out.append(f"  reading {name} ({expr or 'no map expression'}): {score} queries, {verdict}")
    if ex.missing:
        why = {"queries": "no search call found (by structure or in any text)",
               "question": "no question-like field, chat user turn or Question:/Claim:/Task: header",
               "reward": "no reward / score / success field and no reward stated in the text: success stays "
                         "unknown (never 0)"}
        out.extend(f"  missing {m}: {why[m]}" for m in ex.missing)
    return out


def _as_map(ex: Explanation) -> str:
    fm = {k: expr for k, (expr, _) in ex.found.items()
          if k in ("queries", "question", "reward", "step") and not expr.endswith(")") and " " not in expr}
    return " ".join(f"--map '{k}={v}'" for k, v in fm.items()) or "(none)"


def key_tree(obj: Any, path: str = "", depth: int = 0, out: list[str] | None = None) -> list[str]:
    """The keys of a record, indented, with each string leaf's start (candidate fields for ``--map``)."""
    out = [] if out is None else out
    if len(out) >= MAX_LINES or depth > 6:
        return out
    pad = "  " * (depth + 1)
    if isinstance(obj, dict):
        for k, v in obj.items():
            p = F.join(path, k)
            if isinstance(v, (dict, list)):
                out.append(f"{pad}{p}: {type(v).__name__}" + (f" of {len(v)}" if isinstance(v, list) else ""))
                key_tree(v, p, depth + 1, out)
            else:
                out.append(f"{pad}{p}: {_short(v)}")
    elif isinstance(obj, list) and obj:
        key_tree(obj[0], f"{path}[0]", depth, out)
    return out


def _candidates(obj: Any, path: str = "", found: list | None = None, depth: int = 0) -> list[tuple[int, str, str]]:
    """(score, list path, key) of string fields of the objects in lists: where queries usually are."""
    found = [] if found is None else found
    if depth > 12:
        return found
    if isinstance(obj, dict):
        for k, v in obj.items():
            _candidates(v, F.join(path, k), found, depth + 1)
    elif isinstance(obj, list):
        dicts = [x for x in obj if isinstance(x, dict)]
        keys = {k for d in dicts for k, v in d.items() if isinstance(v, str)}
        for k in keys:
            vals = [d[k] for d in dicts if isinstance(d.get(k), str)]
            avg = sum(len(v) for v in vals) / len(vals)
            low = str(k).lower()
            if low in _NOT_QUERY or avg > 200 or all(v.startswith("http") for v in vals):
                continue
            hint = 100 if any(h == low or h in low.split("_") for h in _QUERY_HINTS) else 0
            found.append((hint + len(vals) - int(avg > 120) * 50, path, str(k)))
        for d in dicts[:1]:
            _candidates(d, f"{path}[*]" if path else "[*]", found, depth + 1)
    return found


def suggest(rec: dict[str, Any]) -> dict[str, str]:
    """A ``--map`` for a record nothing was found in: the likeliest query field, and the question."""
    fm: dict[str, str] = {}
    cands = sorted(_candidates(rec), key=lambda c: -c[0])
    if cands:
        _, lst, k = cands[0]
        base = lst if lst.endswith("]") else f"{lst}[*]"
        fm["queries"] = f"{base}.{F.key_expr(k)}"
    fs = F.record_fields(rec)
    qpath = fs["question"][0] if "question" in fs else None
    if qpath is None:
        qpath = next((F.key_expr(k) for k, v in rec.items() if isinstance(v, str) and v.strip().endswith("?")), None)
    if qpath:
        fm["question"] = qpath
    rpath = next((fs[k][0] for k in ("reward", "success") if k in fs), None)
    if rpath is None:  # (a guess shown to the user, looser than reading: a number under "points")
        rpath = F.find(rec, ("points",), F.as_number)[0]
    if rpath:
        fm["reward"] = rpath
    return fm


def _unreadable(recs: list[Any]) -> list[str]:
    out = ["keys of the first record (candidate fields for --map):"]
    out.extend(key_tree(recs[0]))
    fm = suggest(recs[0])
    if fm:
        out.append("suggested: " + " ".join(f"--map '{k}={v}'" for k, v in fm.items()))
        out.append("(or save it as a --map-file: " + json.dumps(fm) + ")")
    return out
