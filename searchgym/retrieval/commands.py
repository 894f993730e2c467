"""CLI: ``searchgym index build`` / ``info`` / ``split`` / ``import-faiss``, ``searchgym search`` and
``searchgym serve-ray``.

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
    path: Annotated[Path, typer.Argument(metavar="DIR", help=(
        "A sharded BM25 index (built with --shards), or a Flat dense index (built with --dense MODEL, or an "
        "imported IndexFlatIP) to split into --shards row ranges."))],
    out: Annotated[Path, typer.Option("--out", "-o", metavar="DIR", help="Where to write shard-000, shard-001, ...")],
    shards: Annotated[Optional[int], typer.Option("--shards", min=1, help=(  # noqa: UP045
        "A dense index: how many shards (row ranges) to write.")) ] = None,
    shard_size: Annotated[Optional[int], typer.Option("--shard-size", min=1, help=(  # noqa: UP045
        "A dense index: passages per shard (instead of --shards).")) ] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace existing shard directories.")] = False,
) -> None:
    """Split an index into one index directory per shard, to serve them all with `searchgym serve-ray OUT`
    (or a BM25 shard alone with `searchgym serve`)."""
    from rich.console import Console

    from searchgym.errors import ConfigError, SearchGymError
    from searchgym.retrieval.index import read_manifest
    from searchgym.retrieval.sharded import NAME as SHARDED
    from searchgym.retrieval.split import split_dense_index, split_sharded_index

    try:
        if SHARDED in read_manifest(path)["backends"]:
            if shards is not None or shard_size is not None:
                raise ConfigError(f"{path} is a sharded BM25 index: it splits into the shards it was built with "
                                  "(drop --shards / --shard-size)")
            dirs = split_sharded_index(path, out, overwrite=overwrite)
        elif shards is None and shard_size is None:
            raise ConfigError(f"{path} is not a sharded BM25 index; to split a dense one give --shards N")
        else:
            dirs = split_dense_index(path, out, shards=shards, shard_size=shard_size, overwrite=overwrite)
    except SearchGymError as exc:
        _fail(exc)
    Console().print(f"[green]wrote[/] {len(dirs)} shard indexes under {out}: serve them with "
                    f"`searchgym serve-ray {out}`")


def serve_ray(
    index: Annotated[list[str], typer.Argument(metavar="INDEX", help=(
        "A sharded index (built with --shards), the output directory of `searchgym index split`, or its "
        "shard directories one by one. Every node needs the same files at the same path."))],
    replicas: Annotated[int, typer.Option("--replicas", min=1, help="Replicas of each shard deployment.")] = 1,
    route_prefix: Annotated[str, typer.Option("--route-prefix", metavar="PATH", help=(
        "Where Serve's proxy mounts the app: /retrieve, /health and /info under it.")) ] = "/",
    gpus_per_shard: Annotated[float, typer.Option("--gpus-per-shard", min=0.0, help=(
        "GPUs reserved by each shard replica (Ray `num_gpus`).")) ] = 0.0,
    cpus_per_replica: Annotated[float, typer.Option("--cpus-per-replica", min=0.0, help=(
        "CPUs reserved by each shard replica (Ray `num_cpus`).")) ] = 1.0,
    address: Annotated[Optional[str], typer.Option(metavar="ADDRESS", help=(  # noqa: UP045
        "The Ray cluster to join: 'auto' (the one `ray start` started on this machine), HOST:PORT, 'local' (start "
        "a fresh one in this process, 256 MB object store), or none: RAY_ADDRESS, else a running local cluster, "
        "else a fresh one.")) ] = None,
    name: Annotated[str, typer.Option(metavar="APP", help="The Serve app's name: clients use retriever='ray://APP'.")
                    ] = "searchgym",
    host: Annotated[str, typer.Option(help="Address Serve's HTTP proxies bind; 0.0.0.0 exposes them.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Serve's HTTP port on every node.")] = 8000,
    topk: Annotated[int, typer.Option(help="Results per query when a request sends no topk.")] = 3,
    api_key_file: Annotated[Optional[Path], typer.Option("--api-key-file", help=(  # noqa: UP045
        "Require 'Authorization: Bearer KEY' on /retrieve and /info, KEY read from this file (or set "
        "SEARCHGYM_API_KEY).")) ] = None,
    retries: Annotated[int, typer.Option(min=0, help="Tries again per shard call whose replica died.")] = 3,
    shard_timeout: Annotated[float, typer.Option(metavar="SECONDS", min=0.01, help=(
        "Per try; a shard with no live replica answers 503 after its tries.")) ] = 30.0,
    verify: Annotated[bool, typer.Option("--verify/--no-verify", help=(
        "Each replica checksums its index files on start (--no-verify skips it for a huge index you trust).")) ]
    = True,
    detach: Annotated[bool, typer.Option("--detach", help=(
        "Return once the app is up and leave it running on the cluster (needs a cluster that outlives this "
        "command: --address).")) ] = False,
) -> None:
    """Serve a sharded index on Ray Serve: one deployment per shard, exact merge, the /retrieve contract on
    every node, and retriever='ray://APP' for rollout workers in the cluster."""
    import os

    from rich.console import Console

    from searchgym.errors import ConfigError, SearchGymError

    err = Console(stderr=True)
    try:  # the shard set and the key are checked before Ray is imported or a cluster joined
        from searchgym.retrieval.serve_ray import shard_sources
        from searchgym.retrieval.server import read_api_key_file

        if detach and (address == "local" or not (address or os.environ.get("RAY_ADDRESS"))):
            raise ConfigError("--detach needs a cluster that stays up after this command: give --address")
        key = read_api_key_file(api_key_file) if api_key_file else os.environ.get("SEARCHGYM_API_KEY") or None
        sources = shard_sources(index)
        try:
            import ray

            from searchgym.retrieval import serve_ray_app
        except ImportError as exc:
            raise ConfigError(f"serve-ray needs Ray Serve: pip install 'searchgym[ray]' ({exc})") from None
        extra = {"object_store_memory": 256 * 1024 * 1024} if address == "local" else {}
        ray.init(address=address, log_to_driver=False, configure_logging=False, **extra)
        serve_ray_app.run(index, app=name, route_prefix=route_prefix, host=host, port=port, replicas=replicas,
                          gpus_per_shard=gpus_per_shard, cpus_per_replica=cpus_per_replica, topk=topk, api_key=key,
                          retries=retries, shard_timeout_s=shard_timeout, verify=verify)
    except SearchGymError as exc:
        _fail(exc)
    except (ConnectionError, RuntimeError) as exc:  # no cluster at --address, or Serve could not deploy the app
        _fail(ConfigError(f"Ray did not start the app ({type(exc).__name__}: {str(exc)[:1000]})"))
    base = f"http://{host}:{port}{route_prefix.rstrip('/')}"
    err.print(f"[green]serving[/] {len(sources)} shard(s) x {replicas} replica(s) as Ray Serve app {name!r}: "
              f"POST {base}/retrieve on every node, retriever='ray://{name}' in the cluster")
    if detach:
        return
    err.print("Ctrl-C stops it")
    serve_ray_app.Waiter().wait()
    from ray import serve

    serve.delete(name)


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
    groups["index"].command("import-faiss")(index_import_faiss)
    app.command("search")(search_cmd)
    app.command("serve-ray")(serve_ray)
