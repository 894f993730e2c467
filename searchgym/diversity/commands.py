"""``searchgym analyze RUN [RUN...] --out DIR``: offline query-diversity analysis of runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def analyze_command(
    runs: Annotated[list[Path], typer.Argument(
        help="Run files or folders: searchgym trajectories, a verl rollout_data_dir, Search-R1 dumps, "
             "or any jsonl with --text-field.")],
    out: Annotated[Path, typer.Option(
        "--out", "-o", help="Output folder for report.md, report.html, summary.json and the PNGs.")],
    fmt: Annotated[str, typer.Option("--format", help="auto | searchgym | verl | search-r1 | jsonl")] = "auto",
    text_field: Annotated[str | None, typer.Option(
        help="jsonl: field with the query text (dotted path; a list = several queries; <search> tags "
             "are parsed).")] = None,
    step_field: Annotated[str | None, typer.Option(help="jsonl: field with the training step.")] = None,
    question_field: Annotated[str | None, typer.Option(help="jsonl: field with the question.")] = None,
    reward_field: Annotated[str | None, typer.Option(
        help="jsonl: field with the reward (default: reward or score).")] = None,
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
) -> None:
    """Analyse query diversity of one or more runs and write a report (markdown, HTML, PNG, summary.json)."""
    from rich.console import Console
    from rich.table import Table

    from searchgym.diversity.report import analyze_runs
    from searchgym.errors import SearchGymError

    console = Console()
    lv = [x.strip() for x in levels.split(",") if x.strip()]
    if semantic and "semantic" not in lv:
        lv.append("semantic")
    title_list: list[str] = []
    if titles is not None:
        title_list = [t.strip() for t in titles.read_text(encoding="utf-8").splitlines() if t.strip()]
    try:
        summary = analyze_runs([str(r) for r in runs], out, fmt=fmt, text_field=text_field, step_field=step_field,
                               question_field=question_field, reward_field=reward_field, levels=lv,
                               titles=title_list, success_threshold=success_threshold, n_boot=n_boot, seed=seed,
                               plots=not no_plots)
    except SearchGymError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(code=2) from exc
    primary = "slot" if "slot" in lv else lv[0]
    table = Table(title=f"query diversity ({primary} level)")
    for col in ("run", "episodes", "queries", "entropy", "eff. number", "top-1 mass", "move entropy"):
        table.add_column(col)

    def f(v: object) -> str:
        return f"{v:.3f}" if isinstance(v, float) else ("–" if v is None else str(v))

    for name, r in summary["runs"].items():
        st = r["levels"].get(primary, {})
        table.add_row(name, str(r["episodes"]), str(r["queries"]), f(st.get("entropy")),
                      f(st.get("effective_number")), f(st.get("top1_mass")), f(r["moves"]["entropy"]))
    console.print(table)
    console.print(f"report: {out / 'report.md'}, {out / 'report.html'}, {out / 'summary.json'}")


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:
    app.command("analyze")(analyze_command)
