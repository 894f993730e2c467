"""``searchgym serve-openenv`` (the environment over OpenEnv's HTTP/WebSocket protocol) and
``searchgym tiny-model`` (the offline model of the trainer examples)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:
    _register_tiny_model(app)

    @app.command("serve-openenv")
    def serve_openenv_cmd(
        host: Annotated[str, typer.Option("--host", help="Interface to bind (loopback by default; 0.0.0.0 "
                                          "exposes the env to the network).")] = "127.0.0.1",
        port: Annotated[int, typer.Option("--port", help="TCP port.", min=1, max=65535)] = 8000,
        corpus: Annotated[Optional[str], typer.Option(  # noqa: UP045 - typer needs Optional on 3.10
            "--corpus", help="Corpus file or index directory (default: the embedded world).")] = None,
        dataset: Annotated[Optional[str], typer.Option(  # noqa: UP045
            "--dataset", help="World split name or QA file (default: the world's --split).")] = None,
        split: Annotated[Optional[str], typer.Option(  # noqa: UP045
            "--split", help="World split when --dataset is not given (train when neither is; with --corpus or an "
                            "http --retriever, name one of the two).")] = None,
        retriever: Annotated[Optional[str], typer.Option(  # noqa: UP045
            "--retriever", help="bm25 | dense | hybrid | http://host:port/retrieve (default: bm25).")] = None,
        top_k: Annotated[int, typer.Option("--top-k", help="Passages per search.", min=1)] = 3,
        max_turns: Annotated[int, typer.Option("--max-turns", help="Searches per episode.", min=0)] = 4,
        max_sessions: Annotated[int, typer.Option("--max-sessions", help="Concurrent WebSocket sessions.",
                                                  min=1)] = 64,
    ) -> None:
        """Serve the search environment to OpenEnv clients (TRL, SkyRL, verifiers, GenericEnvClient)."""
        from rich.console import Console

        from searchgym.errors import SearchGymError

        console = Console(stderr=True)
        try:
            from searchgym.integrations.openenv import create_app

            web = create_app(corpus, dataset, split=split, retriever=retriever, top_k=top_k, max_turns=max_turns,
                             max_concurrent_envs=max_sessions)
        except (SearchGymError, ImportError) as exc:
            console.print(f"[red]error:[/] {exc}")
            raise typer.Exit(2) from None
        from searchgym.integrations.openenv import serve

        console.print(f"OpenEnv search environment on http://{host}:{port} (WebSocket /ws, /health, /schema)")
        try:
            serve(web, host=host, port=port)  # with the connection and session guards
        except SearchGymError as exc:
            console.print(f"[red]error:[/] {exc}")
            raise typer.Exit(2) from None


def _register_tiny_model(app: typer.Typer) -> None:
    @app.command("tiny-model")
    def tiny_model_cmd(
        out: Annotated[Path, typer.Option("--out", "-o", help="Directory to write the model and tokenizer to.")],
        seed: Annotated[int, typer.Option("--seed", help="Seed of the random initialisation.")] = 0,
        overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace a tiny model written there before "
                                                                    "(a folder of other files is never replaced).")
                             ] = False,
    ) -> None:
        """Write a tiny random Qwen2 chat model (no download): the offline model of the TRL example.

        It calls the env's tools but learns nothing useful; use a real model, e.g.
        Qwen/Qwen2.5-0.5B-Instruct, to train.
        """
        from rich.console import Console

        from searchgym.errors import SearchGymError

        console = Console(stderr=True)
        try:
            from searchgym.integrations.tiny_model import build_tiny_chat_model

            path = build_tiny_chat_model(out, seed=seed, overwrite=overwrite)
        except SearchGymError as exc:
            console.print(f"[red]error:[/] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        except ImportError as exc:
            console.print(f"[red]error:[/] {exc}; install the training extra: pip install 'searchgym[train]'")
            raise typer.Exit(2) from None
        except OSError as exc:
            console.print(f"[red]error:[/] cannot write {out}: {exc.strerror or exc}")
            raise typer.Exit(2) from None
        console.print(f"tiny chat model written to {path}")
