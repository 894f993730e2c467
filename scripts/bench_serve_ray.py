"""Benchmark: a sharded BM25 index on Ray Serve (``searchgym serve-ray``) against one ``searchgym serve``.

In one run, on a local Ray cluster on this machine, over HTTP (POST /retrieve, batches of 64 queries, top 10,
``--clients`` concurrent clients):

  sleep shards  each shard call sleeps ``--delay`` seconds per request it serves (a stand-in for a shard whose
                kernel takes that long; sleeping uses no CPU, so it shows how replicas scale on 2 cores):
                q/s and p50/p99 per batch at 1, 2 and 4 replicas per shard. A replica runs one batch at a time,
                so one replica serves at most 64 / delay q/s; the default 0.5 s puts that (128 q/s) under what
                the ingress and proxy manage on 2 cores (about 450 q/s), so the shards are what limits. At 0.05 s
                a single replica already outruns the ingress and the rows do not differ.
  real shards   the same with searchgym's exact kernel
  kill          real shards, 2 replicas: one replica of shard 0 is killed (SIGKILL) during the load; lost
                requests / all, and whether every answer equals the single index's
  reference     ``searchgym serve INDEX`` (one process, the same sharded index) under the same load

    python scripts/bench_serve_ray.py                       # 50,000 synthetic passages, 2 shards
    python scripts/bench_serve_ray.py --passages 200000 --shards 4 --out results.json
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

K = 10
BATCH = 64
MB = 1024 * 1024


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return 1000 * xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))] if xs else float("nan")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load(url: str, queries: list[str], batches: int, clients: int, during=None) -> dict:
    """``batches`` POSTs of 64 queries from ``clients`` threads; ``during()`` runs once a quarter is done."""
    import httpx

    lat: list[float] = []
    answers: dict[int, list] = {}
    lost: list[str] = []
    done = [0]
    lock = threading.Lock()
    fired = threading.Event()

    def one(i: int, client: httpx.Client) -> None:
        qs = [queries[(i * BATCH + j) % len(queries)] for j in range(BATCH)]
        t = time.perf_counter()
        try:
            r = client.post(url + "/retrieve", json={"queries": qs, "topk": K, "return_scores": True}, timeout=300)
            ok = r.status_code == 200
            why = "" if ok else f"HTTP {r.status_code}: {r.text[:200]}"
        except Exception as exc:  # noqa: BLE001 - a lost request
            ok, why = False, f"{type(exc).__name__}: {exc}"
        dt = time.perf_counter() - t
        with lock:
            done[0] += 1
            if ok:
                lat.append(dt)
                answers[i] = [[(d["document"]["id"], d["score"]) for d in hits] for hits in r.json()["result"]]
            else:
                lost.append(why)
            if during is not None and not fired.is_set() and done[0] >= batches // 4:
                fired.set()
                threading.Thread(target=during).start()

    def worker(ids: list[int]) -> None:
        with httpx.Client() as c:
            for i in ids:
                one(i, c)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as ex:
        list(ex.map(worker, [list(range(c, batches, clients)) for c in range(clients)]))
    wall = time.perf_counter() - t0
    return {"qps": len(lat) * BATCH / wall, "p50_ms": _pct(lat, 50), "p99_ms": _pct(lat, 99), "lost": len(lost),
            "requests": batches, "why_lost": lost[:3], "answers": answers}


def _parity(answers: dict[int, list], ref: dict[int, list]) -> str:
    same = sum(1 for i, a in answers.items() if ref.get(i) == a)
    return f"{same}/{len(answers)}"


def reference(index: Path, queries: list[str], a: argparse.Namespace) -> dict:
    import httpx

    port = _free_port()
    exe = str(Path(sys.executable).with_name("searchgym"))
    proc = subprocess.Popen([exe, "serve", str(index), "--port", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 300
        while True:
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline or proc.poll() is not None:
                raise SystemExit("searchgym serve did not come up")
            time.sleep(0.5)
        load(url, queries, 4, 2)  # warm up
        return load(url, queries, a.batches, a.clients)
    finally:
        proc.terminate()
        proc.wait(30)


def _replica_pids(serve, shard: int, want: int) -> list[int]:
    h = serve.get_deployment_handle(f"shard-{shard:03d}", app_name="bench")
    seen: set[int] = set()
    for _ in range(200):
        seen.add(h.identity.remote().result(timeout_s=60)["pid"])
        if len(seen) >= want:
            break
    return sorted(seen)


def kill_replica(a: argparse.Namespace, res: dict, ref: dict, queries: list[str], url: str, port: int,
                 index: Path) -> None:
    from ray import serve

    from searchgym.retrieval.serve_ray_app import run

    run([str(index)], app="bench", port=port, replicas=2, cpus_per_replica=1, proxy_location="HeadOnly",
        verify=False)
    victim = _replica_pids(serve, 0, 2)[0]
    m = load(url, queries, a.batches * 2, a.clients, during=lambda: os.kill(victim, signal.SIGKILL))
    m["parity"] = _parity(m["answers"], {i: ref["answers"].get(i % a.batches) for i in range(a.batches * 2)})
    res["kill"] = m


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passages", type=int, default=50_000)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--vocab-size", type=int, default=200_000)
    ap.add_argument("--delay", type=float, default=0.5, help="seconds a sleep shard spends per request")
    ap.add_argument("--replicas", default="1,2,4")
    ap.add_argument("--batches", type=int, default=48, help="batches of 64 per measurement")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--cpus", type=int, default=16, help="logical CPUs of the local Ray node (not cores)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/searchgym-bench-serve-ray"))
    ap.add_argument("--sleep-only", action="store_true", help="only the sleep shards (and the reference)")
    ap.add_argument("--out", type=Path, help="also write the figures as JSON")
    a = ap.parse_args()

    from searchgym.retrieval import build_index
    from searchgym.retrieval.synth import synthetic_queries, write_synthetic_corpus

    a.workdir.mkdir(parents=True, exist_ok=True)
    corpus, index = a.workdir / f"synth-{a.passages}.jsonl", a.workdir / f"index-{a.passages}-{a.shards}"
    if not corpus.exists():
        write_synthetic_corpus(corpus, a.passages, vocab_size=a.vocab_size)
    if not (index / "manifest.json").exists():
        build_index(str(corpus), index, shards=a.shards, show_progress=False, overwrite=True)
    queries = synthetic_queries(a.batches * BATCH, vocab_size=a.vocab_size, seed=7)
    res: dict = {"passages": a.passages, "shards": a.shards, "delay_s": a.delay, "clients": a.clients,
                 "batch": BATCH, "k": K, "cores": os.cpu_count()}
    print(f"reference: searchgym serve {index}", file=sys.stderr)
    ref = reference(index, queries, a)
    res["reference"] = ref

    import ray
    from ray import serve

    from searchgym.retrieval.serve_ray_app import run

    ray.init(num_cpus=a.cpus, object_store_memory=200 * MB, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    try:
        for mode, delay in (("sleep", a.delay), ("real", 0.0))[: 1 if a.sleep_only else 2]:
            for r in (int(x) for x in a.replicas.split(",")):
                t = time.perf_counter()
                run([str(index)], app="bench", port=port, replicas=r, cpus_per_replica=1, delay_s=delay,
                    proxy_location="HeadOnly", verify=False)
                up = time.perf_counter() - t
                load(url, queries, 4, 2)  # warm up
                m = load(url, queries, a.batches, a.clients)
                m["deploy_s"] = up
                m["parity"] = _parity(m["answers"], ref["answers"])
                res[f"{mode}_{r}"] = m
                print(f"{mode} shards x {r} replicas: {m['qps']:.0f} q/s, p50 {m['p50_ms']:.0f} ms, "
                      f"p99 {m['p99_ms']:.0f} ms, parity {m['parity']}, deploy {up:.0f} s", file=sys.stderr)
        if not a.sleep_only:
            kill_replica(a, res, ref, queries, url, port, index)
    finally:
        serve.shutdown()
        ray.shutdown()
    for v in res.values():
        if isinstance(v, dict):
            v.pop("answers", None)
    if a.out:
        a.out.write_text(json.dumps(res, indent=2))
    print(f"\nRay Serve, {a.passages:,} synthetic passages in {a.shards} shards, batches of {BATCH}, top {K}, "
          f"{a.clients} concurrent HTTP clients, one machine with {os.cpu_count()} cores (a local Ray node)\n")
    print("| engine | replicas per shard | q/s | p50 ms per batch | p99 ms | lost | top-10 = single index |")
    print("|---|---|---|---|---|---|---|")
    print(f"| `searchgym serve` (one process, reference) | – | {ref['qps']:.0f} | {ref['p50_ms']:.0f} | "
          f"{ref['p99_ms']:.0f} | {ref['lost']}/{ref['requests']} | reference |")
    for mode, label in (("sleep", f"serve-ray, shards sleep {a.delay * 1000:.0f} ms a request"),
                        ("real", "serve-ray, real shards"))[: 1 if a.sleep_only else 2]:
        for r in (int(x) for x in a.replicas.split(",")):
            m = res[f"{mode}_{r}"]
            print(f"| {label} | {r} | {m['qps']:.0f} | {m['p50_ms']:.0f} | {m['p99_ms']:.0f} | "
                  f"{m['lost']}/{m['requests']} | {m['parity'] if mode == 'real' else '–'} |")
    k = res.get("kill")
    if k:
        print(f"| serve-ray, real shards, a replica killed during the load | 2 | {k['qps']:.0f} | {k['p50_ms']:.0f} | "
              f"{k['p99_ms']:.0f} | {k['lost']}/{k['requests']} | {k['parity']} |")


if __name__ == "__main__":
    main()
