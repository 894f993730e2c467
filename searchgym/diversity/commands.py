"""``searchgym analyze FILE... [--format NAME] [--label NAME]... --out DIR``: offline query-strategy analysis.

The runs are read here with ``searchgym.diversity.readers`` (format detection, ``--query-tags``, ``--lenient``,
labels) and handed to the analysis core as ``Run`` objects; errors are one line on stderr and exit code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

FORMAT_HELP = ("auto (default) | searchgym | verl | search-r1 | chat | react | react-log | train-log | jsonl. "
               "auto detects each file by its structure: searchgym trajectories, verl dumps (input/output), chat "
               "turns under any key (role/content or ShareGPT from/value), ReAct traces in any field, decoded texts "
               "with <search>/<tool_call>/<|begin_of_query|>/<|begin_search_query|> calls, plain-text ReAct logs, "
               "training stdout logs (Solution string: samples, step lines). Containers: JSONL, JSON, CSV/TSV, "
               "Parquet, gzip of any; a pipe works.")


def analyze_command(
    runs: Annotated[list[Path], typer.Argument(
        help="Run files or folders: searchgym trajectories, verl rollout/validation dumps, Search-R1 / "
             "R1-Searcher / Search-o1 outputs, chat transcripts, ReAct traces or logs, training stdout logs; "
             "JSONL, JSON, CSV/TSV, Parquet, gzipped or not; a named pipe.")],
    out: Annotated[Path, typer.Option(
        "--out", "-o", help="Output folder for report.md, report.html, summary.json and the PNGs.")] = Path(
        "analysis"),
    fmt: Annotated[str, typer.Option("--format", help=FORMAT_HELP)] = "auto",
    query_tags: Annotated[tuple[str, str] | None, typer.Option(
        "--query-tags", help="OPEN CLOSE: a further tag pair that holds a search query, e.g. "
                             "--query-tags '<query>' '</query>'.")] = None,
    label: Annotated[list[str] | None, typer.Option(
        "--label", help="Name of a run in the tables (repeat once per file, in order; default: file name).")] = None,
    lenient: Annotated[bool, typer.Option(
        "--lenient", help="Skip malformed lines (counted in the report) instead of stopping at the first.")] = False,
    text_field: Annotated[str | None, typer.Option(
        help="Any JSON: field with the agent's text or its queries (dotted path; a list = several queries; "
             "a text is scanned for search calls).")] = None,
    step_field: Annotated[str | None, typer.Option(help="Field with the training step.")] = None,
    question_field: Annotated[str | None, typer.Option(help="Field with the question.")] = None,
    reward_field: Annotated[str | None, typer.Option(
        help="Field with the reward (default: reward, score, acc, em, correct).")] = None,
    levels: Annotated[str, typer.Option(
        help="Comma-separated template levels: string, slot, content, pos, semantic.")] = "string,slot,content,pos",
    semantic: Annotated[bool, typer.Option(
        "--semantic", help="Add the semantic level (loads all-MiniLM-L6-v2, offline).")] = False,
    titles: Annotated[Path | None, typer.Option(help="Text file of known entity titles, one per line.")] = None,
    success_threshold: Annotated[float, typer.Option(
        help="Reward counted as a success for pass@k (formats without an em field).")] = 1.0,
    n_boot: Annotated[int, typer.Option(help="Bootstrap resamples for the confidence intervals.")] = 200,
    seed: Annotated[int, typer.Option(help="Seed for subsampling and bootstrap.")] = 0,
    no_plots: Annotated[bool, typer.Option("--no-plots", help="Skip the PNG plots.")] = False,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Stop at the first unreadable run file (default: analyse the readable ones, list "
                         "the others with their reason, and exit 1 at the end).")] = False,
    search_tools: Annotated[str | None, typer.Option(
        "--search-tools", help="Comma-separated ReAct / function tool names that are searches (added to the "
                               "defaults: search, bingsearch, websearch, googlesearch, search_engine, "
                               "retrieve, wikipedia, …).")] = None,
    field_map: Annotated[list[str] | None, typer.Option(
        "--map", help="FIELD=EXPR (repeatable): where a field is, in JMESPath; fields: queries, question, reward, "
                      "success, step, evidence, answer, episode_id, episode. E.g. --map "
                      "'queries=trajectory.steps[?action==`search`].query'. Unmapped fields are found by name.")] = None,
    map_file: Annotated[Path | None, typer.Option(
        "--map-file", help="A JSON (or YAML: .yaml/.yml) object of FIELD: EXPR, the same as --map.")] = None,
    explain: Annotated[bool, typer.Option(
        "--explain", help="Print where each field of the first records was found (as --map expressions), which "
                          "readings were considered and what is missing; for a file nothing is found in, its keys "
                          "and a suggested --map. Writes no report.")] = False,
    max_bytes: Annotated[str | None, typer.Option(
        "--max-bytes", help="The most bytes one input may hold once decoded (raw, gzip or Parquet alike), e.g. "
                            "512M or 4G; default 1G, or SEARCHGYM_ANALYZE_MAX_BYTES.")] = None,
) -> None:
    """Analyse the query strategies of one or more runs and write a report (markdown, HTML, PNG, summary.json)."""
    from rich.console import Console

    from searchgym.errors import SearchGymError

    console = Console()
    if not console.is_terminal:  # a file or pipe does not wrap: never crop the table at 80 columns
        console = Console(width=200)
    err = Console(stderr=True)
    failed: list[tuple[Path, str]] = []
    if explain:
        _explain(runs, query_tags, search_tools, console, err, max_bytes)
        return
    try:
        fm = _field_map(field_map, map_file)
        summary, read = _analyze(runs, out, fmt=fmt, query_tags=query_tags, labels=label or [], lenient=lenient,
                                 text_field=text_field, step_field=step_field, question_field=question_field,
                                 reward_field=reward_field, levels=levels, semantic=semantic, titles=titles,
                                 success_threshold=success_threshold, n_boot=n_boot, seed=seed, plots=not no_plots,
                                 strict=strict, failed=failed, search_tools=search_tools, field_map=fm,
                                 max_bytes=max_bytes)
    except (SearchGymError, OSError) as exc:
        err.print(f"error: {error_line(exc)}", markup=False, highlight=False, soft_wrap=True)
        for path, why in failed:
            err.print(f"unreadable: {path}: {why}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(code=2) from None
    for run in read:
        console.print(_read_line(run, summary.get("runs", {}).get(run.label)), markup=False, highlight=False,
                      soft_wrap=True)
    for v in summary.get("verdict") or []:
        console.print(f"verdict: {v}", markup=False, highlight=False, soft_wrap=True)
    console.print(summary_table(summary, read, levels=levels))
    for name, r in summary.get("runs", {}).items():
        for w in r.get("warnings") or []:
            console.print(f"warning ({name}): {w}", markup=False, highlight=False, soft_wrap=True)
    console.print(f"report: {out / 'report.md'}, {out / 'report.html'}, {out / 'summary.json'}",
                  markup=False, highlight=False, soft_wrap=True)
    if failed:
        for path, why in failed:
            err.print(f"unreadable: {path}: {why}", markup=False, highlight=False, soft_wrap=True)
        err.print(f"error: {len(failed)} of {len(runs)} run files could not be read (listed above and in the "
                  "report); the others were analysed", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(code=1)


def _field_map(items: list[str] | None, map_file: Path | None) -> dict[str, str] | None:
    """The --map / --map-file expressions (checked here: a bad one is an error before any file is read)."""
    if not items and map_file is None:
        return None
    from searchgym.diversity.readers import fieldmap

    fieldmap.parse(items, map_file)
    raw = dict(fieldmap._load_file(map_file)) if map_file is not None else {}
    raw.update(dict(i.partition("=")[::2] for i in items or ()))
    return {k.strip(): v.strip() for k, v in raw.items()}


def _explain(runs: list[Path], query_tags: Any, search_tools: str | None, console: Any, err: Any,
             max_bytes: str | None = None) -> None:
    from searchgym.diversity.readers import budget
    from searchgym.diversity.readers.explain import explain
    from searchgym.errors import SearchGymError

    tools = tuple(t.strip() for t in (search_tools or "").split(",") if t.strip())
    tags = query_tags if query_tags and all(t is not None for t in query_tags) else None
    for p in runs:
        try:
            with budget.limit(max_bytes):
                text = explain(p, query_tags=tags, search_tools=tools)
        except (SearchGymError, OSError) as exc:
            err.print(f"error: {error_line(exc)}", markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(code=2) from None
        console.print(text, markup=False, highlight=False, soft_wrap=True)


def error_line(exc: BaseException) -> str:
    """One line for an error: an OSError as its reason and file, never a bare ``[Errno N]``."""
    if isinstance(exc, OSError) and exc.strerror:
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror.lower()}"
    return " ".join(str(exc).split()) or type(exc).__name__


def _analyze(paths: list[Path], out: Path, *, fmt: str, query_tags: Any, labels: list[str], lenient: bool,
             text_field: str | None, step_field: str | None, question_field: str | None,
             reward_field: str | None, levels: str, semantic: bool, titles: Path | None,
             success_threshold: float, n_boot: int, seed: int, plots: bool, strict: bool = True,
             failed: list[tuple[Path, str]] | None = None,
             search_tools: str | None = None, field_map: dict[str, str] | None = None,
             max_bytes: str | None = None) -> tuple[dict[str, Any], list[Any]]:
    from searchgym.diversity import report
    from searchgym.diversity.readers import budget, read_run
    from searchgym.errors import ConfigError, SearchGymError

    if labels and len(labels) != len(paths):
        raise ConfigError(f"give one --label per run file: {len(paths)} files, {len(labels)} labels")
    if query_tags is not None and (not query_tags or any(t is None for t in query_tags)):
        query_tags = None
    lv = [x.strip() for x in levels.split(",") if x.strip()]
    if semantic and "semantic" not in lv:
        lv.append("semantic")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is an existing file, not a folder: name a folder (created if missing)")
    title_list: list[str] = []
    if titles is not None:
        title_list = [t.strip() for t in titles.read_text(encoding="utf-8").splitlines() if t.strip()]
    tools = tuple(t.strip() for t in (search_tools or "").split(",") if t.strip())
    failed = failed if failed is not None else []
    runs = []
    with budget.limit(max_bytes):  # (validated before any file is read: one line if it is not a size)
        for i, p in enumerate(paths):
            try:
                runs.append(read_run(p, fmt, query_tags=query_tags, lenient=lenient,
                                     label=labels[i] if labels else None, text_field=text_field,
                                     step_field=step_field, question_field=question_field, reward_field=reward_field,
                                     success_threshold=success_threshold, search_tools=tools, field_map=field_map))
            except (SearchGymError, OSError) as exc:
                if strict:
                    raise
                failed.append((p, error_line(exc)))
    if not runs:
        raise ConfigError(f"none of the {len(paths)} run files could be read")
    _unique_labels(runs)
    kw = {"levels": lv, "titles": title_list, "success_threshold": success_threshold, "n_boot": n_boot,
          "seed": seed}
    if failed:
        kw["unreadable"] = [{"path": str(p), "reason": why} for p, why in failed]
    summary = report.analyze_runs(runs, out, plots=plots, **kw)
    return summary, runs


def _unique_labels(runs: list[Any]) -> None:
    seen: dict[str, int] = {}
    for r in runs:
        seen[r.label] = seen.get(r.label, 0) + 1
        if seen[r.label] > 1:
            r.label = f"{r.label}-{seen[r.label]}"
        r.name = r.label


def _malformed(st: Any, block: dict[str, Any] | None) -> str:
    """The one figure "malformed" means, in the read line and the table alike (``n_malformed``): search calls
    that could not be parsed plus queries classed malformed, with its two parts when both occur."""
    total = int((block or {}).get("n_malformed", st.malformed) or 0)
    if total == st.malformed:
        return f"{total} malformed calls"
    return f"{total} malformed ({st.malformed} unparseable calls, {total - st.malformed} queries classed malformed)"


def _read_line(run: Any, block: dict[str, Any] | None = None) -> str:
    st = run.read_stats
    parts = [f"{st.episodes} episodes", f"{st.queries} queries", _malformed(st, block)]
    steps = {e.step for e in run.episodes if e.step is not None}
    if steps:
        parts.append(f"{len(steps)} steps")
    series = {e.series for e in run.episodes if e.series is not None and e.step is None}
    if series:
        parts.append(f"{len(series)} trials (not steps)")
    if getattr(st, "reemitted", 0):
        parts.append(f"{st.reemitted} re-emitted turns (each call counted once)")
    if getattr(st, "sidecar", 0):
        parts.append(f"evidence beside the text in {st.sidecar} episodes")
    if st.unexecuted:
        parts.append(f"{st.unexecuted} calls never executed (not counted)")
    if getattr(st, "rejected", 0):
        parts.append(f"{st.rejected} calls refused by the tool (not counted)")
    if st.other_calls:
        parts.append(f"{st.other_calls} other tool calls")
    if st.skipped_lines:
        why = ", ".join(f"{k}: {v}" for k, v in st.skipped_reasons.most_common())
        parts.append(f"{st.skipped_lines} lines skipped ({why})")
    grammars = ", ".join(f"{g} {n}" for g, n in st.grammars.most_common())
    files = f", {st.files} files" if st.files > 1 else ""
    return (f"read {run.label}: {st.format} ({st.container}{files}"
            f"{'; calls: ' + grammars if grammars else ''}): " + ", ".join(parts))


def summary_table(summary: dict[str, Any], runs: list[Any], *, levels: str = "slot") -> Any:
    """The console table: one row per run, labels shown whole (folded, never cut)."""
    from rich.table import Table

    lv = [x.strip() for x in levels.split(",") if x.strip()]
    primary = "slot" if "slot" in lv else (lv[0] if lv else "slot")
    ns = {((r.get("levels", {}).get(primary) or {}).get("n")) for r in summary.get("runs", {}).values()}
    at = f" at n = {ns.pop()}" if len(ns) == 1 and None not in ns else ""
    table = Table(title=f"query diversity ({primary} level; entropy H and Hill number 1{at})")
    table.add_column("run", overflow="fold", min_width=12)
    for col in ("episodes", "queries", "malformed", "H", "hill 1", "copy rate", "warnings"):
        table.add_column(col, justify="right", overflow="fold")

    def f(v: object) -> str:
        if isinstance(v, float):
            return f"{v:.2f}"
        return "–" if v is None else str(v)

    by_label = {r.label: r for r in runs}
    for name, r in summary.get("runs", {}).items():
        st = r.get("levels", {}).get(primary, {}) or {}
        hill = st.get("hill") or {}
        run = by_label.get(name)
        mal = r.get("n_malformed", run.read_stats.malformed if run is not None else None)
        table.add_row(name, f(r.get("n_episodes", r.get("episodes"))), f(r.get("n_queries", r.get("queries"))),
                      f(mal), f(st.get("entropy")), f(hill.get("1", st.get("effective_number"))),
                      f(r.get("question_copy_rate")), f(len(r.get("warnings") or [])))
    return table


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:
    app.command("analyze")(analyze_command)
