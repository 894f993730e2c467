"""CLI: ``searchgym index build``, ``searchgym index info`` and ``searchgym search``.

Heavy modules (bm25s, faiss, torch) are imported inside the commands so ``searchgym --help`` stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

DEFAULT_DENSE = "all-MiniLM-L6-v2"


def _fail(exc: Exception) -> None:
    from rich.console import Console

    Console(stderr=True).print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
    raise typer.Exit(1)


def index_build(
    corpus: Annotated[str, typer.Argument(
        metavar="CORPUS",
        help="Corpus: Search-R1/FlashRAG jsonl, {id,title,text} jsonl, parquet, or a Hugging Face dataset "
             "(path or hub name).")],
    out: Annotated[Path, typer.Option("--out", "-o", metavar="DIR", help="Index directory to write (atomically).")],
    bm25: Annotated[bool, typer.Option("--bm25/--no-bm25", help="Build the BM25 part.")] = True,
    dense: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--dense", "--dense-model", metavar="MODEL",
        help=f"Also build a dense FAISS part with this sentence-transformers MODEL (a name or a directory); "
             f"{DEFAULT_DENSE} is bundled and works offline.")] = None,
    hnsw: Annotated[bool, typer.Option("--hnsw", help="HNSW instead of a Flat inner-product index.")] = False,
    ivfpq: Annotated[bool, typer.Option("--ivfpq", help=(
        "With --dense MODEL --no-bm25: a streaming IVF-PQ index for large corpora (~m bytes + 8 bytes a "
        "passage; see docs/scale.md).")) ] = False,
    nlist: Annotated[Optional[int], typer.Option(metavar="N", help="IVF lists (default ~4*sqrt(n)).")] = None,  # noqa: UP045
    pq_m: Annotated[Optional[int], typer.Option(metavar="M", help="PQ sub-quantisers (bytes a vector; default dim/8).")] = None,  # noqa: UP045
    shards: Annotated[Optional[int], typer.Option(  # noqa: UP045
        "--shards", metavar="N", min=1,
        help="Build a streaming, sharded, memory-mapped BM25 index of N shards (for corpora that do not fit "
             "in memory; BM25 only; resumable).")] = None,
    shard_size: Annotated[Optional[int], typer.Option(  # noqa: UP045
        "--shard-size", metavar="PASSAGES", min=1,
        help="Like --shards, but give the passages per shard instead of the shard count.")] = None,
    k1: Annotated[float, typer.Option(metavar="FLOAT", help="BM25 k1.")] = 1.5,
    b: Annotated[float, typer.Option(metavar="FLOAT", help="BM25 b.")] = 0.75,
    method: Annotated[str, typer.Option(metavar="NAME", help="BM25 variant: lucene, robertson, atire, bm25l, "
                                                           "bm25+ (sharded: the first three).")] = "lucene",
    stopwords: Annotated[str, typer.Option(metavar="LIST", help="Stopword list (en, en_plus, de, ...) or 'none'.")] = "en",
    stemmer: Annotated[Optional[str], typer.Option(metavar="NAME", help="Snowball stemmer, e.g. english (PyStemmer).")] = None,  # noqa: UP045
    hnsw_m: Annotated[int, typer.Option(metavar="INT", help="HNSW M.")] = 32,
    ef_search: Annotated[int, typer.Option(metavar="INT", help="HNSW efSearch.")] = 128,
    batch_size: Annotated[int, typer.Option(metavar="INT", help="Encoder batch size.")] = 64,
    format: Annotated[Optional[str], typer.Option(metavar="FORMAT", help="Corpus format: jsonl, parquet or hf (default: guess).")] = None,  # noqa: UP045
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing index directory.")] = False,
) -> None:
    """Build an index directory (manifest, passages, BM25 and/or dense files)."""
    from rich.console import Console

    from searchgym.errors import SearchGymError
    from searchgym.retrieval.build import build_index
    from searchgym.retrieval.index import index_info

    corpus_path, model = corpus, dense
    params: dict = {"k1": k1, "b": b, "method": method, "stopwords": None if stopwords.lower() == "none" else stopwords,
                    "stemmer": stemmer}
    if model:
        params.update(batch_size=batch_size)
        if ivfpq:
            params.update({k: v for k, v in (("nlist", nlist), ("pq_m", pq_m)) if v is not None})
        else:
            params.update(hnsw_m=hnsw_m, ef_search=ef_search)
    if ivfpq:
        params = {k: v for k, v in params.items() if k not in ("k1", "b", "method", "stopwords", "stemmer")}
    try:
        path = build_index(corpus_path, out, bm25=bm25, dense=model, hnsw=hnsw, overwrite=overwrite, format=format,
                           shards=shards, shard_size=shard_size, ivfpq=ivfpq, **params)
        info = index_info(path)
    except SearchGymError as exc:
        _fail(exc)
    Console().print(f"[green]built[/] {path}: {info['n_passages']:,} passages, backends "
                    f"{', '.join(info['backends'])}, {info['build_seconds']:.1f} s, "
                    f"{info['total_bytes'] / 1e6:.2f} MB")  # as `index info` says it


def index_info_cmd(
    path: Annotated[Path, typer.Argument(help="Index directory.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the manifest as JSON.")] = False,
) -> None:
    """Show an index directory's manifest: backends, parameters, corpus fingerprint, sizes."""
    from rich.console import Console
    from rich.table import Table

    from searchgym.errors import SearchGymError
    from searchgym.retrieval.index import index_info

    try:
        info = index_info(path)
    except SearchGymError as exc:
        _fail(exc)
    if as_json:
        typer.echo(json.dumps(info, indent=2))
        return
    t = Table(title=str(path), show_header=False)
    for key in ("format_version", "n_passages", "corpus_fingerprint", "created", "build_seconds",
                "searchgym_version"):
        t.add_row(key, str(info.get(key)))
    t.add_row("total size", f"{info['total_bytes'] / 1e6:.2f} MB")
    for name, entry in info["backends"].items():
        t.add_row(f"backend {name}", ", ".join(f"{k}={v}" for k, v in entry.items() if k != "files"))
    Console().print(t)


def search_cmd(
    path: Annotated[Path, typer.Argument(help="Index directory.")],
    query: Annotated[str, typer.Argument(help="The query.")],
    k: Annotated[int, typer.Option("-k", "--k", help="Number of hits.")] = 5,
    kind: Annotated[Optional[str], typer.Option(help="bm25, rank_bm25, dense or hybrid (default: all parts).")] = None,  # noqa: UP045
    backend: Annotated[str, typer.Option(help="BM25 engine: numpy (no compile wait), numba or auto.")] = "numpy",
    snippet: Annotated[int, typer.Option(help="Snippet length in characters.")] = 100,
    verify: Annotated[bool, typer.Option("--verify/--no-verify", help=(
        "Check every index file against its checksum (--no-verify skips it for a huge index you trust; "
        "sizes and the BM25 structure are always checked)."))] = True,
) -> None:
    """Search an index directory and print a table of rank, score, id, title and snippet."""
    from rich.console import Console
    from rich.table import Table

    from searchgym.errors import SearchGymError
    from searchgym.retrieval.index import load_index

    try:
        retriever = load_index(path, kind=kind, backend=backend, verify=verify)
        hits = retriever.search(query, k)
    except SearchGymError as exc:
        _fail(exc)
    t = Table(title=f"{query!r}: {len(hits)} hit(s) from {type(retriever).__name__}")
    for col, kw in (("rank", {"justify": "right"}), ("score", {"justify": "right"}), ("id", {}), ("title", {}),
                    ("snippet", {"overflow": "fold"})):
        t.add_column(col, **kw)
    for rank, h in enumerate(hits, 1):
        text = " ".join(h.passage.text.split())
        t.add_row(str(rank), f"{h.score:.4f}", h.id, h.passage.title,
                  text[:snippet] + ("…" if len(text) > snippet else ""))
    Console().print(t)


def index_split(
    path: Annotated[Path, typer.Argument(metavar="DIR", help="A sharded index (built with --shards).")],
    out: Annotated[Path, typer.Option("--out", "-o", metavar="DIR", help="Where to write shard-000, shard-001, ...")],
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace existing shard directories.")] = False,
) -> None:
    """Split a sharded index into one index directory per shard, to serve each with `searchgym serve`."""
    from rich.console import Console

    from searchgym.errors import SearchGymError
    from searchgym.retrieval.split import split_sharded_index

    try:
        dirs = split_sharded_index(path, out, overwrite=overwrite)
    except SearchGymError as exc:
        _fail(exc)
    Console().print(f"[green]wrote[/] {len(dirs)} shard indexes under {out}: serve each with "
                    f"`searchgym serve {dirs[0]} --port PORT`, then `searchgym index router URL... --out DIR`")


def index_router(
    urls: Annotated[list[str], typer.Argument(metavar="URL...", help="The shard servers, in shard order.")],
    out: Annotated[Path, typer.Option("--out", "-o", metavar="DIR", help="The router index directory to write.")],
    timeout: Annotated[float, typer.Option(metavar="SECONDS", help="Per-shard request timeout.")] = 10.0,
    max_retries: Annotated[int, typer.Option(metavar="N", help="Retries per shard before it counts as down.")] = 1,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing router directory.")] = False,
) -> None:
    """Write a router index: `searchgym serve DIR` then fans each query out to the shard servers and merges
    exactly; a shard that does not answer is an error (HTTP 503), never fewer hits."""
    from rich.console import Console

    from searchgym.errors import SearchGymError
    from searchgym.retrieval.router import write_router_index

    try:
        write_router_index(out, urls, timeout=timeout, max_retries=max_retries, overwrite=overwrite)
    except SearchGymError as exc:
        _fail(exc)
    Console().print(f"[green]wrote[/] router {out} over {len(urls)} shard server(s)")


def index_import_faiss(
    faiss_file: Annotated[Path, typer.Argument(metavar="FAISS_FILE", help="A FAISS index file (Flat, HNSW, IVF, IVF-PQ).")],
    corpus: Annotated[str, typer.Option("--corpus", metavar="CORPUS", help=(
        "Its corpus (row i = passage i): a corpus file, or a sharded index directory whose passage store is "
        "linked instead of copied."))],
    model: Annotated[str, typer.Option("--model", metavar="MODEL", help="The query encoder that made the vectors.")],
    out: Annotated[Path, typer.Option("--out", "-o", metavar="DIR", help="Index directory to write.")],
    query_prefix: Annotated[str, typer.Option(metavar="TEXT", help='Prepended to queries (e5: "query: ").')] = "",
    nprobe: Annotated[Optional[int], typer.Option(metavar="N", help="IVF lists searched per query.")] = None,  # noqa: UP045
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing index directory.")] = False,
) -> None:
    """Wrap a prebuilt FAISS index and its corpus as an index directory (opened memory-mapped)."""
    from rich.console import Console

    from searchgym.errors import SearchGymError
    from searchgym.retrieval.dense_scale import import_faiss_index

    try:
        path = import_faiss_index(faiss_file, corpus, out, model=model, query_prefix=query_prefix, nprobe=nprobe,
                                  overwrite=overwrite)
    except SearchGymError as exc:
        _fail(exc)
    Console().print(f"[green]imported[/] {faiss_file} as {path}")


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:
    groups["index"].command("build")(index_build)
    groups["index"].command("info")(index_info_cmd)
    groups["index"].command("split")(index_split)
    groups["index"].command("router")(index_router)
    groups["index"].command("import-faiss")(index_import_faiss)
    app.command("search")(search_cmd)
