"""Benchmark: queries/s of ``searchgym analyze`` (reading + the core's slot-level statistics) on synthetic runs.

Two formats: a verl rollout dump whose searches are Qwen ``<tool_call>`` JSON (two calls per turn, two turns,
``<tool_response>`` results) and searchgym trajectory JSONL (schema with parallel ``queries``). Sizes: 10k and
100k queries (``--large`` adds 1M). Each configuration runs in a fresh subprocess so that its peak RSS
(``ru_maxrss``) is its own. It reports the read time, the analysis time (``core.analyze_episodes`` at the slot
level), queries/s of the two together and the time per query, whose max/min ratio over the sizes shows
whether the cost is linear (flat within 2x); q/s over CPU time is printed too (steadier on a shared machine). Goal: >= 20,000 queries/s at the slot level.

It also times the readers on adversarial 1 MB lines (40,000+ unclosed tags and the like), which the
quadratic readers before this one took minutes on.

    python scripts/bench_analyze.py            # 10k, 100k queries; all formats (a few minutes at most)
    python scripts/bench_analyze.py --large    # + 1M queries
    # against an earlier version, on the same files in the same run (a shared machine's speed varies):
    mkdir -p /tmp/ref && git archive REV searchgym | tar -x -C /tmp/ref
    python scripts/bench_analyze.py --sizes 30000 --reference /tmp/ref
    python scripts/bench_analyze.py --reference /tmp/ref --repeat 3   # medians of 3 alternated pairs

Formats: verl ``<tool_call>`` dumps, searchgym trajectories, a training stdout log (ANSI codes, process
prefixes, step lines, ``Solution string:`` samples) and a dump of Responses-style tool-call items that only the
generic tree reader reads (the last two are read only by this version, so not run against a reference).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENTS = [f"{a} {b}" for a in ("Port", "Mount", "Lake", "Saint", "Fort", "North", "Old", "New")
        for b in ("Elsin", "Ravenhill", "Castamere", "Greywater", "Dunmore", "Oakridge", "Vale", "Quill",
                  "Harrow", "Bellmoor", "Ashford", "Kestrel")]
RELS = ["founded", "wrote", "designed", "discovered", "named", "ruled", "built", "painted"]
FORMS = ["{e} {r}", "who {r} {e}", "{e} history", "{e} {r} year", "{e}", "{r} of {e} biography"]
QUERIES_PER_EPISODE = 4


def _episode(rng: random.Random):
    e, e2, r = rng.choice(ENTS), rng.choice(ENTS), rng.choice(RELS)
    question = f"Who {r} the place called {e}?"
    qs = [rng.choice(FORMS).format(e=e if i < 2 else e2, r=r) for i in range(QUERIES_PER_EPISODE)]
    docs = [[f"Doc {j + 1} (Title: {rng.choice(ENTS)})\n{e2} was {r} by {rng.choice(ENTS)} in {1800 + j}."
             for j in range(3)] for _ in qs]
    return question, qs, docs, e2


def write_verl(path: Path, n_queries: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n_queries // QUERIES_PER_EPISODE):
            question, qs, docs, ans = _episode(rng)
            out = []
            for t in range(0, len(qs), 2):
                out.append("<think>I should search.</think>\n")
                for q in qs[t:t + 2]:
                    out.append('<tool_call>\n{"name": "search", "arguments": {"query": ' + json.dumps(q)
                               + "}}\n</tool_call>\n")
                out.append("user\n")
                for d in docs[t:t + 2]:
                    out.append("<tool_response>\n" + json.dumps({"result": "\n\n".join(d)}) + "\n</tool_response>\n")
                out.append("assistant\n")
            out.append(f"<answer> {ans} </answer>")
            rec = {"input": f"<|im_start|>user\nAnswer the question. Question: {question}\n<|im_end|>\n"
                            "<|im_start|>assistant\n", "output": "".join(out), "score": float(i % 3 == 0),
                   "step": i * 10 // (n_queries // QUERIES_PER_EPISODE)}
            fh.write(json.dumps(rec) + "\n")


def write_searchgym(path: Path, n_queries: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as fh:
        n_eps = n_queries // QUERIES_PER_EPISODE
        for i in range(n_eps):
            question, qs, docs, ans = _episode(rng)
            steps = []
            for t in range(0, len(qs), 2):
                titles = [d.split(")")[0].split("Title: ")[1] for dd in docs[t:t + 2] for d in dd]
                steps.append({"action": "", "kind": "search", "query": qs[t], "queries": qs[t:t + 2],
                              "titles": titles, "doc_ids": [str(rng.randrange(10_000)) for _ in titles],
                              "gold_hit": None, "reward": 0.0})
            steps.append({"action": "", "kind": "answer", "query": None, "doc_ids": [], "gold_hit": None,
                          "reward": 0.0})
            rec = {"schema": 1, "episode_id": str(i), "question_id": question, "question": question,
                   "answers": [ans], "policy_step": i * 10 // n_eps, "steps": steps, "prediction": ans,
                   "reward": float(i % 3 == 0), "em": int(i % 3 == 0), "f1": 0.0, "num_searches": 2}
            fh.write(json.dumps(rec) + "\n")


def write_train_log(path: Path, n_queries: int, seed: int = 0) -> None:
    """The raw stdout of a training run: ANSI colours, ``(main_task pid=…)`` prefixes, ``epoch 0, step N``
    lines and Search-R1 samples between ``Golden answers:`` / ``Extracted answer:`` / ``Solution string:``."""
    rng = random.Random(seed)
    n_eps = n_queries // QUERIES_PER_EPISODE
    pre = "(main_task pid=40211) "
    with path.open("w", encoding="utf-8") as fh:
        step = -1
        for i in range(n_eps):
            s = i * 10 // n_eps
            if s != step:
                step = s
                fh.write(f"{pre}\x1b[36mepoch 0, step {step}\x1b[0m\n")
            question, qs, docs, ans = _episode(rng)
            body = "".join(f"<search> {q} </search>\n<information>{' '.join(d)}</information>\n"
                           for q, d in zip(qs, docs))
            text = (f"<|im_start|>user\nAnswer the question. Question: {question}<|im_end|>\n<|im_start|>assistant\n"
                    f"{body}<answer> {ans} </answer><|im_end|>")
            fh.write(f"{pre}--------------------------------\n{pre}Golden answers: ['{ans}']\n"
                     f"{pre}Extracted answer: {ans}\n")
            fh.write("".join(f"{pre}{'Solution string: ' if j == 0 else ''}{line}\n"
                             for j, line in enumerate(text.split("\n"))))


def write_tool_items(path: Path, n_queries: int, seed: int = 0) -> None:
    """A dump no named format reads (the generic tree reader): OpenAI Responses-style items under ``result``,
    JSON-encoded ``arguments``, every fourth call refused by the tool."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as fh:
        n_eps = n_queries // QUERIES_PER_EPISODE
        for i in range(n_eps):
            question, qs, docs, ans = _episode(rng)
            items: list[dict] = [{"type": "reasoning", "summary": "I should search."}]
            for j, (q, d) in enumerate(zip(qs, docs)):
                out = "[Search] Invalid request format" if (i + j) % 4 == 3 else "\n\n".join(d)
                items.append({"type": "tool_call", "tool_name": "search", "call_id": f"c{j}",
                              "arguments": json.dumps({"query": q}), "output": out})
            items.append({"type": "output_text", "text": ans})
            fh.write(json.dumps({"id": str(i), "question": question, "reward": float(i % 3 == 0),
                                 "step": i * 10 // n_eps, "result": items}) + "\n")


WRITERS = {"verl-toolcall": write_verl, "searchgym": write_searchgym, "train-log": write_train_log,
           "tree-items": write_tool_items}
# formats an earlier tree cannot read: not run against --reference
NEW_FORMATS = ("train-log", "tree-items")
# End-to-end queries/s of the readers + slot-level analysis before issue 20 (same script, same sizes):
REFERENCE_QPS = (10_900, 17_500)


def one(fmt: str, n: int, path: str, n_boot: int) -> dict:
    """Read and analyse one file (in this process); peak RSS is this process's."""
    from searchgym.diversity.core import analyze_episodes
    from searchgym.diversity.readers import read_run

    t0, c0 = time.perf_counter(), time.process_time()
    run = read_run(path)
    t1, c1 = time.perf_counter(), time.process_time()
    stats = analyze_episodes(run.episodes, levels=("slot",), n_boot=n_boot, read_stats=run.read_stats)
    t2, c2 = time.perf_counter(), time.process_time()
    nq = run.read_stats.queries
    slot = stats.levels["slot"]
    return {"format": fmt, "queries": nq, "episodes": run.read_stats.episodes, "read_s": t1 - t0,
            "analyze_s": t2 - t1, "total_s": t2 - t0, "qps": nq / (t2 - t0), "read_qps": nq / (t1 - t0),
            "read_cpu_qps": nq / max(c1 - c0, 1e-9), "cpu_qps": nq / max(c2 - c0, 1e-9),
            "us_per_query": 1e6 * (t2 - t0) / nq, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "slot_entropy": getattr(slot, "entropy", None)}


def adversarial() -> list[tuple[str, int, float]]:
    from searchgym.diversity.readers import read_run

    cases = {
        "40,000 unclosed <search> (320 KB)": "<search>" * 40_000,
        "1 MB of unclosed <search>": "<search>" * 125_000,
        "1 MB of unclosed <tool_call>": "<tool_call>" * 90_000,
        "1 MB of search + unclosed <information>": "<search>a</search><information>" * 30_000,
        "1 MB of 'Action: Search[' lines": "\nAction: Search[" * 60_000,
    }
    out = []
    with tempfile.TemporaryDirectory() as d:
        for name, text in cases.items():
            p = Path(d) / "adv.jsonl"
            p.write_text(json.dumps({"input": "Question: q", "output": text}) + "\n")
            t = time.perf_counter()
            read_run(p)
            out.append((name, len(text), time.perf_counter() - t))
    return out


def _measure(fmt: str, n: int, path: Path, n_boot: int, reference: str | None) -> dict:
    """One configuration in a fresh subprocess (of this version, or of the ``reference`` source tree)."""
    env = dict(os.environ)
    if reference:
        env["PYTHONPATH"] = os.path.abspath(reference) + os.pathsep + env.get("PYTHONPATH", "")
    res = subprocess.run([sys.executable, __file__, "--one", fmt, str(n), str(path), "--n-boot", str(n_boot)],
                         capture_output=True, text=True, check=False, env=env, cwd=tempfile.gettempdir())
    if res.returncode != 0:
        print(res.stderr, file=sys.stderr)
        raise SystemExit(res.returncode)
    return json.loads(res.stdout.strip().splitlines()[-1])


def _alternated(fmt: str, n: int, path: Path, n_boot: int, reference: str, repeat: int) -> dict:
    """This version and the reference, run in turn ``repeat`` times on the same file; each figure the median of
    its runs (on a shared machine the load moves between two runs: alternating spreads it over both)."""
    now, ref = [], []
    for _ in range(max(1, repeat)):
        now.append(_measure(fmt, n, path, n_boot, None))
        ref.append(_measure(fmt, n, path, n_boot, reference))
    r = dict(sorted(now, key=lambda x: x["qps"])[len(now) // 2])
    r["ref_qps"] = statistics.median(x["qps"] for x in ref)
    r["ref_cpu_qps"] = statistics.median(x["cpu_qps"] for x in ref)
    r["qps"] = statistics.median(x["qps"] for x in now)
    r["cpu_qps"] = statistics.median(x["cpu_qps"] for x in now)
    r["ratios"] = [a["qps"] / b["qps"] for a, b in zip(now, ref)]
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--large", action="store_true", help="add the 1M-query files")
    ap.add_argument("--sizes", type=str, default=None, help="comma-separated query counts (overrides defaults)")
    ap.add_argument("--n-boot", type=int, default=200, help="bootstrap resamples (as the CLI default)")
    ap.add_argument("--one", nargs=3, metavar=("FORMAT", "N", "PATH"), help=argparse.SUPPRESS)
    ap.add_argument("--reference", type=str, default=None,
                    help="a source tree of an earlier searchgym (holding searchgym/): run the same files with it")
    ap.add_argument("--repeat", type=int, default=1,
                    help="with --reference: run this version and the reference in turn this many times, and report "
                         "medians (a shared machine's load moves between runs)")
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]), args.one[2], args.n_boot)))
        return
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else [10_000, 100_000] + (
        [1_000_000] if args.large else [])
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for fmt, writer in WRITERS.items():
            for n in sizes:
                path = Path(d) / f"{fmt}-{n}.{'log' if fmt == 'train-log' else 'jsonl'}"
                writer(path, n)
                if args.reference and fmt not in NEW_FORMATS:
                    r = _alternated(fmt, n, path, args.n_boot, args.reference, args.repeat)
                else:
                    r = _measure(fmt, n, path, args.n_boot, None)
                r["file_mb"] = os.path.getsize(path) / 1e6
                rows.append(r)
                print(f"{fmt:14s} {r['queries']:>9,d} queries {r['file_mb']:7.1f} MB  read {r['read_s']:7.2f} s "
                      f"({r['read_qps']:>9,.0f} q/s)  analyze {r['analyze_s']:7.2f} s  total {r['qps']:>9,.0f} q/s  "
                      f"{r['us_per_query']:6.1f} us/query  (CPU: read {r['read_cpu_qps']:,.0f} q/s, total "
                      f"{r['cpu_qps']:,.0f} q/s)  peak RSS {r['peak_rss_mb']:7.0f} MB", flush=True)
            per = [r["us_per_query"] for r in rows if r["format"] == fmt]
            print(f"{fmt}: time per query max/min over sizes = {max(per) / min(per):.2f} (linear if <= 2)")
    print("\n| format | queries | file MB | read q/s | analyze s | total q/s | us/query | total q/s (CPU time) "
          "| peak RSS MB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['format']} | {r['queries']:,} | {r['file_mb']:.1f} | {r['read_qps']:,.0f} | {r['analyze_s']:.2f} "
              f"| {r['qps']:,.0f} | {r['us_per_query']:.1f} | {r['cpu_qps']:,.0f} | {r['peak_rss_mb']:.0f} |")
    if args.reference:
        print("\n| format | queries | total q/s now | total q/s reference | ratio | CPU q/s now | CPU q/s reference "
              "| CPU ratio | ratio of each pair |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
        for r in rows:
            if "ref_qps" in r:
                print(f"| {r['format']} | {r['queries']:,} | {r['qps']:,.0f} | {r['ref_qps']:,.0f} | "
                      f"{r['qps'] / r['ref_qps']:.2f} | {r['cpu_qps']:,.0f} | {r['ref_cpu_qps']:,.0f} | "
                      f"{r['cpu_qps'] / r['ref_cpu_qps']:.2f} | {' '.join(f'{x:.2f}' for x in r['ratios'])} |")
    lo, hi = REFERENCE_QPS
    worst = min(r["qps"] for r in rows)
    print(f"\nrecorded before issue 20 (another day's machine load): {lo:,}-{hi:,} q/s end to end; slowest row "
          f"now {worst:,.0f} q/s. Compare with --reference on the same run: wall-clock figures move with the "
          "load of a shared machine")
    print("\nadversarial lines (read_run):")
    for name, size, secs in adversarial():
        print(f"  {name:45s} {size / 1e6:5.2f} MB  {secs:6.3f} s")


if __name__ == "__main__":
    main()
