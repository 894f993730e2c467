"""Analyse the query strategies of a verl run from its `trainer.rollout_data_dir` dump.

    python examples/analyze_verl_dump.py path/to/rollout_data_dir --out report
    python examples/analyze_verl_dump.py --demo --out report     # writes a small verl-style dump first

verl (with `trainer.rollout_data_dir=...`) writes one `<step>.jsonl` per training step, one line per rollout:
`{"input": prompt, "output": response, "score": reward, "step": step, ...}`. `searchgym analyze` (here through
its Python API) finds the search calls in the responses, classifies every query's strategy and writes
report.md / report.html / summary.json. `--demo` plays the embedded world with two heuristic agents (a
narrow one for "step 0", a diverse one for "step 1") and writes their episodes in verl's format.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def write_demo_dump(out_dir: Path, n: int = 24) -> Path:
    """A verl-style rollout_data_dir: step 0 from the `question` agent, step 1 from `diverse`, 2 samples each."""
    import gymnasium as gym

    import searchgym  # noqa: F401 - registers the env ids
    from searchgym.agents import make_agent

    out_dir.mkdir(parents=True, exist_ok=True)
    env = gym.make("searchgym/SearchQA-v0", split="dev")
    for step, name in enumerate(("question", "diverse")):
        agent = make_agent(name, seed=step)
        with open(out_dir / f"{step}.jsonl", "w", encoding="utf-8") as f:
            for i in range(n):
                prompt, info = env.reset(seed=i // 2)
                agent.reset([0])
                response, done, reward = "", False, 0.0
                obs = prompt
                while not done:
                    action = agent.act([obs], [info])[0]
                    obs, reward, term, trunc, info = env.step(action)
                    response += action + (obs if not (term or trunc) else "")
                    done = term or trunc
                f.write(json.dumps({"input": prompt, "output": response, "score": float(reward), "step": step}) + "\n")
    return out_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dump", nargs="?", help="verl rollout_data_dir (a folder of <step>.jsonl files)")
    ap.add_argument("--demo", action="store_true", help="write a small verl-style dump and analyse it")
    ap.add_argument("--out", default="report", help="report directory")
    args = ap.parse_args()
    if not args.dump and not args.demo:
        ap.error("give a rollout_data_dir, or --demo")

    from searchgym.diversity.readers import read_run
    from searchgym.diversity.report import analyze_runs

    dump = Path(args.dump) if args.dump else write_demo_dump(Path(args.out) / "rollout_data_dir")
    run = read_run(dump, fmt="verl", label="verl run")
    print(f"read {len(run.episodes)} episodes: {run.read_stats.to_dict()}")
    analyze_runs([run], args.out)
    summary = json.loads((Path(args.out) / "summary.json").read_text(encoding="utf-8"))
    print(f"report: {Path(args.out) / 'report.html'}")
    print("summary keys:", sorted(summary)[:12])


if __name__ == "__main__":
    main()
