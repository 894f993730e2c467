"""Your own corpus and questions in the searchgym environment: index, env, one agent, a score.

    python examples/custom_corpus_env.py                               # writes a tiny corpus + QA file first
    python examples/custom_corpus_env.py --corpus my.jsonl --dataset qa.jsonl

Corpus lines (Search-R1 / FlashRAG jsonl): {"id": "0", "contents": "\\"Title\\"\\ntext"} or {"id", "title", "text"}.
QA lines (FlashRAG jsonl): {"id": "q1", "question": "...", "golden_answers": ["..."]}; Search-R1 parquet,
HotpotQA, MuSiQue and 2Wiki files work too. `dataset=` is required with `corpus=`: without it `gym.make` refuses
(the env would ask the embedded world's questions against your passages).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

PASSAGES = [
    ("Fiholm", "Fiholm is a city of Kaitrland, founded in 1205 by the merchant Oda Brenn."),
    ("Kaitrland", "Kaitrland is a country in the north. Its capital is Zeazemoor."),
    ("Zeazemoor", "Zeazemoor is the capital city of Kaitrland, on the river Hak."),
    ("Oda Brenn", "Oda Brenn was a merchant born in Zeazemoor in 1170."),
    ("Hak (river)", "The Hak is a river of Kaitrland that flows through Zeazemoor."),
]
QUESTIONS = [
    ("q1", "When was Fiholm founded?", ["1205"]),
    ("q2", "What is the capital of Kaitrland?", ["Zeazemoor"]),
    ("q3", "Where was Oda Brenn born?", ["Zeazemoor"]),
    ("q4", "Which river flows through Zeazemoor?", ["Hak", "the Hak"]),
]


def write_demo_files(folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    corpus, qa = folder / "corpus.jsonl", folder / "qa.jsonl"
    with open(corpus, "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"id": str(i), "contents": f'"{title}"\n{text}'}) + "\n" for i, (title, text) in enumerate(PASSAGES))
    with open(qa, "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"id": qid, "question": question, "golden_answers": answers}) + "\n" for qid, question, answers in QUESTIONS)
    return corpus, qa


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", help="corpus file (jsonl/parquet)")
    ap.add_argument("--dataset", help="QA file")
    ap.add_argument("--out", default="custom_corpus", help="working directory (index, demo files, trajectories)")
    ap.add_argument("--agent", default="decompose", help="heuristic agent, model path or hf:NAME")
    args = ap.parse_args()
    out = Path(args.out)

    import gymnasium as gym

    import searchgym  # noqa: F401 - registers the env ids
    from searchgym.agents import make_agent
    from searchgym.agents.rollout import rollout, summarize
    from searchgym.errors import ConfigError
    from searchgym.retrieval import build_index

    corpus, qa = (Path(args.corpus), Path(args.dataset)) if args.corpus else write_demo_files(out)
    index = build_index(str(corpus), out / "index", overwrite=True)      # BM25; dense=MODEL adds FAISS

    try:
        gym.make("searchgym/SearchQA-v0", corpus=str(index))
    except ConfigError as exc:
        print("without dataset=:", str(exc).split(":")[0])

    env = gym.make("searchgym/SearchQA-v0", corpus=str(index), dataset=str(qa), top_k=2)
    obs, info = env.reset(seed=0)
    print("question:", info["question"])
    obs, *_ = env.step(f"<search> {info['question']} </search>")
    print(obs.strip()[:200])

    trajectories = rollout(make_agent(args.agent), "searchgym/SearchQA-v0", n=len(env.unwrapped.examples), samples=2,
                           env_kwargs={"corpus": str(index), "dataset": str(qa), "top_k": 2}, progress=False,
                           out=out / "trajectories.jsonl")
    print("summary:", summarize(trajectories).get("all", summarize(trajectories)))


if __name__ == "__main__":
    main()
