"""``searchgym serve INDEX_DIR``: the Search-R1-compatible retrieval server."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated

import typer


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:
    @app.command("serve")
    def serve_cmd(
        index_dir: Annotated[Path, typer.Argument(help="An index directory (from `searchgym index build`).")],
        host: Annotated[str, typer.Option(help="Address to bind; 0.0.0.0 exposes it.")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
        topk: Annotated[int, typer.Option(help="Results per query when a request sends no topk.")] = 3,
        workers: Annotated[int, typer.Option(min=1, help="uvicorn worker processes (each loads the index).")] = 1,
        api_key: Annotated[str | None, typer.Option(
            "--api-key", envvar="SEARCHGYM_API_KEY",
            help="Require 'Authorization: Bearer KEY' on /retrieve and /info.")] = None,
        search_threads: Annotated[int, typer.Option(
            min=1, help="Threads one batch_search may use (BM25 numba). 1: parallelism comes from "
                        "concurrent requests instead.")] = 1,
        max_queries: Annotated[int | None, typer.Option(min=1, help="Queries per request (default 4096).")] = None,
        max_query_chars: Annotated[int | None, typer.Option(min=1, help="Characters per query (default 4096).")]
        = None,
        max_topk: Annotated[int | None, typer.Option(min=1, help="Largest topk a request may ask (default 100).")]
        = None,
        max_body_mb: Annotated[float | None, typer.Option(min=0.001, help="Request body limit in MB (default 8).")]
        = None,
        access_log: Annotated[bool, typer.Option(help="Log every request (slower).")] = False,
    ) -> None:
        """Serve an index over HTTP: POST /retrieve (Search-R1 / verl contract), GET /health, GET /info."""
        from rich.console import Console

        from searchgym.errors import SearchGymError

        err = Console(stderr=True)
        if not _is_loopback(host) and not api_key:
            err.print(f"[yellow]warning:[/] binding {host} without --api-key: anyone who can reach this "
                      "port can query the index")
        try:
            from searchgym.retrieval.server import serve
        except ImportError as e:
            err.print(f"[red]error:[/] the server needs fastapi and uvicorn: pip install 'searchgym[server]' ({e})")
            raise typer.Exit(1) from None
        err.print(f"serving {index_dir} on http://{host}:{port} (POST /retrieve, GET /health, GET /info)")
        try:
            limits = {"max_queries": max_queries, "max_query_chars": max_query_chars, "max_topk": max_topk,
                      "max_body_bytes": None if max_body_mb is None else int(max_body_mb * 1024 * 1024)}
            serve(index_dir, host=host, port=port, topk=topk, workers=workers, api_key=api_key or None,
                  search_threads=search_threads, limits=limits, access_log=access_log)
        except (SearchGymError, ValueError) as e:
            err.print(f"[red]error:[/] {e}")
            raise typer.Exit(1) from None
