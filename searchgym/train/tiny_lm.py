"""A tiny causal LM built from scratch for the CPU path: a byte-level BPE tokenizer trained with ``tokenizers``
on the world's text, and a small Llama-style model from a ``transformers`` config.

Both are saved as an ordinary Hugging Face model directory, so ``AutoModelForCausalLM.from_pretrained(dir)`` /
``AutoTokenizer.from_pretrained(dir)`` (and therefore ``LMAgent``) load them unchanged.

The grammar tags are single added tokens, so stopping on ``</search>`` / ``</answer>`` and masking the
``<information>`` block are exact at the token level. They are *not* special tokens: decoding with
``skip_special_tokens=True`` keeps them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

GRAMMAR_TOKENS = ["<search>", "</search>", "<answer>", "</answer>", "<information>", "</information>",
                  "<think>", "</think>"]
EOS = "<|endoftext|>"
PAD = "<|pad|>"


@dataclass
class TinyLMConfig:
    vocab_size: int = 2048            # BPE vocabulary incl. grammar and special tokens
    hidden_size: int = 128            # model width
    num_layers: int = 4               # transformer blocks
    num_heads: int = 4                # attention heads
    intermediate_size: int = 384      # MLP width
    max_positions: int = 1024         # longest context (prompt + turns + observations)
    tie_embeddings: bool = True       # share input/output embeddings (fewer parameters)


def train_tokenizer(texts: Iterable[str], vocab_size: int = 2048) -> Any:
    """Train a byte-level BPE tokenizer; returns a ``transformers.PreTrainedTokenizerFast``."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS, PAD], min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator((t for t in texts), trainer=trainer)
    tok.add_tokens([AddedToken(t, single_word=False, lstrip=False, rstrip=False, normalized=False,
                               special=False) for t in GRAMMAR_TOKENS])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, bos_token=EOS, pad_token=PAD,
                                   unk_token=None, clean_up_tokenization_spaces=False)
    fast.padding_side = "left"
    return fast


def build_model(tokenizer: Any, cfg: TinyLMConfig | None = None, *, seed: int = 0) -> Any:
    """A freshly initialised Llama-style causal LM sized by ``cfg``."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    cfg = cfg or TinyLMConfig()
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_heads, max_position_embeddings=cfg.max_positions,
        tie_word_embeddings=cfg.tie_embeddings, bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, rope_theta=10000.0,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def world_texts(world: Any, *, prompts: Iterable[str] = ()) -> list[str]:
    """The text a tokenizer for ``world`` should see: passages (as the env shows them), questions, answers,
    prompts and the grammar."""
    out: list[str] = []
    for p in world.passages:
        out.append(f"Doc 1(Title: {p.title}) {p.text}")
    for split in ("train", "dev"):
        exs = world.splits.get(split, []) if hasattr(world, "splits") else world.split(split)
        for ex in exs:
            out.append(ex.question)
            out.extend(f"<answer> {a} </answer>" for a in ex.answers)
    out.extend(prompts)
    out.append(" ".join(GRAMMAR_TOKENS))
    return out


def create_tiny_lm(texts: Iterable[str], out_dir: str | Path, cfg: TinyLMConfig | None = None, *,
                   seed: int = 0) -> tuple[Any, Any]:
    """Train the tokenizer on ``texts``, build the model, save both to ``out_dir``; returns (model, tokenizer)."""
    import json

    cfg = cfg or TinyLMConfig()
    tok = train_tokenizer(texts, cfg.vocab_size)
    model = build_model(tok, cfg, seed=seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    (out / "tiny_lm_config.json").write_text(json.dumps(asdict(cfg), indent=1))
    return model, tok


def load_lm(name_or_path: str | Path, *, device: str = "cpu", dtype: Any = None) -> tuple[Any, Any]:
    """Load any causal LM + tokenizer (the tiny one or a Hugging Face model) and make sure the grammar tags
    are single tokens and a pad token exists."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from searchgym.agents.model_files import check_model_dir
    from searchgym.errors import ModelLoadError

    check_model_dir(name_or_path)  # a lying safetensors header or config.json: ModelLoadError, not a traceback
    try:
        tok = AutoTokenizer.from_pretrained(str(name_or_path))
        model = AutoModelForCausalLM.from_pretrained(str(name_or_path), dtype=dtype or torch.float32)
    except Exception as e:
        raise ModelLoadError(f"cannot load model {name_or_path!r}: {e}. Give a local directory (e.g. a "
                             "searchgym checkpoint's model/ dir) or a hub name while online") from e
    added = ensure_grammar_tokens(tok)
    if added:
        model.resize_token_embeddings(len(tok))
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    model.to(device)
    return model, tok


def ensure_grammar_tokens(tokenizer: Any) -> int:
    """Add the grammar tags as (non-special) tokens where they are not single tokens yet."""
    from tokenizers import AddedToken

    missing = [t for t in GRAMMAR_TOKENS if len(tokenizer.encode(t, add_special_tokens=False)) != 1]
    if not missing:
        return 0
    return tokenizer.add_tokens([AddedToken(t, normalized=False, special=False) for t in missing])


def grammar_ids(tokenizer: Any) -> dict[str, int]:
    return {t: tokenizer.convert_tokens_to_ids(t) for t in GRAMMAR_TOKENS}


def count_parameters(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())
