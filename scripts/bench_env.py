"""Environment throughput: env steps/s for a scripted agent on the procedural world.

Measures, at 10k and 100k passages (BM25, top-3):
- a single SearchEnv;
- the batched SearchVectorEnv with 16, 64 and 256 envs (all queries of a step in one batch_search);
- the RayVectorEnv (64 envs over 2 local Ray actors);
- the anchors' pattern for comparison: the same 64-env workload where every query is its own HTTP request
  to the retrieval server (`searchgym serve`) on loopback (what SkyRL / GEM clients do).

"Env overhead" is the share of step time not spent inside the retriever's batch_search (timed in the same
run). The scripted agent searches the question, then the title of the first hit, then answers with it.

    python scripts/bench_env.py            # 10k and 100k passages
    python scripts/bench_env.py --quick    # 10k only, shorter runs
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from searchgym.data import World
from searchgym.envs import SearchEnv, SearchVectorEnv
from searchgym.retrieval import BM25Retriever, build_index
from searchgym.retrieval.base import Hit, Passage


class TimedRetriever:
    """Wraps a retriever and accumulates the seconds spent in batch_search."""

    def __init__(self, inner: Any):
        self.inner, self.seconds, self.calls, self.queries = inner, 0.0, 0, 0

    def search(self, query: str, k: int = 3) -> list[Hit]:
        return self.batch_search([query], k)[0]

    def batch_search(self, queries: list[str], k: int = 3) -> list[list[Hit]]:
        t = time.perf_counter()
        out = self.inner.batch_search(queries, k)
        self.seconds += time.perf_counter() - t
        self.calls += 1
        self.queries += len(queries)
        return out

    def reset(self) -> None:
        self.seconds, self.calls, self.queries = 0.0, 0, 0


class PerQueryHTTP:
    """The anchors' pattern: one POST /retrieve per query (Search-R1 wire format), sequentially."""

    def __init__(self, url: str):
        self.url = url.rstrip("/") + "/retrieve"
        self.client = httpx.Client(timeout=30.0)

    def search(self, query: str, k: int = 3) -> list[Hit]:
        r = self.client.post(self.url, json={"queries": [query], "topk": k, "return_scores": True})
        r.raise_for_status()
        hits = []
        for item in r.json()["result"][0]:
            doc = item["document"]
            title, _, text = doc["contents"].partition("\n")
            hits.append(Hit(str(doc["id"]), float(item["score"]), Passage(str(doc["id"]), title.strip('"'), text)))
        return hits

    def batch_search(self, queries: list[str], k: int = 3) -> list[list[Hit]]:
        return [self.search(q, k) for q in queries]


class ScriptedAgent:
    """Search the question, then the first hit's title, then answer with that title. O(1) per step."""

    def __init__(self) -> None:
        self.stage, self.question, self.title = 0, "", ""

    def start(self, info: dict[str, Any]) -> None:
        self.stage, self.question = 0, str(info["question"])

    def act(self) -> str:
        self.stage += 1
        if self.stage == 1:
            return f"<think>I should look this up.</think><search> {self.question} </search>"
        if self.stage == 2:
            return f"<think>Follow the first hit.</think><search> {self.title} </search>"
        return f"<answer> {self.title} </answer>"

    def observe(self, info: dict[str, Any]) -> None:
        titles = info.get("titles")
        if titles:
            self.title = titles[0]


def bench_single(passages, examples, retr: TimedRetriever, steps: int) -> dict[str, float]:
    env = SearchEnv(corpus=passages, dataset=examples, retriever=retr)
    agent = ScriptedAgent()
    _, info = env.reset(seed=0)
    agent.start(info)
    retr.reset()
    busy = 0.0
    for _ in range(steps):
        a = agent.act()
        t = time.perf_counter()
        _, _, term, trunc, info = env.step(a)
        if term or trunc:
            _, rinfo = env.reset()
            busy += time.perf_counter() - t
            agent.start(rinfo)
        else:
            busy += time.perf_counter() - t
            agent.observe(info)
    return {"steps_s": steps / busy, "retr_share": retr.seconds / busy, "sec": busy}


def _vector_loop(vec: Any, steps: int, retr: TimedRetriever | None) -> dict[str, float]:
    n = vec.num_envs
    agents = [ScriptedAgent() for _ in range(n)]
    _, infos = vec.reset(seed=0)
    for i, a in enumerate(agents):
        a.start({"question": infos["question"][i]})
    if retr is not None:
        retr.reset()
    busy = 0.0
    for _ in range(steps):
        actions = [a.act() for a in agents]
        t = time.perf_counter()
        _, _, _, _, infos = vec.step(actions)
        busy += time.perf_counter() - t
        vec.pop_finished_trajectories()  # what a trainer does; keeps memory flat
        # next-step autoreset: an env whose info carries a question was just reset
        q, qm = infos.get("question"), infos.get("_question")
        titles, tm = infos.get("titles"), infos.get("_titles")
        for i, a in enumerate(agents):
            if qm is not None and qm[i]:
                a.start({"question": q[i]})
            elif tm is not None and tm[i]:
                a.observe({"titles": titles[i]})
    out = {"steps_s": steps * n / busy, "sec": busy}
    if retr is not None:
        out["retr_share"] = retr.seconds / busy
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(index_dir: Path, search_threads: int) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    cmd = [sys.executable, "-c", "from searchgym.cli import main; main()", "serve", str(index_dir),
           "--port", str(port), "--search-threads", str(search_threads)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180
    while time.time() < deadline:
        try:
            if httpx.get(url + "/health", timeout=1.0).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise RuntimeError("the retrieval server exited during start-up")
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the retrieval server did not start within 180 s")


def run_size(n_passages: int, args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    print(f"\n== {n_passages:,} passages: generating the world and building BM25 ...", flush=True)
    world = World.generate_for_passages(n_passages, seed=0)
    passages, examples = world.passages, world.split("train")
    bm = BM25Retriever(passages, n_threads=args.search_threads)
    bm.warmup()
    retr = TimedRetriever(bm)
    size = f"{len(passages) // 1000}k"

    def best(fn: Any) -> dict[str, float]:
        """Best of ``--repeats`` runs: other processes on a shared machine only ever slow a run down."""
        return max((fn() for _ in range(args.repeats)), key=lambda r: r["steps_s"])

    def add(name: str, r: dict[str, float]) -> None:
        row = {"passages": size, "setup": name, **r}
        rows.append(row)
        share = r.get("retr_share")
        extra = f", env overhead {100 * (1 - share):.0f}%" if share is not None else ""
        print(f"  {name:<38} {r['steps_s']:>10,.0f} steps/s{extra}", flush=True)

    steps = args.single_steps
    add("single env", best(lambda: bench_single(passages, examples, retr, steps)))
    for n in (16, 64, 256):
        vec = SearchVectorEnv(n, corpus=passages, dataset=examples, retriever=retr)
        add(f"batched vector env, {n} envs",
            best(lambda vec=vec, n=n: _vector_loop(vec, max(5, args.vector_env_steps // n), retr)))
        vec.close()

    with tempfile.TemporaryDirectory() as tmp:
        index_dir = build_index(passages, Path(tmp) / "idx", show_progress=False)
        if not args.no_ray:
            import ray

            from searchgym.envs import RayVectorEnv

            ray.init(num_cpus=os.cpu_count() or 2, include_dashboard=False, log_to_driver=False)
            try:
                rvec = RayVectorEnv(64, num_workers=2, corpus=passages, dataset=examples,
                                    retriever_kwargs={"n_threads": args.search_threads})
                _vector_loop(rvec, 3, None)  # warm the actors (numba compile happens here)
                add("Ray vector env, 64 envs / 2 actors",
                    best(lambda: _vector_loop(rvec, max(5, args.vector_env_steps // 64), None)))
                rvec.close()
            finally:
                ray.shutdown()
        proc, url = start_server(index_dir, args.search_threads)
        try:
            http = PerQueryHTTP(url)
            http.search("warm up the server", 3)
            vec = SearchVectorEnv(64, corpus=passages, dataset=examples, retriever=http)
            add("64 envs, one HTTP request per query",
                best(lambda: _vector_loop(vec, max(3, args.http_env_steps // 64), None)))
            vec1 = SearchVectorEnv(1, corpus=passages, dataset=examples, retriever=http)
            add("1 env, one HTTP request per query",
                best(lambda: _vector_loop(vec1, max(20, args.http_env_steps // 8), None)))
        finally:
            proc.terminate()
            proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="10k passages only, shorter runs")
    ap.add_argument("--sizes", type=int, nargs="*", default=None, help="corpus sizes (default 10000 100000)")
    ap.add_argument("--single-steps", type=int, default=20_000, help="steps of the single env")
    ap.add_argument("--vector-env-steps", type=int, default=60_000, help="env steps per vector-env run")
    ap.add_argument("--http-env-steps", type=int, default=3_000, help="env steps of the HTTP pattern")
    ap.add_argument("--no-ray", action="store_true", help="skip the Ray vector env")
    ap.add_argument("--repeats", type=int, default=3, help="runs per setup; the best is reported")
    ap.add_argument("--search-threads", type=int, default=1,
                    help="BM25 threads per batch_search (on a busy 2-core machine 1 beats numba's parallel kernel)")
    args = ap.parse_args()
    sizes = args.sizes or ([10_000] if args.quick else [10_000, 100_000])
    if args.quick:
        args.single_steps, args.vector_env_steps, args.http_env_steps = 5_000, 20_000, 1_000
    rows: list[dict[str, Any]] = []
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    for n in sizes:
        run_size(n, args, rows)

    print("\n| passages | setup | env steps/s | env overhead (% of step time) |")
    print("|---|---|---:|---:|")
    for r in rows:
        share = r.get("retr_share")
        over = f"{100 * (1 - share):.0f}%" if share is not None else "–"
        print(f"| {r['passages']} | {r['setup']} | {r['steps_s']:,.0f} | {over} |")

    print("\nTargets (10k passages): batched 64 envs >= 10,000 steps/s and >= 10x the one-request-per-query "
          "pattern; single env >= 2,000 steps/s; env overhead <= 25%.")
    for size in sorted({r["passages"] for r in rows}):
        by = {r["setup"]: r for r in rows if r["passages"] == size}
        b64 = by["batched vector env, 64 envs"]["steps_s"]
        http = by["64 envs, one HTTP request per query"]["steps_s"]
        single = by["single env"]
        print(f"{size}: batched-64 {b64:,.0f} steps/s = {b64 / http:.1f}x the HTTP pattern ({http:,.0f}); "
              f"single {single['steps_s']:,.0f} steps/s; overhead single {100 * (1 - single['retr_share']):.0f}%, "
              f"batched-64 {100 * (1 - by['batched vector env, 64 envs']['retr_share']):.0f}%")


if __name__ == "__main__":
    main()
