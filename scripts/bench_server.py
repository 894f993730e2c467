#!/usr/bin/env python
"""Load test of ``searchgym serve``: throughput, latency, errors and memory over real HTTP on loopback.

Builds a BM25 index over a synthetic corpus (Zipfian English-like vocabulary, ~90 words a passage; keyword
queries of 2-6 words; or ``--corpus world``: the procedural world and its questions), starts the server as
a subprocess on 127.0.0.1, and drives it with

* raw ``httpx`` requests (``concurrency`` threads, one ``httpx.Client`` each),
* raw requests on the standard library's ``http.client`` (a much cheaper load generator), and
* ``RemoteRetriever`` (``concurrency`` threads sharing one client and its connection pool),

for batch sizes 1, 8, 64 x concurrency 1, 8, 32; each cell is bounded by ``--cell-seconds`` and
``--max-requests``. The reference in the same run is in-process ``batch_search`` (no HTTP) on the same index.
A soak (``--soak-seconds``, default 60) reports errors and the server's RSS (VmRSS) at its start and end.
The load generator and the server share the machine's cores (2 here): the numbers include client cost, and
other load on the machine (reported as the load average) moves them. Server CPU per query (from
/proc/PID/stat) is the figure least moved by that.

    python scripts/bench_server.py            # full run (~4 min)
    python scripts/bench_server.py --quick    # ~1 min
    python scripts/bench_server.py --compare /tmp/base   # batch 64 vs another checkout's server, interleaved
    python scripts/bench_server.py --hostile --compare /tmp/base   # issue 24's attacks, this vs that checkout
"""

from __future__ import annotations

import argparse
import functools
import http.client
import importlib
import json
import os
import platform
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from searchgym.retrieval import Passage, build_index, load_index
from searchgym.retrieval.remote import RemoteRetriever

TOPK = 3
QUERIES: list[str] = []  # set in main()


# --- corpus and queries --------------------------------------------------------------------------------------
def make_vocab(n: int, rng: random.Random) -> list[str]:
    consonants, vowels = "bcdfghjklmnprstvwz", "aeiou"
    words: set[str] = set()
    while len(words) < n:
        syl = rng.randint(1, 4)
        words.add("".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(syl)) + rng.choice(["", "n", "s", "r"]))
    return sorted(words)


def make_corpus(n: int, seed: int = 0) -> tuple[list[Passage], list[str]]:
    rng = random.Random(seed)
    vocab = make_vocab(20_000, rng)
    weights = [1.0 / (i + 1) for i in range(len(vocab))]  # Zipf
    passages = []
    for i in range(n):
        words = rng.choices(vocab, weights=weights, k=rng.randint(60, 120))
        title = " ".join(rng.choices(vocab[200:], k=2)).title()
        passages.append(Passage(f"doc{i}", title, " ".join(words) + "."))
    # keyword queries: content words (skipping the 100 most frequent), 2-6 of them
    queries = [" ".join(rng.choices(vocab[100:5000], k=rng.randint(2, 6))) for _ in range(4096)]
    return passages, queries


def world_corpus(n: int, seed: int = 0) -> tuple[list[Passage], list[str]]:
    """The procedural knowledge world's passages, queried with its own questions."""
    from searchgym.data import World

    world = World.generate_for_passages(n, seed=seed)
    questions = [ex.question for split in world.splits.values() for ex in split]
    random.Random(seed).shuffle(questions)
    return list(world.passages), questions[:4096]


# --- server process ------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def process_tree(pid: int) -> list[int]:
    """``pid`` and its children (uvicorn ``--workers`` runs the app in child processes)."""
    pids = [pid]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                pids.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return pids


def rss_mb(pid: int) -> float:
    """VmRSS of the server, summed over its worker processes."""
    total = 0
    for p in process_tree(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def cpu_seconds(pid: int) -> float:
    """user + system CPU time of the server and its workers (robust to other load on the machine, unlike
    wall time)."""
    total = 0
    for p in process_tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def start_server(index_dir: Path, port: int, extra: list[str], pythonpath: Path | None = None) -> subprocess.Popen:
    """``searchgym serve`` as a subprocess; ``pythonpath``: the checkout whose searchgym it runs (default:
    the installed one)."""
    cmd = [sys.executable, "-m", "searchgym.cli", "serve", str(index_dir), "--port", str(port), *extra]
    env = None
    if pythonpath is not None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(pythonpath),
                                                                       os.environ.get("PYTHONPATH")]))}
    # run from the checkout itself: `python -m` puts the working directory first on sys.path
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                            cwd=None if pythonpath is None else str(pythonpath))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {proc.stderr.read().decode()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("server did not come up in 120 s")


# --- load generators -----------------------------------------------------------------------------------------
@dataclass
class Cell:
    client: str
    batch: int
    concurrency: int
    latencies: list[float] = field(default_factory=list)
    queries: int = 0
    errors: int = 0
    seconds: float = 0.0
    server_cpu: float = 0.0

    @property
    def qps(self) -> float:
        return self.queries / self.seconds if self.seconds else 0.0

    def pct(self, p: float) -> float:
        if not self.latencies:
            return float("nan")
        xs = sorted(self.latencies)
        return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] * 1000


def batches(queries: list[str], batch: int, offset: int):
    i = offset
    while True:
        yield [queries[(i + j) % len(queries)] for j in range(batch)]
        i += batch


def _run_threads(cell: Cell, conc: int, seconds: float, max_requests: int, call) -> Cell:
    """``conc`` threads each calling ``call(worker_index, batch_iter)`` -> ok, bounded by time and count."""
    lock = threading.Lock()
    budget = [max_requests]
    deadline = time.perf_counter() + seconds

    def worker(w: int) -> None:
        for qs in batches(QUERIES, cell.batch, w * 997):
            with lock:
                if time.perf_counter() > deadline or budget[0] <= 0:
                    return
                budget[0] -= 1
            t = time.perf_counter()
            try:
                ok = call(w, qs)
            except Exception:  # noqa: BLE001 - counted as an error
                ok = False
            dt = time.perf_counter() - t
            with lock:
                cell.latencies.append(dt)
                if ok:
                    cell.queries += len(qs)
                else:
                    cell.errors += 1

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(w,)) for w in range(conc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cell.seconds = time.perf_counter() - t0
    return cell


def drive_httpx(url: str, batch: int, conc: int, seconds: float, max_requests: int) -> Cell:
    """Raw requests: one ``httpx.Client`` (one keep-alive connection) per thread."""
    clients = [httpx.Client(base_url=url, timeout=30) for _ in range(conc)]
    for c in clients:  # open the connections before timing
        c.get("/health")

    def call(w: int, qs: list[str]) -> bool:
        r = clients[w].post("/retrieve", json={"queries": qs, "topk": TOPK, "return_scores": True})
        return r.status_code == 200 and len(r.json()["result"]) == len(qs)

    try:
        return _run_threads(Cell("httpx", batch, conc), conc, seconds, max_requests, call)
    finally:
        for c in clients:
            c.close()


def drive_stdlib(url: str, batch: int, conc: int, seconds: float, max_requests: int) -> Cell:
    """Raw requests on the standard library's keep-alive ``http.client`` (one connection per thread): a
    load generator about 5x cheaper per request than httpx, so more of the cores go to the server."""
    host, port = url.removeprefix("http://").split(":")
    conns = [http.client.HTTPConnection(host, int(port), timeout=30) for _ in range(conc)]
    headers = {"Content-Type": "application/json"}

    def call(w: int, qs: list[str]) -> bool:
        body = json.dumps({"queries": qs, "topk": TOPK, "return_scores": True})
        try:
            conns[w].request("POST", "/retrieve", body, headers)
            r = conns[w].getresponse()
            data = r.read()
        except (OSError, http.client.HTTPException):
            conns[w].close()  # reconnects on the next request
            raise
        return r.status == 200 and len(json.loads(data)["result"]) == len(qs)

    try:
        return _run_threads(Cell("http.client", batch, conc), conc, seconds, max_requests, call)
    finally:
        for c in conns:
            c.close()


def drive_remote(url: str, batch: int, conc: int, seconds: float, max_requests: int) -> Cell:
    """Through ``RemoteRetriever``: one shared client (its connection pool) for all threads."""
    rr = RemoteRetriever(url, batch_size=batch, timeout=30, max_connections=conc)
    rr.search(QUERIES[0], k=TOPK)
    try:
        return _run_threads(Cell("RemoteRetriever", batch, conc), conc, seconds, max_requests,
                            lambda w, qs: len(rr.batch_search(qs, k=TOPK)) == len(qs))
    finally:
        rr.close()


def local_reference(index_dir: Path, queries: list[str], seconds: float) -> list[tuple[int, float, float]]:
    """In-process batch_search on the same index and search threads as the server (1):
    (batch, queries/s, mean ms per call)."""
    r = load_index(index_dir)
    if isinstance(getattr(r, "n_threads", None), int):
        r.n_threads = 1
    getattr(r, "warmup", lambda: None)()
    out = []
    for batch in (1, 8, 64):
        r.batch_search(queries[:batch], TOPK)  # first call of a batch size may load another kernel
        n, calls, t0 = 0, 0, time.perf_counter()
        for qs in batches(queries, batch, 0):
            r.batch_search(qs, TOPK)
            n += len(qs)
            calls += 1
            if time.perf_counter() - t0 > seconds:
                break
        dt = time.perf_counter() - t0
        out.append((batch, n / dt, dt / calls * 1000))
    return out


def _importable(name: str) -> bool:
    try:
        importlib.import_module(name)
        return True
    except ImportError:
        return False


def compare(index_dir: Path, base: Path, rounds: int, seconds: float, max_requests: int, workers: int,
            emit) -> None:
    """The same httpx cells at batch 64 against two servers, this checkout's and ``base``'s (e.g. a
    ``git worktree`` of an earlier commit), interleaved round by round so that load from other processes
    falls on both alike; reports the median queries/s of each and their ratio."""
    import statistics

    servers = {}
    try:
        for name, path in (("base", base), ("new", None)):
            port = free_port()
            servers[name] = (start_server(index_dir, port, ["--workers", str(workers)], pythonpath=path),
                             f"http://127.0.0.1:{port}")
        limits = {name: httpx.get(url + "/info", timeout=10).json()["limits"] for name, (_, url) in servers.items()}
        runs: dict[tuple[str, int], list[tuple[float, float]]] = {}
        for r in range(rounds):
            for conc in (1, 8, 32):
                order = ("base", "new") if r % 2 == 0 else ("new", "base")
                for name in order:
                    proc, url = servers[name]
                    c0 = cpu_seconds(proc.pid)
                    cell = drive_httpx(url, 64, conc, seconds, max_requests)
                    cpu = (cpu_seconds(proc.pid) - c0) / cell.queries * 1e6 if cell.queries else float("nan")
                    if cell.errors:
                        raise RuntimeError(f"{name} server: {cell.errors} errors at concurrency {conc}")
                    runs.setdefault((name, conc), []).append((cell.qps, cpu))
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(20)
    emit(f"## searchgym serve, before vs after: httpx, batch 64, top-{TOPK}, {rounds} interleaved rounds of "
         f"{seconds:g} s cells")
    emit()
    emit(f"base: `{base}` (in-flight limit: {limits['base'].get('max_inflight', 'none')}); new: this checkout "
         f"(in-flight limit: {limits['new'].get('max_inflight', 'none')}, connection guards on). Median over "
         "rounds (min-max in brackets).")
    emit()
    emit("| concurrency | base queries/s | new queries/s | new / base | base server CPU us/query | "
         "new server CPU us/query |")
    emit("|---:|---:|---:|---:|---:|---:|")
    for conc in (1, 8, 32):
        b, n = runs[("base", conc)], runs[("new", conc)]
        bq, nq = statistics.median(x[0] for x in b), statistics.median(x[0] for x in n)
        emit(f"| {conc} | {bq:,.0f} [{min(x[0] for x in b):,.0f}-{max(x[0] for x in b):,.0f}] | "
             f"{nq:,.0f} [{min(x[0] for x in n):,.0f}-{max(x[0] for x in n):,.0f}] | {nq / bq:.3f} | "
             f"{statistics.median(x[1] for x in b):,.0f} | {statistics.median(x[1] for x in n):,.0f} |")


# --- main ----------------------------------------------------------------------------------------------------
# --- hostile clients (issue 24) ----------------------------------------------------------------------------
def _peak_during(pid: int, action: Any, url: str) -> tuple[float, float, Any]:
    """Run ``action()`` while sampling the server's RSS and probing /health: (RSS rise MB, worst /health s,
    the action's result)."""
    import psutil

    proc = psutil.Process(pid)
    start = peak = proc.memory_info().rss
    worst = 0.0
    done = threading.Event()
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = action()
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    while not done.wait(0.05):
        peak = max(peak, proc.memory_info().rss)
        t = time.perf_counter()
        try:
            httpx.get(url + "/health", timeout=30)
            worst = max(worst, time.perf_counter() - t)
        except httpx.HTTPError:
            worst = max(worst, 30.0)
    peak = max(peak, proc.memory_info().rss)
    return (peak - start) / 2**20, worst, box.get("result")


def _unread_clients(port: int, n: int = 60, hold_s: float = 15.0) -> str:
    body = json.dumps({"queries": [f"capital of country {i}" for i in range(650)], "topk": 100}).encode()
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", port))
        s.sendall(b"POST /retrieve HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: "
                  + str(len(body)).encode() + b"\r\n\r\n" + body)
        socks.append(s)
    time.sleep(hold_s)
    for s in socks:
        s.close()
    return f"{n} x 65,000 hits"


def _msgpack_bombs(url: str) -> str:
    import struct

    n = 8 * 1024 * 1024 - 64
    body = b"\x81\xa7queries\xdd" + struct.pack(">I", n) + b"\x80" * n
    codes: list[int] = []

    def post() -> None:
        try:
            codes.append(httpx.post(url + "/retrieve", content=body, timeout=300,
                                    headers={"content-type": "application/msgpack"}).status_code)
        except httpx.HTTPError as e:
            codes.append(type(e).__name__)  # type: ignore[arg-type]

    threads = [threading.Thread(target=post) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    return " ".join(map(str, sorted(codes, key=str)))


def _nested(url: str) -> str:
    out = []
    for depth in (500, 900, 990, 5000):
        body = '{"queries": ["capital"], "x": ' + "[" * depth + "]" * depth + "}"
        out.append(str(httpx.post(url + "/retrieve", content=body.encode(), timeout=60,
                                  headers={"content-type": "application/json"}).status_code))
    return " ".join(out)


def hostile(index_dir: Path, base: Path | None, emit: Any) -> None:
    """The serve attacks of issue 24 against this checkout's server (and ``base``'s, same run): peak RSS rise
    and worst /health latency, each in a fresh server."""
    attacks = [("60 clients send a 65,000-hit request and never read", "< 600 MB, /health < 2 s",
                lambda port, url: _unread_clients(port)),
               ("four 8 MB msgpack bodies of empty maps, at once", "< 400 MB, /health < 2 s",
                lambda port, url: _msgpack_bombs(url)),
               ("JSON nested 500 / 900 / 990 / 5,000 deep (an unknown key)", "4xx each", lambda port, url: _nested(url))]
    sides = [("this checkout", None)] + ([("base " + str(base), base)] if base is not None else [])
    rows: dict[str, list[str]] = {name: [] for name, _, _ in attacks}
    for _, path in sides:
        for name, _, attack in attacks:
            port = free_port()
            proc = start_server(index_dir, port, [], pythonpath=path)
            url = f"http://127.0.0.1:{port}"
            try:
                rise, worst, result = _peak_during(proc.pid, functools.partial(attack, port, url), url)
                rows[name].append(f"+{rise:,.0f} MB, /health worst {worst:.2f} s; {result}")
            finally:
                proc.terminate()
                proc.wait(30)
    emit("| attack | bound | " + " | ".join(side for side, _ in sides) + " |")
    emit("|---|---|" + "---|" * len(sides))
    for name, bound, _ in attacks:
        emit(f"| {name} | {bound} | " + " | ".join(rows[name]) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--passages", type=int, default=10_000)
    ap.add_argument("--corpus", choices=("synthetic", "world"), default="synthetic",
                    help="synthetic: ~90-word passages, 2-6 keyword queries; world: the procedural world's "
                         "one-sentence passages, queried with its questions")
    ap.add_argument("--cell-seconds", type=float, default=3.0, help="duration bound of each load cell")
    ap.add_argument("--max-requests", type=int, default=20_000, help="request-count bound of each load cell")
    ap.add_argument("--soak-seconds", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=1, help="uvicorn workers of the server")
    ap.add_argument("--quick", action="store_true", help="short cells (0.7 s) and a 10 s soak")
    ap.add_argument("--out", type=Path, default=None, help="also write the markdown here")
    ap.add_argument("--compare", type=Path, default=None, metavar="CHECKOUT",
                    help="only compare httpx batch-64 throughput of this checkout's server against the one in "
                         "CHECKOUT (e.g. `git worktree add /tmp/base HEAD~5`), interleaved")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds of --compare")
    ap.add_argument("--hostile", action="store_true",
                    help="only the hostile-client attacks (unread answers, msgpack bombs, nesting) on the world "
                         "index; with --compare CHECKOUT, against that checkout's server too")
    args = ap.parse_args()
    if args.hostile:
        args.corpus = "world"
    if args.quick:
        args.cell_seconds, args.soak_seconds = min(args.cell_seconds, 0.7), min(args.soak_seconds, 10.0)

    lines: list[str] = []
    load_start = os.getloadavg()[0]

    def emit(s: str = "") -> None:
        print(s, flush=True)
        lines.append(s)

    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        passages, queries = (make_corpus if args.corpus == "synthetic" else world_corpus)(args.passages)
        QUERIES[:] = queries
        index_dir = build_index(passages, Path(tmp) / "idx", show_progress=False)
        build_s = time.perf_counter() - t
        if args.hostile:
            emit(f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}; {len(passages):,}-passage "
                 f"BM25 index (world corpus); load average (1 min) {load_start:.1f} at the start.")
            emit()
            hostile(index_dir, None if args.compare is None else args.compare.resolve(), emit)
            emit()
            emit(f"Load average (1 min) at the end: {os.getloadavg()[0]:.1f}.")
            if args.out:
                args.out.write_text("\n".join(lines) + "\n")
            return
        if args.compare is not None:
            emit(f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}; "
                 f"{len(passages):,}-passage BM25 index ({args.corpus} corpus); load average (1 min) "
                 f"{load_start:.1f} at the start.")
            emit()
            compare(index_dir, args.compare.resolve(), args.rounds, args.cell_seconds, args.max_requests,
                    args.workers, emit)
            emit()
            emit(f"Load average (1 min) at the end: {os.getloadavg()[0]:.1f}.")
            if args.out:
                args.out.write_text("\n".join(lines) + "\n")
            return
        ref = local_reference(index_dir, queries, min(args.cell_seconds, 2.0))

        port = free_port()
        url = f"http://127.0.0.1:{port}"
        t = time.perf_counter()
        proc = start_server(index_dir, port, ["--workers", str(args.workers)])
        start_s = time.perf_counter() - t
        try:
            cells = []
            for drive in (drive_httpx, drive_stdlib, drive_remote):
                for batch in (1, 8, 64):
                    for conc in (1, 8, 32):
                        c0 = cpu_seconds(proc.pid)
                        cell = drive(url, batch, conc, args.cell_seconds, args.max_requests)
                        cell.server_cpu = cpu_seconds(proc.pid) - c0
                        cells.append(cell)
            rss_start = rss_mb(proc.pid)
            soak = drive_httpx(url, 8, 8, args.soak_seconds, 10**9)
            rss_end = rss_mb(proc.pid)
            alive = proc.poll() is None
        finally:
            proc.terminate()
            proc.wait(20)

    load_end = os.getloadavg()[0]
    http = "httptools" if _importable("httptools") else "h11"
    loop = "uvloop" if _importable("uvloop") else "asyncio"
    emit(f"## searchgym serve benchmark: {len(passages):,}-passage BM25 index ({args.corpus} corpus), "
         f"top-{TOPK}, loopback HTTP")
    emit()
    emit(f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}; the load generator and the "
         f"server share these cores. Index build {build_s:.1f} s; server start to healthy {start_s:.1f} s; "
         f"server workers: {args.workers}; uvicorn http={http}, loop={loop}; cells bounded by "
         f"{args.cell_seconds:g} s / {args.max_requests:,} requests. Load average (1 min) {load_start:.1f} at "
         f"the start, {load_end:.1f} at the end (other processes on the machine).")
    emit()
    emit("Reference, same run: in-process `batch_search` (no HTTP), one search thread like the server:")
    emit()
    emit("| batch | queries/s | ms / call |")
    emit("|---:|---:|---:|")
    for batch, qps, ms in ref:
        emit(f"| {batch} | {qps:,.0f} | {ms:.2f} |")
    emit()
    emit("| client | batch | concurrency | requests | queries/s | p50 ms | p99 ms | errors | server CPU us/query |")
    emit("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in cells:
        cpu = f"{c.server_cpu / c.queries * 1e6:,.0f}" if c.queries else "-"
        emit(f"| {c.client} | {c.batch} | {c.concurrency} | {len(c.latencies):,} | {c.qps:,.0f} | "
             f"{c.pct(50):.2f} | {c.pct(99):.2f} | {c.errors} | {cpu} |")
    emit()
    emit("Targets (raw HTTP rows):")
    for client in ("httpx", "http.client"):
        best64 = max(c.qps for c in cells if c.batch == 64 and c.client == client)
        p99 = next(c.pct(99) for c in cells if c.batch == 1 and c.concurrency == 8 and c.client == client)
        emit(f"- {client}: >= 5,000 queries/s at batch 64: {best64:,.0f} ({'met' if best64 >= 5000 else 'NOT met'}); "
             f"p99 <= 20 ms at batch 1, concurrency 8: {p99:.1f} ms ({'met' if p99 <= 20 else 'NOT met'})")
    growth = rss_end - rss_start
    emit(f"- soak {soak.seconds:.0f} s (batch 8, concurrency 8, httpx): {len(soak.latencies):,} requests, "
         f"{soak.qps:,.0f} queries/s, p99 {soak.pct(99):.1f} ms, errors {soak.errors}; server RSS "
         f"{rss_start:.1f} MB at start -> {rss_end:.1f} MB at end ({growth:+.1f} MB); server alive: {alive}")
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
