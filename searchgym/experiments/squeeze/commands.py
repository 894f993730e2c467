"""CLI: ``searchgym squeeze`` (the RL-vs-SFT experiment).

Writing the headline into a README and the results block into the docs page (``squeeze --readme``) is the CLI's
business, not the experiment library's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer


def _arms(value: str | None) -> tuple[str, ...] | None:
    if not value:
        return None
    if value.strip() == "all":
        from searchgym.experiments.squeeze.config import ARM_LABELS

        return tuple(ARM_LABELS)
    return tuple(a.strip() for a in value.split(",") if a.strip())


def _arms_help() -> str:
    """The --arms help: every arm, comma and space separated so the help wraps it instead of cutting it."""
    from searchgym.experiments.squeeze.config import ARM_LABELS

    return ("Comma-separated LM arms, or 'all': " + ", ".join(ARM_LABELS) + ". The controls of issue 31: sft_kl "
            "(continued SFT at matched KL), rs_sft (rejection-sampling SFT), grpo_shuffled, grpo_positive.")


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:

    @app.command("squeeze")
    def squeeze_cmd(
        quick: bool = typer.Option(False, "--quick", help="Alias of --preset quick."),
        preset: str = typer.Option(None, "--preset", help="quick (about 2.5 minutes: short RL arms from the shipped SFT "
                                                          "start), default, long (the RL dose that moves the "
                                                          "LM; docs/squeeze.md 'The RL dose') or learns (lr 2e-4 x "
                                                          "100 steps, the dose at which GRPO raises train success; "
                                                          "'A dose that learns')."),
        only_start: bool = typer.Option(False, "--only-start", help="Stop after the SFT start and its competence "
                                                                    "gate (OUT/sft/model, OUT/start.json)."),
        ship_start: bool = typer.Option(False, "--ship-start", help="With --only-start: copy the SFT start into "
                                                                    "the package data (the start `make demo` "
                                                                    "runs from)."),
        start_from: str = typer.Option(None, "--start-from", help="The SFT start: 'shipped' (the package's, built "
                                                                  "by this pipeline bit for bit; the presets' "
                                                                  "default for the tiny LM), 'train' (build this "
                                                                  "run's own: about 21 minutes; --only-start's "
                                                                  "default), or a model directory."),
        out_: str = typer.Option("runs/squeeze", "--out", help="Output directory (report.md, summary.json)."),
        seeds: int = typer.Option(None, "--seeds", help="Seeds per LM arm (default 6; --quick: 1)."),
        world_seed: int = typer.Option(None, "--world-seed", help="Seed of the procedural world (default 0). "
                                                                  "Another world needs its own SFT start: add "
                                                                  "--start-from train."),
        model: str = typer.Option(None, "--model", help="HF causal LM name or path (default: a tiny LM trained on "
                                                        "the world)."),
        device: str = typer.Option("cpu", "--device", help="cpu | cuda"),
        resume: bool = typer.Option(False, "--resume", help="Skip finished stages; continue interrupted arms."),
        overwrite: bool = typer.Option(False, "--overwrite", help="Write into an --out folder of other files "
                                                                  "(the run replaces its own names there)."),
        stop_on_failed_gate: bool = typer.Option(False, "--stop-on-failed-gate", help="When the SFT start fails "
                                                 "the competence gate, stop before the arms (exit code 3) instead "
                                                 "of running them for findings the report marks unusable."),
        arms: str = typer.Option(None, "--arms", help=_arms_help()),
        steps: int = typer.Option(None, "--steps", help="RL policy steps per arm."),
        learning_rate: float = typer.Option(None, "--learning-rate", help="The RL arms' learning rate (default "
                                                                          "the preset's: 5e-4; learns: 2e-4)."),
        minibatches: int = typer.Option(None, "--minibatches", help="Optimizer steps (mini-batches) per rollout "
                                                                    "batch in every RL arm (default 4; 1 = the "
                                                                    "ratio never moves, Clip-/KL-Cov cannot act)."),
        threads: int = typer.Option(None, "--threads", help="torch intra-op threads (default: torch's)."),
        jobs: int = typer.Option(None, "--jobs", help="Worker processes, one torch thread each, for the arm-seed "
                                                      "runs and the strategy-policy and organism seeds (default: 2 "
                                                      "for the tiny LM on a CPU with >= 2 cores, else 1)."),
        passk_max: int = typer.Option(None, "--passk-max", help="pass@k up to this k for the SFT start and each "
                                                                "arm (default 64; 0 disables it)."),
        strategy_seeds: int = typer.Option(None, "--strategy-seeds", help="Seeds per arm of the strategy-policy "
                                                                          "stage (default 20; --quick: 10; 0 "
                                                                          "disables it)."),
        strategy_arms: str = typer.Option(None, "--strategy-arms", help="Comma-separated arms of the strategy-"
                                                                        "policy stage (default: all 9)."),
        strategy_steps: int = typer.Option(None, "--strategy-steps", help="RL steps of the strategy-policy "
                                                                          "stage (default 60)."),
        headline: bool = typer.Option(False, "--headline", help="Only print the results markdown from "
                                                                "OUT/summary.json (with --readme: write it)."),
        worlds: str = typer.Option(None, "--worlds", help="Comma-separated run directories of this experiment on "
                                                          "other world seeds (`--world-seed N --out DIR`): the "
                                                          "results also pool every RL arm − continued SFT over "
                                                          "OUT and these worlds (OUT/worlds.json)."),
        controls: str = typer.Option(None, "--controls", help="With --worlds: comma-separated run directories "
                                                              "with the control arms (--arms sft,grpo,rs_sft,"
                                                              "grpo_shuffled): the summary says per world whether "
                                                              "GRPO's changes are RL's."),
        readme: str = typer.Option(None, "--readme", help="Also write a <= 8-line summary into this README "
                                                          "(between its HEADLINE markers) and the full results "
                                                          "into the docs page (--docs)."),
        docs: str = typer.Option(None, "--docs", help="The docs page the full results go to, between its "
                                                      "SQUEEZE-RESULTS markers (default: docs/squeeze.md next "
                                                      "to the README)."),
    ) -> None:
        """RL vs SFT on the embedded world: do RL arms squeeze the agent's query templates more than SFT?"""
        out = Path(out_)
        from dataclasses import replace

        from rich.console import Console

        from searchgym.errors import CompetenceGateError, ConfigError, SearchGymError
        from searchgym.experiments.squeeze import experiment as sq

        console = Console(stderr=True)
        if headline:
            p = out / "summary.json"
            if not p.exists():
                console.print(f"[red]no {p}: run `searchgym squeeze --out {out}` first[/red]")
                raise typer.Exit(2)
            block = _pool_worlds(out, worlds, console, controls)
            text = sq.headline(p, block)
            typer.echo(text)
            _update_readme(readme, docs, sq.short_headline(p, block), text, console)
            return
        try:
            if quick and preset not in (None, "quick"):
                raise ConfigError(f"--quick is --preset quick; it contradicts --preset {preset}")
            if ship_start and not only_start:
                raise ConfigError("--ship-start needs --only-start (the shipped start is built on its own)")
            _check_out(out, resume=resume, overwrite=overwrite)
            cfg = sq.SqueezeConfig.preset(quick, name=preset, out=str(out), seeds=seeds, model=model, device=device,
                                          only_start=only_start or None, ship_start=ship_start or None,
                                          resume=resume, stop_on_failed_gate=stop_on_failed_gate or None,
                                          arms=_arms(arms), threads=threads, jobs=jobs,
                                          start_from=start_from, world_seed=world_seed,
                                          passk_max=passk_max,
                                          minibatches=minibatches, strategy_seeds=strategy_seeds,
                                          strategy_arms=_arms(strategy_arms), strategy_steps=strategy_steps)
            if steps:
                cfg.rl = replace(cfg.rl, total_steps=int(steps))
            if model is not None:  # a real LM: its own learning rates and context
                cfg.rl = replace(cfg.rl, learning_rate=1e-6, max_new_tokens=64, max_context=4096,
                                 micro_batch_size=8)
                cfg.sft = replace(cfg.sft, learning_rate=1e-5, micro_batch_size=4, warmup_steps=5,
                                  max_steps=100, context_loss_weight=0.0)
            if learning_rate is not None:
                cfg.rl = replace(cfg.rl, learning_rate=float(learning_rate))
            summary = sq.run(cfg, log=lambda s: console.print(s, highlight=False))
        except CompetenceGateError as e:
            console.print(f"[yellow]{e}[/yellow]")
            raise typer.Exit(3) from e
        except SearchGymError as e:
            console.print(f"[red]{type(e).__name__}: {e}[/red]", soft_wrap=True, highlight=False)
            raise typer.Exit(2) from e
        if only_start:
            return
        block = _pool_worlds(out, worlds, console, controls)
        text = sq.headline(summary, block)
        typer.echo(text)
        _update_readme(readme, docs, sq.short_headline(summary, block), text, console)


def _check_out(out: Path, *, resume: bool, overwrite: bool) -> None:
    from searchgym.experiments.squeeze.outdir import check_out_dir

    check_out_dir(out, resume=resume, overwrite=overwrite)


def _pool_worlds(out: Path, worlds: str | None, console: Any, controls: str | None = None) -> dict[str, Any] | None:
    """With ``--worlds``: OUT's run and the listed runs pooled over world seeds, written to OUT/worlds.json (with
    ``controls``: the controls runs' ``rl_specific`` blocks under ``controls``)."""
    if not worlds:
        if controls:
            console.print("[yellow]warning: --controls is read only with --worlds; ignored[/yellow]")
        return None
    import json
    import warnings

    from searchgym.errors import SearchGymError
    from searchgym.experiments.squeeze.worlds import load_worlds, worlds_block
    from searchgym.train.checkpoint import atomic_write_text

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            dirs = [c.strip() for c in (controls or "").split(",") if c.strip()]
            from searchgym.experiments.squeeze.endpoints import controls_blocks, read_controls

            ctl = read_controls(dirs)
            for d, s in zip(dirs, ctl):
                s["_path"] = str(Path(d) / "summary.json")
            block = worlds_block(load_worlds([out, *(w.strip() for w in worlds.split(",") if w.strip())]),
                                 more_starts=ctl)
            if dirs:
                block.update(controls_blocks(dirs, ctl))
    except SearchGymError as e:
        console.print(f"[red]{type(e).__name__}: {e}[/red]", soft_wrap=True, highlight=False)
        raise typer.Exit(2) from e
    for w in caught:
        console.print(f"[yellow]warning: {w.message}[/yellow]")
    atomic_write_text(out / "worlds.json", json.dumps(block, indent=1))
    console.print(f"pooled over world seeds {block['worlds']}: {out / 'worlds.json'}")
    return block


def _update_readme(readme: str | None, docs: str | None, short: str, full: str, console: Any) -> None:
    """The short summary into the README, the full results into the docs page (both checked before either is
    written, so a missing marker leaves both files as they were)."""
    if not readme:
        return
    from searchgym.errors import SearchGymError

    page = Path(docs) if docs else Path(readme).parent / "docs" / "squeeze.md"
    try:
        _check_markers(Path(readme), README_BEGIN, README_END, legacy="<!-- HEADLINE -->")
        _check_markers(page, RESULTS_BEGIN, RESULTS_END)
        write_readme_headline(readme, short)
        write_between(page, RESULTS_BEGIN, RESULTS_END, full)
    except SearchGymError as e:
        console.print(f"[red]{type(e).__name__}: {e}[/red]", soft_wrap=True, highlight=False)
        raise typer.Exit(2) from e
    console.print(f"summary written into {readme}; full results into {page}")


README_BEGIN = "<!-- HEADLINE: written by `searchgym squeeze --readme README.md`; do not edit by hand -->"
README_END = "<!-- /HEADLINE -->"


RESULTS_BEGIN = "<!-- SQUEEZE-RESULTS -->"
RESULTS_END = "<!-- /SQUEEZE-RESULTS -->"


def _check_markers(path: Path, begin: str, end: str, legacy: str | None = None) -> None:
    from searchgym.errors import ConfigError

    if not path.exists():
        raise ConfigError(f"{path} does not exist; pass the file to update (--readme / --docs)")
    text = path.read_text(encoding="utf-8")
    if not ((begin in text and end in text) or (legacy and legacy in text)):
        raise ConfigError(f"{path} has no results markers; add a line `{begin}` followed by a line `{end}` where "
                          "the results go")


def write_between(path: str | Path, begin: str, end: str, markdown: str) -> None:
    """Put ``markdown`` between the ``begin`` and ``end`` marker lines of ``path`` (atomically)."""
    from searchgym.train.checkpoint import atomic_write_text

    p = Path(path)
    _check_markers(p, begin, end)
    head, rest = p.read_text(encoding="utf-8").split(begin, 1)
    _, tail = rest.split(end, 1)
    atomic_write_text(p, head + f"{begin}\n{markdown.rstrip()}\n{end}" + tail)


def write_readme_headline(readme: str | Path, markdown: str) -> None:
    """Put ``markdown`` between the headline markers of ``readme`` (atomically), replacing what was there.

    The README carries the markers once; a bare legacy ``<!-- HEADLINE -->`` line is accepted as the place."""
    from searchgym.errors import ConfigError
    from searchgym.train.checkpoint import atomic_write_text

    path = Path(readme)
    if not path.exists():
        raise ConfigError(f"{path} does not exist; pass the README to update with --readme")
    text = path.read_text(encoding="utf-8")
    block = f"{README_BEGIN}\n{markdown.rstrip()}\n{README_END}"
    if README_BEGIN in text and README_END in text:
        head, rest = text.split(README_BEGIN, 1)
        _, tail = rest.split(README_END, 1)
        new = head + block + tail
    elif "<!-- HEADLINE -->" in text:
        new = text.replace("<!-- HEADLINE -->", block, 1)
    else:
        raise ConfigError(f"{path} has no headline markers; add a line `{README_BEGIN}` followed by a line "
                          f"`{README_END}` where the headline goes")
    atomic_write_text(path, new)


