"""CLI: ``searchgym rollout`` and ``searchgym eval``.

Heavy modules (torch, transformers, the env) load inside the commands so ``searchgym --help`` stays fast.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from searchgym.agents.registry import HEURISTIC_NAMES
from searchgym.envs.sources import V3_SPLITS, WORLD_SPLITS

AgentOpt = Annotated[str, typer.Option(
    "--agent", "-a", help=f"A heuristic ({', '.join(HEURISTIC_NAMES)}), a Hugging Face model (local dir, "
                          "org/name or hf:name), or with --base-url the model name on an OpenAI-compatible server.")]
EnvOpt = Annotated[str, typer.Option("--env", help="Gymnasium env id.")]
SplitOpt = Annotated[Optional[str], typer.Option(  # noqa: UP045
    "--split", help=f"World split: {', '.join(WORLD_SPLITS)} (default train). {' and '.join(V3_SPLITS)} come from "
                    "a version-3 world of the same seed and size (the squeeze experiment's world has 4,000 "
                    "entities: scripts/strategy_table.py).")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed: question order and agent sampling.")]
NumEnvsOpt = Annotated[int, typer.Option("--num-envs", "-b", help="Parallel env slots (one batched search per step).")]
BaseUrlOpt = Annotated[Optional[str], typer.Option(  # noqa: UP045
    "--base-url", help="OpenAI-compatible server (e.g. http://127.0.0.1:8000/v1); --agent is then the model name.")]
TempOpt = Annotated[float, typer.Option("--temperature", help="Sampling temperature (LM / OpenAI agents).")]
TopPOpt = Annotated[float, typer.Option("--top-p", help="Nucleus sampling mass (LM / OpenAI agents).")]
MaxTokOpt = Annotated[int, typer.Option("--max-new-tokens", help="Tokens per action (LM / OpenAI agents).")]
DeviceOpt = Annotated[str, typer.Option("--device", help="cpu or cuda (LM agent).")]
CorpusOpt = Annotated[Optional[str], typer.Option(  # noqa: UP045
    "--corpus", help="Corpus file or index directory instead of the embedded world.")]
DatasetOpt = Annotated[Optional[str], typer.Option(  # noqa: UP045
    "--dataset", help="QA file (FlashRAG jsonl, Search-R1 parquet, ...) instead of the world's split.")]
RetrieverOpt = Annotated[Optional[str], typer.Option(  # noqa: UP045
    "--retriever", help="bm25 (default), dense, hybrid, or an http:// /retrieve server.")]
TopKOpt = Annotated[Optional[int], typer.Option("--top-k", help="Passages per search (default 3).")]  # noqa: UP045
TurnsOpt = Annotated[Optional[int], typer.Option("--max-turns", help="Searches per episode (default 4).")]  # noqa: UP045
PresetOpt = Annotated[Optional[str], typer.Option(  # noqa: UP045
    "--preset", help="Named env settings (searchgym.envs.presets, e.g. squeeze); --top-k/--max-turns override them.")]
RetriesOpt = Annotated[int, typer.Option("--max-retries", help="OpenAI agent: retries per request (with backoff).")]
TimeoutOpt = Annotated[float, typer.Option("--request-timeout", help="OpenAI agent: seconds per request.")]
ProgressOpt = Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar.")]
SummaryOpt = Annotated[Optional[Path], typer.Option(  # noqa: UP045
    "--summary-json", help="Also write the summary (and timing) as JSON here.")]
FormatOpt = Annotated[Optional[str], typer.Option(  # noqa: UP045
    "--format", help="Format of the --dataset file: search_r1, flashrag, hotpotqa, musique, 2wiki, ircot "
                     "(default: detect).")]
LenientOpt = Annotated[bool, typer.Option("--lenient", help="Skip malformed --dataset records (and count them).")]
RepeatOpt = Annotated[bool, typer.Option(
    "--repeat", help="Allow -n beyond the number of questions (the questions are cycled, reshuffled).")]
ApiKeyOpt = Annotated[Optional[str], typer.Option(  # noqa: UP045
    "--api-key", envvar="SEARCHGYM_API_KEY", show_envvar=True,
    help="API key of an http:// --retriever server (sent as a bearer token).")]
PromptOpt = Annotated[Optional[str], typer.Option(  # noqa: UP045
    "--prompt-template", help="A file holding the prompt template (with {question}), or search_r1 / tool_call. "
                              "Default: the template saved in a model directory searchgym trained, else search_r1.")]


DEFAULT_N = 100  # questions when -n is not given (fewer if the data has fewer)


def _fail(message: str, code: int = 1) -> None:
    from rich.console import Console

    Console(stderr=True).print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _env_kwargs(corpus: str | None, dataset: str | None, retriever: str | None, top_k: int | None,
                max_turns: int | None, preset: str | None = None) -> dict[str, Any]:
    kw: dict[str, Any] = {}
    if preset is not None:
        from searchgym.envs.presets import get_preset
        from searchgym.errors import SearchGymError

        try:
            kw.update(get_preset(preset))
        except SearchGymError as exc:
            _fail(str(exc))
    for key, val in (("corpus", corpus), ("dataset", dataset), ("retriever", retriever), ("top_k", top_k),
                     ("max_turns", max_turns)):
        if val is not None:
            kw[key] = val
    return kw


def _prompt_template(value: str | None, agent: str) -> tuple[Any, dict[str, Any]]:
    """``--prompt-template`` (a file or a named style), else the settings saved in a model directory."""
    from searchgym.train.model_meta import read_prompt_meta

    if value is not None:
        if value in ("search_r1", "tool_call"):
            return value, {}
        p = Path(value)
        if not p.is_file():
            _fail(f"--prompt-template {value!r}: no such file (give a file holding a template with {{question}}, "
                  "or search_r1 / tool_call)", 2)
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            _fail(f"--prompt-template {value}: cannot read it as UTF-8 text ({exc})", 2)
        if "{question}" not in text:
            _fail(f"--prompt-template {value}: the template has no {{question}} placeholder", 2)
        return text, {}
    meta = read_prompt_meta(agent)
    if meta is None:
        return None, {}
    return meta.pop("prompt_template"), meta


def _prepare_env(*, agent: str, env: str, split: str | None, n: int | None, repeat: bool, corpus: str | None,
                 dataset: str | None, fmt: str | None, lenient: bool, retriever: str | None, top_k: int | None,
                 max_turns: int | None, preset: str | None, api_key: str | None,
                 prompt_template: str | None) -> tuple[dict[str, Any], int]:
    """The env kwargs of ``rollout`` / ``eval`` and the number of questions: the QA file loaded here (so
    ``--format`` / ``--lenient`` apply and errors name CLI flags), the retriever's API key, the prompt; ``-n``
    checked against the data (default: 100, or all questions if fewer)."""
    from rich.console import Console

    from searchgym.data.loaders import cli_message, load_qa
    from searchgym.errors import SearchGymError

    kw = _env_kwargs(corpus, None, retriever, top_k, max_turns, preset)
    available: int | None = None
    if dataset is not None:
        try:
            qs = load_qa(dataset, format=fmt, lenient=lenient)
        except SearchGymError as exc:
            _fail(cli_message(str(exc)), 2)
        if qs.report.skipped:
            Console(stderr=True).print(f"[yellow]skipped {qs.report.skipped} malformed records[/] of {dataset}; "
                                       f"first: {qs.report.errors[0]}", highlight=False, soft_wrap=True)
        if not qs:
            _fail(f"{dataset} holds no questions", 2)
        kw["dataset"] = list(qs)
        available = len(qs)
    elif fmt is not None or lenient:
        _fail("--format and --lenient apply to a --dataset file", 2)
    elif env.startswith("searchgym/"):
        from searchgym.envs.sources import _world, world_key

        try:
            available = len(_world(world_key(split=split)).split(split or "train"))
        except (SearchGymError, KeyError, ValueError):
            available = None  # the env reports the bad split itself
    if n is None:
        n = min(DEFAULT_N, available) if available is not None else DEFAULT_N
    if available is not None and n > available and not repeat:
        what = f"{dataset}" if dataset is not None else f"the {split or 'train'!r} split"
        _fail(f"-n {n} is more than the {available} questions of {what}; use -n {available} or less, or pass "
              f"--repeat to cycle through the questions again", 2)
    if retriever is not None and retriever.startswith(("http://", "https://")) and api_key:
        kw["retriever_kwargs"] = {"api_key": api_key}
    template, saved = _prompt_template(prompt_template, agent)
    if template is not None:
        kw["prompt_template"] = template
    for key, val in saved.items():
        kw.setdefault(key, val)
    return kw, n


def _fmt(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def summary_table(summary: dict[str, dict[str, float]], title: str) -> Any:
    from rich.table import Table

    t = Table(title=title, title_justify="left", caption="recall: share of gold passages retrieved; searches: per "
              "episode; invalid: share of actions", caption_justify="left")
    for col in ("family", "n", "EM", "F1", "recall", "searches", "invalid"):
        t.add_column(col, justify="left" if col == "family" else "right", no_wrap=True)
    for fam, row in summary.items():
        t.add_row(fam if fam != "all" else "[bold]all[/]", str(int(row["episodes"])), _fmt(row["em"]),
                  _fmt(row["f1"]), _fmt(row["recall"]), f"{row['searches']:.2f}", _fmt(row["invalid"]),
                  end_section=fam == "all")
    return t


def show_episode(console: Any, traj: Any) -> None:
    from rich.markup import escape

    mark = "[green]✓[/]" if traj.em else "[red]✗[/]"
    family = f" · {escape(str(traj.family))}" if traj.family is not None else ""  # a QA file has no families
    console.rule(f"{mark} {escape(traj.question_id)}{family}", align="left")
    console.print(f"[bold]Q:[/] {escape(traj.question)}")
    for i, s in enumerate(traj.steps, 1):
        act = " ".join(s.action.split())
        console.print(f"  [cyan]{i}. {s.kind}[/] {escape(act[:300])}")
        titles = s.titles or s.extra.get("titles")
        if titles:
            hit = "" if s.gold_hit is None else (" [green](gold hit)[/]" if s.gold_hit else " [dim](no gold)[/]")
            console.print(f"     [dim]→ {escape('; '.join(map(str, titles)))}[/]{hit}")
    console.print(f"  [bold]prediction:[/] {escape(str(traj.prediction))}   [bold]gold:[/] "
                  f"{escape(' | '.join(traj.answers[:3]))}   EM {traj.em}  F1 {traj.f1:.2f}")


def _run(agent_spec: str, *, env: str, split: str | None, n: int, samples: int, seed: int, out: Path | None,
         num_envs: int, base_url: str | None, temperature: float, top_p: float, max_new_tokens: int,
         device: str, env_kw: dict[str, Any], progress: bool, max_retries: int = 3,
         request_timeout: float = 30.0) -> tuple[list, float]:
    import time

    from searchgym.agents.registry import make_agent
    from searchgym.agents.rollout import rollout
    from searchgym.errors import AgentUnavailableError, SearchGymError

    try:
        extra = {"max_retries": max_retries, "timeout": request_timeout} if base_url else {}
        agent = make_agent(agent_spec, seed=seed, base_url=base_url, temperature=temperature, top_p=top_p,
                           max_new_tokens=max_new_tokens, device=device, **extra)
    except SearchGymError as exc:
        _fail(str(exc))
    written = [0]

    def count(_t: Any) -> None:
        written[0] += 1

    where = f" in {out}" if out is not None else ""
    t0 = time.perf_counter()
    try:
        trajs = rollout(agent, env, n, samples=samples, split=split, out=out, seed=seed, num_envs=num_envs,
                        progress=progress, env_kwargs=env_kw or None, on_episode=count)
    except KeyboardInterrupt:
        from rich.console import Console

        Console(stderr=True).print(f"[yellow]interrupted:[/] {written[0]} finished episodes{where}")
        raise typer.Exit(130) from None
    except AgentUnavailableError as exc:
        _fail(f"{exc}\n{written[0]} finished episodes are saved{where}.")
    except SearchGymError as exc:
        from searchgym.data.loaders import cli_message

        _fail(f"{cli_message(str(exc))}\n{written[0]} finished episodes are saved{where}.", 2)
    finally:
        close = getattr(agent, "close", None)
        if callable(close):
            close()
    return trajs, time.perf_counter() - t0


def rollout_cmd(
    agent: AgentOpt,
    n: Annotated[Optional[int], typer.Option(  # noqa: UP045
        "-n", "--num-questions", help="Questions to roll out (default: 100, or all if there are fewer).")] = None,
    out: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        "--out", "-o", help="Trajectory JSONL (one flushed line per finished episode).")] = None,
    env: EnvOpt = "searchgym/SearchQA-v0",
    split: SplitOpt = None,
    samples: Annotated[int, typer.Option("--samples", "-k", help="Episodes per question.")] = 1,
    seed: SeedOpt = 0,
    show: Annotated[bool, typer.Option("--show", help="Print episodes readably.")] = False,
    show_max: Annotated[int, typer.Option("--show-max", help="With --show: at most this many episodes.")] = 20,
    num_envs: NumEnvsOpt = 32,
    base_url: BaseUrlOpt = None,
    temperature: TempOpt = 1.0,
    top_p: TopPOpt = 1.0,
    max_new_tokens: MaxTokOpt = 64,
    device: DeviceOpt = "cpu",
    corpus: CorpusOpt = None,
    dataset: DatasetOpt = None,
    retriever: RetrieverOpt = None,
    top_k: TopKOpt = None,
    max_turns: TurnsOpt = None,
    preset: PresetOpt = None,
    max_retries: RetriesOpt = 3,
    request_timeout: TimeoutOpt = 30.0,
    progress: ProgressOpt = True,
    summary_json: SummaryOpt = None,
    fmt: FormatOpt = None,
    lenient: LenientOpt = False,
    repeat: RepeatOpt = False,
    api_key: ApiKeyOpt = None,
    prompt_template: PromptOpt = None,
) -> None:
    """Roll an agent out: trajectories to JSONL and a summary table (EM, F1, recall, searches, invalid rate)."""
    from rich.console import Console

    from searchgym.agents.rollout import summarize

    env_kw, n = _prepare_env(agent=agent, env=env, split=split, n=n, repeat=repeat, corpus=corpus,
                             dataset=dataset, fmt=fmt, lenient=lenient, retriever=retriever, top_k=top_k,
                             max_turns=max_turns, preset=preset, api_key=api_key, prompt_template=prompt_template)
    trajs, secs = _run(agent, env=env, split=split, n=n, samples=samples, seed=seed, out=out, num_envs=num_envs,
                       base_url=base_url, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
                       device=device, env_kw=env_kw, progress=progress, max_retries=max_retries,
                       request_timeout=request_timeout)
    console = Console()
    if show:
        for t in trajs[:show_max]:
            show_episode(console, t)
    summary = summarize(trajs)
    rate = len(trajs) / secs * 60 if secs > 0 else float("inf")
    data = dataset or split or "train"
    console.print(summary_table(summary, f"{agent} on {env} ({data}): {len(trajs)} episodes, {rate:,.0f} episodes/min"))
    if out is not None:
        console.print(f"trajectories: {out}")
    if summary_json is not None:
        summary_json.write_text(json.dumps({"agent": agent, "env": env, "split": split, "episodes": len(trajs),
                                            "seconds": secs, "episodes_per_min": rate, "summary": summary},
                                           indent=2))


def eval_cmd(
    agent: AgentOpt,
    n: Annotated[Optional[int], typer.Option(  # noqa: UP045
        "-n", "--num-questions", help="Questions to evaluate (default: 100, or all if there are fewer).")] = None,
    samples: Annotated[int, typer.Option("--samples", "-k", help="Samples per question (K); pass@k for k<=K.")] = 8,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Also write the trajectories here.")] = None,  # noqa: UP045
    env: EnvOpt = "searchgym/SearchQA-v0",
    split: SplitOpt = None,
    seed: SeedOpt = 0,
    num_envs: NumEnvsOpt = 32,
    base_url: BaseUrlOpt = None,
    temperature: TempOpt = 1.0,
    top_p: TopPOpt = 1.0,
    max_new_tokens: MaxTokOpt = 64,
    device: DeviceOpt = "cpu",
    corpus: CorpusOpt = None,
    dataset: DatasetOpt = None,
    retriever: RetrieverOpt = None,
    top_k: TopKOpt = None,
    max_turns: TurnsOpt = None,
    preset: PresetOpt = None,
    max_retries: RetriesOpt = 3,
    request_timeout: TimeoutOpt = 30.0,
    progress: ProgressOpt = True,
    summary_json: SummaryOpt = None,
    fmt: FormatOpt = None,
    lenient: LenientOpt = False,
    repeat: RepeatOpt = False,
    api_key: ApiKeyOpt = None,
    prompt_template: PromptOpt = None,
) -> None:
    """pass@k (unbiased estimator, k = 1, 2, 4, ... <= K) overall and per family, from K samples per question."""
    from rich.console import Console
    from rich.table import Table

    from searchgym.agents.rollout import pass_at_k_table, summarize

    env_kw, n = _prepare_env(agent=agent, env=env, split=split, n=n, repeat=repeat, corpus=corpus,
                             dataset=dataset, fmt=fmt, lenient=lenient, retriever=retriever, top_k=top_k,
                             max_turns=max_turns, preset=preset, api_key=api_key, prompt_template=prompt_template)
    trajs, secs = _run(agent, env=env, split=split, n=n, samples=samples, seed=seed, out=out, num_envs=num_envs,
                       base_url=base_url, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
                       device=device, env_kw=env_kw, progress=progress, max_retries=max_retries,
                       request_timeout=request_timeout)
    ks, table = pass_at_k_table(trajs)
    console = Console()
    t = Table(title=f"pass@k of {agent} ({len({x.question_id for x in trajs})} questions x {samples} samples, "
                    "unbiased estimator)", title_justify="left")
    t.add_column("family")
    t.add_column("questions", justify="right")
    for k in ks:
        t.add_column(f"pass@{k}", justify="right")
    counts: dict[str, set] = {}
    for x in trajs:
        counts.setdefault("all", set()).add(x.question_id)
        counts.setdefault(str(x.family) if x.family is not None else "-", set()).add(x.question_id)
    for fam in ["all", *sorted(f for f in table if f != "all")]:
        t.add_row(fam, str(len(counts.get(fam, ()))), *[f"{table[fam][k]:.3f}" for k in ks], end_section=fam == "all")
    console.print(t)
    summary = summarize(trajs)
    console.print(summary_table(summary, f"per-sample summary ({len(trajs)} episodes, {secs:.1f} s)"))
    if summary_json is not None:
        summary_json.write_text(json.dumps({"agent": agent, "samples": samples, "ks": ks,
                                            "pass_at_k": {f: {str(k): v for k, v in row.items()}
                                                          for f, row in table.items()},
                                            "summary": summary, "seconds": secs}, indent=2))


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:
    app.command("rollout")(rollout_cmd)
    app.command("eval")(eval_cmd)
