"""Train a search agent with TRL's GRPOTrainer on searchgym, on a CPU, with no download.

    python examples/trl_train.py                                   # tiny random model built here, 2 steps
    python examples/trl_train.py --model Qwen/Qwen2.5-0.5B-Instruct --steps 50 --generations 8   # a real model

The environment is `SearchgymToolEnv`: TRL turns its `search(query)` and `answer(answer)` methods into tools,
and its episode return (exact match) is the reward. `diversity_reward()` adds nothing to the reward and logs the
query diversity of each batch (`diversity/*`) beside TRL's own metrics. Needs `pip install 'searchgym[trl]'`.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=None, help="HF model name or path (default: a tiny random Qwen2 built here)")
    ap.add_argument("--out", default="runs/trl_example", help="output directory")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--generations", type=int, default=4, help="GRPO group size")
    ap.add_argument("--questions", type=int, default=8)
    ap.add_argument("--corpus", default=None, help="your corpus file or index directory (default: the world)")
    ap.add_argument("--dataset", default=None, help="your QA file (required with --corpus)")
    args = ap.parse_args()

    import torch
    from trl import GRPOConfig, GRPOTrainer

    from searchgym.integrations.tiny_model import build_tiny_chat_model
    from searchgym.integrations.trl import diversity_reward, env_factory, make_dataset

    model = args.model or str(build_tiny_chat_model(Path(args.out) / "tiny-qwen", overwrite=True))
    gpu = torch.cuda.is_available()
    config = GRPOConfig(output_dir=args.out, use_cpu=not gpu, bf16=gpu, max_steps=args.steps,
                        num_generations=args.generations, per_device_train_batch_size=args.generations,
                        max_completion_length=48 if args.model is None else 512,
                        max_tool_calling_iterations=2 if args.model is None else 5, reward_weights=[0.0],
                        logging_steps=1, report_to="none", save_strategy="no", seed=0)
    trainer = GRPOTrainer(
        model=model,
        train_dataset=make_dataset(split="train", n=args.questions, corpus=args.corpus, dataset=args.dataset),
        environment_factory=env_factory(corpus=args.corpus, dataset=args.dataset),
        reward_funcs=[diversity_reward()],
        args=config,
    )
    trainer.train()
    for row in trainer.state.log_history:
        if "tools/call_frequency" in row:
            shown = {k: round(v, 3) for k, v in row.items() if k.startswith(("tools/", "rewards/", "diversity/string"))}
            print(f"step {row.get('step')}: {shown}")


if __name__ == "__main__":
    main()
