"""``searchgym serve INDEX_DIR``: the Search-R1-compatible retrieval server."""

from __future__ import annotations

import ipaddress
import os
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
        api_key_file: Annotated[Path | None, typer.Option(
            "--api-key-file", help="Require 'Authorization: Bearer KEY' on /retrieve and /info, KEY read from "
                                   "this file (or set SEARCHGYM_API_KEY).")] = None,
        api_key: Annotated[str | None, typer.Option(
            "--api-key", help="The key itself (visible to every user in `ps`: prefer --api-key-file or "
                              "SEARCHGYM_API_KEY).")] = None,
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
        max_inflight: Annotated[int | None, typer.Option(
            min=1, help="/retrieve requests in progress at once; more get 503 + Retry-After (default 256).")] = None,
        max_connections: Annotated[int, typer.Option(
            min=1, help="Open connections; a request over this gets 503.")] = 1000,
        keep_alive: Annotated[float, typer.Option(
            min=0.01, help="Seconds an idle connection (new or between requests) stays open.")] = 5.0,
        header_timeout: Annotated[float, typer.Option(
            min=0.01, help="Seconds for a request's headers to arrive after its first byte (else 408).")] = 10.0,
        body_timeout: Annotated[float, typer.Option(
            min=0.01, help="Seconds for a request's body to arrive after its headers (else 408).")] = 30.0,
        write_timeout: Annotated[float, typer.Option(
            min=0.01, help="Seconds a client may read none of its answer before it is disconnected.")] = 30.0,
        max_header_kb: Annotated[int, typer.Option(
            min=1, help="Request line + headers limit in KiB (else 431).")] = 64,
        access_log: Annotated[bool, typer.Option(help="Log every request (slower).")] = False,
    ) -> None:
        """Serve an index over HTTP: POST /retrieve (Search-R1 / verl contract), GET /health, GET /info."""
        from rich.console import Console

        from searchgym.errors import ConfigError, SearchGymError

        err = Console(stderr=True)
        try:
            from searchgym.retrieval.server import (
                ServerGuards,
                api_key_file_warning,
                read_api_key_file,
                serve,
            )
        except ImportError as e:
            err.print(f"[red]error:[/] the server needs fastapi and uvicorn: pip install 'searchgym[server]' ({e})")
            raise typer.Exit(1) from None
        try:
            if api_key_file is not None and api_key:
                raise ConfigError("give the key one way: --api-key-file or --api-key, not both")
            if api_key_file is not None:
                key = read_api_key_file(api_key_file)
                warning = api_key_file_warning(api_key_file)
                if warning:
                    err.print(f"[yellow]warning:[/] {warning}")
            elif api_key:
                key = api_key
                err.print("[yellow]warning:[/] --api-key puts the key on the command line, where any local user "
                          "can read it (ps); prefer --api-key-file or SEARCHGYM_API_KEY")
            else:
                key = os.environ.get("SEARCHGYM_API_KEY") or None
            if not _is_loopback(host) and not key:
                err.print(f"[yellow]warning:[/] binding {host} without an API key: anyone who can reach this "
                          "port can query the index")
            guards = ServerGuards(keep_alive_s=keep_alive, header_s=header_timeout, body_s=body_timeout,
                                  max_header_bytes=max_header_kb * 1024, max_connections=max_connections,
                                  write_s=write_timeout)
            limits = {"max_queries": max_queries, "max_query_chars": max_query_chars, "max_topk": max_topk,
                      "max_body_bytes": None if max_body_mb is None else int(max_body_mb * 1024 * 1024),
                      "max_inflight": max_inflight}
            err.print(f"serving {index_dir} on http://{host}:{port} (POST /retrieve, GET /health, GET /info)")
            serve(index_dir, host=host, port=port, topk=topk, workers=workers, api_key=key,
                  search_threads=search_threads, limits=limits, access_log=access_log, guards=guards)
        except (SearchGymError, ValueError) as e:
            err.print(f"[red]error:[/] {e}")
            raise typer.Exit(1) from None
