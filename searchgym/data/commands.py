"""``searchgym data ...``: export the world, summarise it, inspect QA files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:
    data = groups["data"]

    @data.command("export-world")
    def export_world_cmd(
        out: Annotated[Path, typer.Option("--out", help="Output directory (created if missing).")],
        seed: Annotated[int, typer.Option("--seed", help="World seed: same seed, same files.")] = 0,
        size: Annotated[Optional[int], typer.Option(  # noqa: UP045 - typer needs Optional on 3.10
            "--size", help="Approximate number of passages (default: the embedded world, ~2.9k).")] = None,
        questions: Annotated[Optional[int], typer.Option(  # noqa: UP045
            "--questions", help="Total questions over all splits.")] = None,
        confusable: Annotated[float, typer.Option(
            "--confusable", help="Share of near-duplicate entities (0-0.9).")] = 0.2,
        data_source: Annotated[str, typer.Option(
            "--data-source", help="The parquet data_source column: verl picks its scorer by it "
            "(searchgym_world: searchgym.integrations.verl.compute_score; searchR1_nq: verl's own).")
        ] = "searchgym_world",
    ) -> None:
        """Write the world as Search-R1 corpus.jsonl, per-split verl parquet and FlashRAG jsonl."""
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        from searchgym.data import SPLITS, World, default_world, export_world
        from searchgym.data.world.world import DEFAULT_N_ENTITIES

        console = Console()
        n_files = 2 + 2 * len(SPLITS)
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                      TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(), console=console) as prog:
            t_gen = prog.add_task("generating world", total=1)
            if size is None and questions is None and confusable == 0.2:
                world = default_world(seed)
            else:
                kw = {"n_passages": size} if size is not None else {"n_entities": DEFAULT_N_ENTITIES}
                world = World.generate(seed=seed, confusable_share=confusable, n_questions=questions, **kw)
            prog.update(t_gen, completed=1)
            t_out = prog.add_task(f"writing {out}", total=n_files)
            export_world(world, out, data_source=data_source,
                         on_step=lambda name: prog.update(t_out, advance=1, description=f"wrote {name}"))
        console.print(f"[green]wrote[/] {len(world.passages):,} passages and {len(world.questions):,} questions "
                      f"({', '.join(f'{s} {len(v)}' for s, v in world.splits.items())}) to {out}")

    @data.command("info")
    def info_cmd(
        path: Annotated[str, typer.Argument(help="A QA file, a directory of split files, 'world[:seed]', "
                                            "or a Hugging Face dataset name.")] = "world",
        format: Annotated[Optional[str], typer.Option(  # noqa: UP045
            "--format", help="Force a format (default: detect).")] = None,
        split: Annotated[Optional[str], typer.Option("--split", help="Only this split.")] = None,  # noqa: UP045
        lenient: Annotated[bool, typer.Option("--lenient", help="Skip malformed records (count them).")] = False,
        examples: Annotated[int, typer.Option("--examples", help="Example questions per family.")] = 1,
    ) -> None:
        """Count questions per split and family, and show examples."""
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table

        from searchgym.data import load_qa
        from searchgym.data.loaders import cli_message
        from searchgym.errors import SearchGymError

        console = Console()
        try:
            qs = load_qa(path, format=format, split=split, lenient=lenient)
        except SearchGymError as exc:
            Console(stderr=True).print(f"[red]error:[/] {escape(cli_message(str(exc)))}", soft_wrap=True)
            raise typer.Exit(2) from None
        counts: dict[tuple[str, str], int] = {}
        shown: dict[str, list] = {}
        for q in qs:
            key = (str(q.metadata.get("split", "-")), str(q.metadata.get("family", "-")))
            counts[key] = counts.get(key, 0) + 1
            shown.setdefault(key[1], [])
            if len(shown[key[1]]) < examples:
                shown[key[1]].append(q)
        table = Table(title=f"{path}: {len(qs):,} questions ({qs.report.format})")
        for col in ("split", "family", "questions"):
            table.add_column(col)
        for (s, f), n in sorted(counts.items()):
            table.add_row(s, f, f"{n:,}")
        console.print(table)
        if qs.report.skipped:
            console.print(f"[yellow]skipped {qs.report.skipped} malformed records[/]; first: {qs.report.errors[:3]}")
        for fam, items in shown.items():
            for q in items:
                console.print(f"[bold]{fam}[/]: {q.question}  ->  {q.answers}  (gold {q.supporting_ids})")

    @data.command("pool")
    def pool_cmd(
        files: Annotated[list[Path], typer.Argument(help="HotpotQA / MuSiQue / 2Wiki files with paragraphs.")],
        out: Annotated[Path, typer.Option("--out", help="Directory for corpus.jsonl and questions.jsonl.")],
        lenient: Annotated[bool, typer.Option("--lenient", help="Skip malformed records (count them).")] = False,
        format: Annotated[Optional[str], typer.Option(  # noqa: UP045
            "--format", help="Format of every file: hotpotqa, musique, 2wiki, ircot (default: detect).")] = None,
    ) -> None:
        """Pool the paragraphs of multi-hop QA files into one deduplicated corpus (+ questions with gold ids)."""
        from rich.console import Console
        from rich.markup import escape

        from searchgym.data import pooled_corpus
        from searchgym.data.export import write_flashrag_jsonl
        from searchgym.data.loaders import cli_message
        from searchgym.errors import SearchGymError
        from searchgym.retrieval.corpus import write_jsonl

        console = Console()
        try:
            passages, questions = pooled_corpus(files, lenient=lenient, format=format)
        except SearchGymError as exc:
            Console(stderr=True).print(f"[red]error:[/] {escape(cli_message(str(exc)))}", soft_wrap=True)
            raise typer.Exit(2) from None
        out.mkdir(parents=True, exist_ok=True)
        write_jsonl(passages, out / "corpus.jsonl")
        write_flashrag_jsonl(questions, out / "questions.jsonl")
        console.print(f"[green]wrote[/] {len(passages):,} passages and {len(questions):,} questions to {out}")
