"""CLI: ``searchgym sft`` and ``searchgym rl`` (single runs). ``searchgym squeeze`` lives with its experiment
(:mod:`searchgym.experiments.squeeze.commands`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer


def _quiet_hf() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:

    @app.command("sft")
    def sft_cmd(
        model: str = typer.Option(..., "--model", help="Model directory or HF name to fine-tune."),
        trajectories_: str = typer.Option(None, "--trajectories", help="Demonstrations (trajectory JSONL); "
                                                                       "default: record the diverse agent."),
        out_: str = typer.Option("runs/sft", "--out"),
        split: str = typer.Option("train", "--split", help="World split the demonstrations come from."),
        passes: int = typer.Option(2, "--passes", help="Diverse-agent passes when recording demonstrations."),
        questions: int = typer.Option(None, "--questions", "-n", help="Record demonstrations on only the first "
                                                                      "N questions of the split (default: all)."),
        epochs: float = typer.Option(3.0, "--epochs"),
        max_steps: int = typer.Option(None, "--max-steps", help="Stop after this many optimizer steps."),
        lr: float = typer.Option(2e-3, "--lr"),
        batch_size: int = typer.Option(32, "--batch-size"),
        device: str = typer.Option("cpu", "--device"),
        resume: bool = typer.Option(False, "--resume"),
    ) -> None:
        """Supervised fine-tuning on demonstrations (masked loss on the agent's own tokens)."""
        out = Path(out_)
        trajectories = Path(trajectories_) if trajectories_ else None
        from rich.console import Console
        from rich.markup import escape

        from searchgym.errors import SearchGymError
        from searchgym.train.sft import SFTArgs, train_sft
        from searchgym.train.tiny_lm import load_lm

        console = Console(stderr=True)
        _quiet_hf()
        try:
            args = SFTArgs(learning_rate=lr, epochs=epochs, max_steps=max_steps, batch_size=batch_size,
                           micro_batch_size=min(16, max(1, batch_size)), device=device)
            args.validate()
            try:
                m, tok = load_lm(model, device=device)
            except (OSError, ValueError) as e:  # HF raises these for a bad name, path or config
                msg = str(e) if isinstance(e, SearchGymError) else (
                    f"cannot load model {model!r}: {(str(e).splitlines() or [''])[0]}. Give a local model "
                    "directory (e.g. runs/squeeze/base_model) or a hub name while online")
                console.print(f"[red]ModelLoadError:[/red] {escape(msg)}", highlight=False, soft_wrap=True)
                raise typer.Exit(2) from None
            template = _model_prompt(model)
            demos = _demos(tok, trajectories, split, passes, console, questions=questions, template=template)
            out.mkdir(parents=True, exist_ok=True)
            hist = train_sft(m, tok, demos, args, out_dir=out, resume=resume,
                             log=lambda r: console.print(f"step {int(r['step'])} loss {r['losses/sft']:.4f}")
                             if r["step"] % 10 == 0 else None)
        except SearchGymError as e:
            console.print(f"[red]{type(e).__name__}: {e}[/red]", highlight=False)
            raise typer.Exit(2) from e
        m.save_pretrained(out / "model")
        tok.save_pretrained(out / "model")
        from searchgym.train.model_meta import write_prompt_meta

        write_prompt_meta(out / "model", template, max_turns=4, passage_chars=110)
        console.print(f"{len(hist)} steps; model in {out / 'model'}")

    @app.command("rl")
    def rl_cmd(
        model: str = typer.Option(..., "--model", help="Model directory or HF name (e.g. an SFT checkpoint)."),
        out_: str = typer.Option("runs/rl", "--out"),
        algo: str = typer.Option("grpo", "--algo", help="grpo | rloo | ppo"),
        policy_loss: str = typer.Option("ppo_clip", "--loss", help="ppo_clip | clip_cov | kl_cov"),
        steps: int = typer.Option(30, "--steps"),
        prompts: int = typer.Option(8, "--prompts", help="Questions per step."),
        group_size: int = typer.Option(8, "--group-size"),
        lr: float = typer.Option(5e-4, "--lr"),
        clip_high: float = typer.Option(0.2, "--clip-high", help="0.28 = DAPO clip-higher"),
        ent_coef: float = typer.Option(0.0, "--ent-coef"),
        kl_coef: float = typer.Option(0.0, "--kl-coef"),
        kl_estimator: str = typer.Option("low_var_kl", "--kl-estimator", help="k1 | k2 | k3 | low_var_kl | abs"),
        max_turns: int = typer.Option(2, "--max-turns"),
        prompt_template: str = typer.Option("Question: {question}\n", "--prompt-template",
                                            help="'search_r1' for a pretrained LM"),
        world_seed: int = typer.Option(0, "--world-seed"),
        n_entities: int = typer.Option(400, "--n-entities"),
        seed: int = typer.Option(1, "--seed"),
        device: str = typer.Option("cpu", "--device"),
        resume: bool = typer.Option(False, "--resume"),
    ) -> None:
        """One RL run (GRPO / RLOO / PPO with the entropy controls) on the embedded world's train split."""
        out = Path(out_)
        from rich.console import Console

        from searchgym.data import World
        from searchgym.envs.env import SearchEnv
        from searchgym.errors import SearchGymError
        from searchgym.retrieval import CachedRetriever, build_retriever
        from searchgym.train.rl import RLArgs, train_rl
        from searchgym.train.tiny_lm import load_lm

        console = Console(stderr=True)
        _quiet_hf()
        try:
            args = RLArgs(algo=algo, policy_loss=policy_loss, total_steps=steps, prompts_per_step=prompts,
                          group_size=group_size, learning_rate=lr, clip_high=clip_high, ent_coef=ent_coef,
                          kl_coef=kl_coef, kl_estimator=kl_estimator, seed=seed, device=device)
            args.validate()
            world = World.generate(seed=world_seed, n_entities=n_entities)
            retr = CachedRetriever(build_retriever(world.passages, kind="bm25"))
            envs = [SearchEnv(dataset=world.split("train"), retriever=retr, max_turns=max_turns,
                              prompt_template=prompt_template, passage_chars=110)
                    for _ in range(args.prompts_per_step * args.group_size)]
            m, tok = load_lm(model, device=device)
            train_rl(m, tok, envs, args, out_dir=out, resume=resume,
                     log=lambda r: console.print(f"step {int(r['step'])} reward {r['charts/reward']:.3f} "
                                                 f"tok-H {r['charts/token_entropy']:.3f}"))
        except SearchGymError as e:
            console.print(f"[red]{type(e).__name__}: {e}[/red]")
            raise typer.Exit(2) from e
        m.save_pretrained(out / "final_model")
        tok.save_pretrained(out / "final_model")
        from searchgym.train.model_meta import write_prompt_meta

        write_prompt_meta(out / "final_model", prompt_template, max_turns=max_turns, passage_chars=110)
        console.print(f"model in {out / 'final_model'}; metrics in {out / 'metrics.jsonl'}")


def _model_prompt(model: str) -> str:
    """The prompt template squeeze saved with ``model`` (a directory), else the tiny LM's."""
    from searchgym.train.model_meta import read_prompt_meta

    meta = read_prompt_meta(model)
    return str(meta["prompt_template"]) if meta else "Question: {question}\n"


def _demos(tok: Any, trajectories: Path | None, split: str, passes: int, console: Any, *,
           questions: int | None = None, template: str = "Question: {question}\n") -> list[Any]:
    """Demonstration episodes: replay a trajectory file's actions in the env, or record the diverse agent.

    The envs pose questions of the embedded world's ``split`` and search the world's corpus (BM25, one
    retriever shared by all envs).
    """
    from searchgym.agents.heuristics import DiverseAgent
    from searchgym.data import default_world
    from searchgym.envs.env import SearchEnv
    from searchgym.errors import ConfigError
    from searchgym.retrieval import CachedRetriever, build_retriever
    from searchgym.train.rollout import AgentPolicy, run_episodes

    world = default_world()
    if split not in world.splits:
        raise ConfigError(f"unknown split {split!r}; use one of {', '.join(world.splits)} (--split)")
    exs = world.split(split)
    if questions is not None:
        if questions < 1:
            raise ConfigError(f"--questions must be >= 1, got {questions}")
        exs = exs[:questions]
    retr = CachedRetriever(build_retriever(world.passages, kind="bm25"))

    def make_envs(n: int, max_turns: int = 4) -> list[Any]:
        return [SearchEnv(dataset=exs, retriever=retr, split=split, max_turns=max_turns,
                          prompt_template=template, passage_chars=110) for _ in range(n)]

    if trajectories is not None:
        from searchgym.train.replay import ReplayAgent
        from searchgym.trajectory import read_trajectories

        trajs = list(read_trajectories(trajectories))
        if not trajs:
            raise ConfigError(f"{trajectories} holds no trajectories (--trajectories)")
        known = {q.id for q in exs}
        missing = [t.question_id for t in trajs if t.question_id not in known]
        if missing:
            raise ConfigError(f"{len(missing)} trajectories in {trajectories} are about questions that are not in "
                              f"the world's {split!r} split (first: {missing[0]!r}); pass --split")
        envs = make_envs(len(trajs), max(4, max(t.num_searches for t in trajs)))
        agent = ReplayAgent(trajs)
        eps = run_episodes(AgentPolicy(agent, tok), envs, [None] * len(trajs),
                           options=[{"question_id": t.question_id} for t in trajs], agent_name="replay")
        console.print(f"{len(eps)} demonstrations replayed from {trajectories}")
        return eps
    envs = make_envs(len(exs))
    eps = []
    for p in range(passes):
        eps += run_episodes(AgentPolicy(DiverseAgent(seed=p, think=False), tok), envs, [None] * len(envs),
                            options=[{"index": i} for i in range(len(envs))], agent_name="diverse")
    good = [e for e in eps if e.em > 0]
    console.print(f"{len(eps)} diverse-agent demonstrations, {len(good)} successful (used)")
    return good or eps
