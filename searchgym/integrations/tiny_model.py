"""A tiny, randomly initialised chat model built on the spot: the offline default of the trainer examples.

``searchgym tiny-model --out DIR`` (or :func:`build_tiny_chat_model`) writes a normal Hugging Face model
directory, a 1-layer Qwen2 with a byte-level tokenizer and Qwen2.5's chat template, in about a second
and with no download, so ``GRPOTrainer(model=DIR, ...)`` runs on a CPU as written. It learns nothing
useful; it shows that the pipeline runs. Swap in a real model (``Qwen/Qwen2.5-0.5B-Instruct``) for training.

The tokenizer's extra tokens are whole tool calls (``<tool_call>{"name": "search", ...}</tool_call>``), so
sampling from the random model calls the env's tools in every short run: the tools, the corrective
messages and the rewards all run for real.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from searchgym.errors import ConfigError
from searchgym.outdir import atomic_out_dir

MARKER = "searchgym_tiny_model"  # in config.json: what ``--overwrite`` may replace
MAX_SEED = 2**63 - 1
MAX_HIDDEN = 4096

# Queries the tiny model can "say" in one token each: names of the embedded world (seed 0) and one bad call.
_QUERIES = ("capital of Kaitrland", "Thihaven country", "elevation of Fiholm", "who founded Zeazemoor",
            "Brodismoor population", "river in Hakania")


def _tool_call(name: str, **args: object) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


def _chat_template() -> str:
    try:
        from trl.chat_template_utils import qwen2_5_chat_template
    except ImportError:  # trl not installed: a plain template without tools is still a valid chat model
        return ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    return str(qwen2_5_chat_template)


def is_tiny_model_dir(path: Path) -> bool:
    """A folder written by :func:`build_tiny_chat_model` (its config.json carries the marker)."""
    try:
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(cfg, dict) and cfg.get(MARKER) is True


def _check_args(seed: Any, hidden_size: Any) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ConfigError(f"tiny model: --seed {seed!r} must be an integer in 0..{MAX_SEED}")
    if isinstance(hidden_size, bool) or not isinstance(hidden_size, int) or not 2 <= hidden_size <= MAX_HIDDEN \
            or hidden_size % 2:
        raise ConfigError(f"tiny model: hidden_size {hidden_size!r} must be an even integer in 2..{MAX_HIDDEN}")


def build_tiny_chat_model(out: str | Path, *, seed: int = 0, hidden_size: int = 32, overwrite: bool = False) -> Path:
    """Write a random 1-layer Qwen2 chat model and its tokenizer to ``out``; return the directory.

    ``out`` must be absent or empty; a tiny model written before is replaced only with ``overwrite``, and a
    folder of anything else never (ConfigError). Written into a temporary sibling and swapped into place.
    Needs ``transformers``, ``tokenizers`` and ``torch`` (``pip install 'searchgym[train]'``). No network.
    """
    _check_args(seed, hidden_size)
    out = Path(out)
    with atomic_out_dir(out, overwrite=overwrite, is_own=is_tiny_model_dir, what="a tiny model") as tmp:
        _write_model(tmp, seed, hidden_size)
    return out


def _write_model(out: Path, seed: int, hidden_size: int) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok.add_tokens([_tool_call("search", query=q) for q in _QUERIES]
                   + [_tool_call("search", q="missing query"), _tool_call("answer", answer="1205")])
    tokenizer: Any = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                             padding_side="left")
    tokenizer.chat_template = _chat_template()
    cfg = Qwen2Config(vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                      num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                      max_position_embeddings=4096, eos_token_id=tokenizer.eos_token_id,
                      pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True)
    setattr(cfg, MARKER, True)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(cfg)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


__all__ = ["build_tiny_chat_model"]
