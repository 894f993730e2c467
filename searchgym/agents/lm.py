"""Hugging Face causal-LM policy: a standalone batched sampler (:func:`generate`) and :class:`LMAgent`.

:func:`generate` is the one sampling loop of searchgym; the trainers import it. It left-pads the batch,
runs the prompt once and then decodes token by token with the KV cache, samples with temperature and
top-p, and stops each sequence on its own at a stop string (``</search>``, ``</answer>``), at an extra
stop token id, or at EOS. For every generated token it returns

- ``logprobs[t]`` = log softmax(z_t / T)[y_t], the log-probability of the sampled token under the
  temperature-scaled distribution (before top-p truncation, which is what a trainer recomputes), and
- ``entropies[t]`` = -sum_j p_tj log p_tj with p_t = softmax(z_t / T), the entropy of the full
  next-token distribution (literature notes §3: a property of the generation distribution).

With ``temperature == 0`` decoding is greedy and both are computed at T = 1.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from searchgym.errors import ConfigError, ModelLoadError

if TYPE_CHECKING:  # pragma: no cover
    import torch

STOP_STRINGS: tuple[str, ...] = ("</search>", "</answer>")


@dataclass
class GenerationOutput:
    """One sampled continuation.

    ``token_ids`` are the generated ids (the prompt is not included), cut after the token that completed
    the stop string (that token may carry a few characters after it, e.g. a newline); ``text`` is the
    decoded continuation cut right after the stop string. ``finish_reason`` is ``"stop"`` (stop string
    or stop id), ``"eos"`` or ``"length"``.
    """

    text: str
    token_ids: list[int]
    logprobs: list[float]
    entropies: list[float]
    finish_reason: str = "length"
    stop_string: str | None = None
    prompt_len: int = 0
    prompt_truncated: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)


def _max_positions(model: Any) -> int | None:
    cfg = getattr(model, "config", None)
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        v = getattr(cfg, name, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def _pad_id(tokenizer: Any) -> int:
    for name in ("pad_token_id", "eos_token_id", "unk_token_id"):
        v = getattr(tokenizer, name, None)
        if isinstance(v, int):
            return v
    return 0


def _eos_ids(tokenizer: Any, model: Any) -> set[int]:
    out: set[int] = set()
    for src in (getattr(tokenizer, "eos_token_id", None),
                getattr(getattr(model, "generation_config", None), "eos_token_id", None)):
        if isinstance(src, int):
            out.add(src)
        elif isinstance(src, (list, tuple)):
            out.update(int(x) for x in src)
    return out


def _forward_params(model: Any) -> set[str]:
    """The keyword names ``model.forward`` takes (empty when its signature cannot be read)."""
    import inspect

    try:
        return set(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError):
        return set()


def _accepts_logits_to_keep(model: Any) -> bool:
    """Whether ``model.forward`` takes ``logits_to_keep`` (transformers' causal LMs since 4.45 do)."""
    return "logits_to_keep" in _forward_params(model)


def _cache_kwarg(model: Any) -> str:
    """The name ``model.forward`` takes its KV cache under: ``cache`` (transformers >= 5.24, where
    ``past_key_values`` is a deprecated alias that warns on every call) or ``past_key_values`` (earlier, and most
    custom models)."""
    return "cache" if "cache" in _forward_params(model) else "past_key_values"


def _top_p_filter(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Zero the tail of each row outside the smallest set of tokens whose mass reaches ``top_p``."""
    import torch

    sorted_p, idx = torch.sort(probs, dim=-1, descending=True)
    cum = torch.cumsum(sorted_p, dim=-1)
    remove = (cum - sorted_p) > top_p  # keeps the first token always
    sorted_p = sorted_p.masked_fill(remove, 0.0)
    out = torch.zeros_like(probs).scatter_(-1, idx, sorted_p)
    return out


@dataclass
class KVHistory:
    """What the model has already read of one sequence, to continue it without reading it again: the token ids
    fed so far and, per layer, their keys and values (``[heads, len(ids), head_dim]``; the rotary position is
    already in the keys, so padding between turns is simply left out)."""

    ids: list[int]
    kv: list[tuple[torch.Tensor, torch.Tensor]]


def _check_sampling(max_new_tokens: int, temperature: float, top_p: float) -> None:
    if max_new_tokens < 1:
        raise ConfigError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if temperature < 0:
        raise ConfigError(f"temperature must be >= 0, got {temperature}")
    if not 0 < top_p <= 1:
        raise ConfigError(f"top_p must be in (0, 1], got {top_p}")


def _prompt_ids(model: Any, tokenizer: Any, prompts: Sequence[Sequence[int]] | Sequence[str],
                max_new_tokens: int, add_special_tokens: bool) -> tuple[list[list[int]], list[bool]]:
    """Token ids of every prompt, cut from the left to fit the model's context (and whether each was cut)."""
    ids_list = [list(tokenizer(p, add_special_tokens=add_special_tokens)["input_ids"]) if isinstance(p, str)
                else [int(x) for x in p] for p in prompts]
    max_pos = _max_positions(model)
    truncated = [False] * len(ids_list)
    if max_pos is not None:
        budget = max_pos - max_new_tokens
        if budget < 1:
            raise ConfigError(f"max_new_tokens={max_new_tokens} does not fit the model context ({max_pos})")
        for i, ids in enumerate(ids_list):
            if len(ids) > budget:
                ids_list[i] = ids[-budget:]
                truncated[i] = True
    for i, ids in enumerate(ids_list):
        if not ids:  # an empty prompt: start from BOS/EOS so the model has something to condition on
            bos = getattr(tokenizer, "bos_token_id", None)
            ids_list[i] = [bos if isinstance(bos, int) else _pad_id(tokenizer)]
    return ids_list, truncated


def _usable_history(history: Sequence[KVHistory | None] | None, ids_list: list[list[int]],
                    truncated: list[bool]) -> list[KVHistory | None]:
    """Each prompt's history when it is a strict prefix of the (uncut) prompt, else None (read it whole)."""
    out: list[KVHistory | None] = [None] * len(ids_list)
    for i, h in enumerate(history or []):
        ids = ids_list[i]
        if h is not None and not truncated[i] and len(h.ids) < len(ids) and ids[:len(h.ids)] == h.ids:
            out[i] = h
    return out


def _prefill_inputs(ids_list: list[list[int]], hist: list[KVHistory | None], pad: int,
                    device: torch.device) -> tuple[Any, Any, Any, Any]:
    """``(input ids, attention mask, position ids, past keys/values per layer or None)`` of the first forward:
    every row's unread tokens, left-padded, after its history (left-padded to the longest history)."""
    import torch

    n = len(ids_list)
    hl = [len(h.ids) if h is not None else 0 for h in hist]
    new = [ids[k:] for ids, k in zip(ids_list, hl)]
    width, past_w = max(len(x) for x in new), max(hl)
    input_ids = torch.full((n, width), pad, dtype=torch.long)
    attn = torch.zeros((n, past_w + width), dtype=torch.long)
    for i, ids in enumerate(new):
        input_ids[i, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
        attn[i, past_w - hl[i]:past_w] = 1
        attn[i, past_w + width - len(ids):] = 1
    attn = attn.to(device)
    position_ids = (attn.cumsum(-1) - 1).clamp(min=0)[:, past_w:]
    past = None
    if past_w:
        past = []
        for layer in range(len(next(h for h in hist if h is not None).kv)):
            pair = []
            for j in (0, 1):
                ref = next(h for h in hist if h is not None).kv[layer][j]
                t = ref.new_zeros((n, ref.shape[0], past_w, ref.shape[2]))
                for i, h in enumerate(hist):
                    if h is not None:
                        t[i, :, past_w - hl[i]:] = h.kv[layer][j]
                pair.append(t)
            past.append((pair[0], pair[1]))
    return input_ids.to(device), attn, position_ids, past


def _sample(logits: torch.Tensor, temperature: float, top_p: float,
            generator: torch.Generator | None) -> tuple[list[int], list[float], list[float]]:
    """Next token, its log-probability and the distribution's entropy per row (greedy at temperature 0)."""
    import torch

    greedy = temperature == 0
    logits = logits.float() / (1.0 if greedy else float(temperature))
    logp_all = torch.log_softmax(logits, dim=-1)
    probs = logp_all.exp()
    entropy = -(probs * logp_all).sum(-1)
    if greedy:
        nxt = torch.argmax(logits, dim=-1)
    else:
        sp = _top_p_filter(probs, top_p) if top_p < 1.0 else probs
        nxt = torch.multinomial(sp, 1, generator=generator).squeeze(-1)
    lp = logp_all.gather(-1, nxt.unsqueeze(-1)).squeeze(-1)
    return nxt.tolist(), lp.tolist(), entropy.tolist()


class _Stopper:
    """Per-sequence stopping: EOS, an extra stop id, or a stop string in the decoded tail."""

    def __init__(self, tokenizer: Any, model: Any, stop_strings: Sequence[str], stop_token_ids: Sequence[int],
                 stop_at_eos: bool):
        self.tokenizer = tokenizer
        self.stops = [s for s in stop_strings if s]
        self.stop_ids = {int(x) for x in stop_token_ids}
        self.eos = _eos_ids(tokenizer, model) if stop_at_eos else set()
        self.tail = max((len(s) for s in self.stops), default=0) + 4

    def __call__(self, ids: list[int]) -> tuple[str, str | None] | None:
        """``(finish reason, stop string)`` when the sequence ending in ``ids[-1]`` is done, else None."""
        tok = ids[-1]
        if tok in self.eos:
            return "eos", None
        if tok in self.stop_ids:
            return "stop", None
        if self.stops:
            t = self.tokenizer.decode(ids[-self.tail:], skip_special_tokens=True)
            for s in self.stops:
                if s in t:
                    return "stop", s
        return None


class _Decoding:
    """The per-sequence record of one :func:`generate` call and the batch rows still decoding.

    ``alive`` maps batch rows to sequences; finished rows stay in the batch (fed a pad token, masked out) until a
    quarter of the batch has finished, then the batch and its KV cache shrink to the unfinished rows. Keeping that
    rule (and the row order) keeps the sampler's random stream, so a seed samples the same tokens with or without
    a history."""

    def __init__(self, n: int, stopper: _Stopper, keep_history: bool):
        self.stopper = stopper
        self.gen_ids: list[list[int]] = [[] for _ in range(n)]
        self.logps: list[list[float]] = [[] for _ in range(n)]
        self.ents: list[list[float]] = [[] for _ in range(n)]
        self.finish = ["length"] * n
        self.stop_hit: list[str | None] = [None] * n
        self.active = [True] * n
        self.alive = list(range(n))
        self.keep_history = keep_history
        self.kv: list[list[tuple[Any, Any]] | None] = [None] * n  # each sequence's keys/values when it left

    def record(self, nxt: list[int], lp: list[float], ent: list[float]) -> None:
        for r, i in enumerate(self.alive):
            if not self.active[i]:
                continue
            self.gen_ids[i].append(nxt[r])
            self.logps[i].append(lp[r])
            self.ents[i].append(ent[r])
            done = self.stopper(self.gen_ids[i])
            if done is not None:
                self.finish[i], self.stop_hit[i] = done
                self.active[i] = False

    def stash(self, rows: list[int], past: Any, attn: torch.Tensor) -> None:
        """Keep the read keys/values (the unmasked columns) of these batch rows, when asked to."""
        if not self.keep_history:
            return
        layers = _cache_layers(past)
        if layers is None:
            self.keep_history = False
            return
        width = layers[0][0].shape[2]
        for r in rows:
            cols = attn[r, :width].nonzero().squeeze(-1)
            self.kv[self.alive[r]] = [(k[r][:, cols], v[r][:, cols]) for k, v in layers]


def _cache_layers(past: Any) -> list[tuple[Any, Any]] | None:
    """The per-layer ``(keys, values)`` of a plain transformers ``DynamicCache`` (None for any other cache)."""
    layers = getattr(past, "layers", None)
    if not layers or any(type(layer).__name__ not in ("DynamicLayer", "GrowingLayer") for layer in layers):
        return None
    return [(layer.keys, layer.values) for layer in layers]


@functools.lru_cache(maxsize=1)
def _growing_layer() -> Any:
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        """A ``DynamicLayer`` whose keys/values are views of a buffer with room for ``reserve`` more positions: a
        decode step writes its one column instead of copying the whole cache (``torch.cat``), which on a CPU
        whose memory bandwidth is shared is much of a tiny LM's decode step. The same numbers."""

        def __init__(self, reserve: int):
            super().__init__()
            self.reserve, self._n, self._kb, self._vb = reserve, 0, None, None

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            n, q = self._n, key_states.shape[-2]
            if self._kb is None or n + q > self._kb.shape[-2]:
                shape = (*key_states.shape[:2], n + q + self.reserve)
                kb = key_states.new_empty((*shape, key_states.shape[-1]))
                vb = value_states.new_empty((*shape, value_states.shape[-1]))
                if n:
                    kb[:, :, :n] = self.keys
                    vb[:, :, :n] = self.values
                self._kb, self._vb = kb, vb
            self._kb[:, :, n:n + q] = key_states
            self._vb[:, :, n:n + q] = value_states
            self._n = n + q
            self.keys, self.values = self._kb[:, :, :self._n], self._vb[:, :, :self._n]
            return self.keys, self.values

        def batch_select_indices(self, indices: Any) -> None:
            if self._n:
                self._kb, self._vb = self._kb[indices], self._vb[indices]
                self.keys, self.values = self._kb[:, :, :self._n], self._vb[:, :, :self._n]

    return GrowingLayer


def _as_cache(model: Any, past: list[tuple[Any, Any]] | None, reserve: int) -> Any:
    """A ``DynamicCache`` of growing layers (:func:`_growing_layer`, holding ``past`` when given) for a model whose
    layers all use full attention; else the model's own cache (a plain ``DynamicCache`` of ``past``, or None)."""
    from transformers import DynamicCache

    cfg = getattr(model, "config", None)
    text = cfg.get_text_config(decoder=True) if hasattr(cfg, "get_text_config") else cfg
    if getattr(text, "layer_types", None) and set(text.layer_types) != {"full_attention"} \
            or not hasattr(DynamicCache(), "layers"):
        return DynamicCache(ddp_cache_data=past) if past is not None else None
    layer = _growing_layer()
    cache = DynamicCache()
    cache.layer_class_to_replicate = functools.partial(layer, reserve)
    for k, v in past or []:
        cache.layers.append(layer(reserve))
        cache.layers[-1].update(k, v)
    return cache


def _decode(model: Any, inputs: tuple[Any, Any, Any, Any], dec: _Decoding, *, max_new_tokens: int, pad: int,
            temperature: float, top_p: float, generator: torch.Generator | None) -> None:
    """Run the prefill and then one token per step for every unfinished row, until all stop or the budget ends."""
    import torch

    cur_ids, attn, cur_pos, past_kv = inputs
    device = attn.device
    # only the last position's logits are sampled from: on the prefill this skips the LM head on every prompt
    # token (a fifth of a tiny LM's prefill time; the kept logits are the same numbers)
    last_only = {"logits_to_keep": 1} if _accepts_logits_to_keep(model) else {}
    cache_kw = _cache_kwarg(model)
    past = _as_cache(model, past_kv, max_new_tokens)
    can_compact = True
    for step in range(max_new_tokens):
        out = model(input_ids=cur_ids, attention_mask=attn, position_ids=cur_pos, use_cache=True,
                    **{cache_kw: past}, **last_only)
        past = out.cache if cache_kw == "cache" else out.past_key_values
        nxt, lp, ent = _sample(out.logits[:, -1, :], temperature, top_p, generator)
        dec.record(nxt, lp, ent)
        keep = [r for r, i in enumerate(dec.alive) if dec.active[i]]
        if not keep or step == max_new_tokens - 1:
            break
        if can_compact and len(keep) <= 0.75 * len(dec.alive):
            # Drop finished rows from the batch and the KV cache, so they cost nothing any more.
            idx = torch.tensor(keep, dtype=torch.long, device=device)
            kept = set(keep)
            dec.stash([r for r in range(len(dec.alive)) if r not in kept], past, attn)
            try:
                past.batch_select_indices(idx)
            except (AttributeError, NotImplementedError, TypeError):
                can_compact = False
            else:
                dec.alive = [dec.alive[r] for r in keep]
                attn, cur_pos = attn[idx], cur_pos[idx]
                nxt = [nxt[r] for r in keep]
        # Finished rows that are still in the batch decode a pad token, masked out; their outputs are ignored.
        live = [dec.active[i] for i in dec.alive]
        cur_ids = torch.tensor([t if a else pad for t, a in zip(nxt, live)], dtype=torch.long,
                               device=device).unsqueeze(-1)
        cur_pos = cur_pos[:, -1:] + 1
        attn = torch.cat([attn, torch.tensor(live, dtype=attn.dtype, device=device).unsqueeze(-1)], dim=-1)
    dec.stash(list(range(len(dec.alive))), past, attn)


def generate(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Sequence[int]] | Sequence[str],
    *,
    max_new_tokens: int = 64,
    temperature: float = 1.0,
    top_p: float = 1.0,
    stop_strings: Sequence[str] = STOP_STRINGS,
    stop_token_ids: Sequence[int] = (),
    stop_at_eos: bool = True,
    device: str | torch.device | None = None,
    generator: torch.Generator | None = None,
    add_special_tokens: bool = False,
    history: Sequence[KVHistory | None] | None = None,
    keep_history: bool = False,
) -> list[GenerationOutput]:
    """Sample one continuation per prompt, batched, with per-sequence stopping.

    ``prompts`` are token-id lists or strings (strings are tokenized with ``add_special_tokens``; chat
    templates already carry their special tokens). A prompt that would overflow the model's context is
    cut from the left (``prompt_truncated``). ``generator`` seeds the sampling (it must live on
    ``device``). Returns one :class:`GenerationOutput` per prompt, in order.

    Multi-turn callers pass ``keep_history=True`` and get each sequence's :class:`KVHistory` in
    ``output.extra["history"]`` (None when the model's cache is not a plain ``DynamicCache``); given back as
    ``history[i]`` with a prompt that extends it, only the new tokens are read. The sampled tokens are the same
    either way (the log-probs agree to float rounding).
    """
    import torch

    _check_sampling(max_new_tokens, temperature, top_p)
    if not prompts:
        return []
    device = torch.device(device if device is not None else next(model.parameters()).device)
    ids_list, truncated = _prompt_ids(model, tokenizer, prompts, max_new_tokens, add_special_tokens)
    hist = _usable_history(history, ids_list, truncated)
    pad = _pad_id(tokenizer)
    dec = _Decoding(len(ids_list), _Stopper(tokenizer, model, stop_strings, stop_token_ids, stop_at_eos),
                    keep_history)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            _decode(model, _prefill_inputs(ids_list, hist, pad, device), dec, max_new_tokens=max_new_tokens,
                    pad=pad, temperature=temperature, top_p=top_p, generator=generator)
    finally:
        if was_training:
            model.train()
    return [_output(tokenizer, dec, i, ids_list[i], truncated[i]) for i in range(len(ids_list))]


def _output(tokenizer: Any, dec: _Decoding, i: int, prompt_ids: list[int], truncated: bool) -> GenerationOutput:
    text = tokenizer.decode(dec.gen_ids[i], skip_special_tokens=True)
    s = dec.stop_hit[i]
    if s is not None:
        cut = min((text.find(x) + len(x) for x in dec.stopper.stops if x in text), default=len(text))
        text = text[:cut]
    o = GenerationOutput(text=text, token_ids=dec.gen_ids[i], logprobs=dec.logps[i], entropies=dec.ents[i],
                         finish_reason=dec.finish[i], stop_string=s, prompt_len=len(prompt_ids),
                         prompt_truncated=truncated)
    if dec.keep_history:
        kv = dec.kv[i]
        fed = prompt_ids + dec.gen_ids[i][:-1]  # the last sampled token was never fed
        ok = kv is not None and kv[0][0].shape[1] == len(fed)
        o.extra["history"] = KVHistory(ids=fed, kv=kv) if ok else None
    return o


# --------------------------------------------------------------------------------------------------
# Loading


def _hub_offline() -> bool:
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on"):
            return True
    return False


def _hub_reachable(timeout: float = 3.0) -> bool:
    import httpx

    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    try:
        httpx.head(endpoint, timeout=timeout, follow_redirects=False)
        return True
    except (httpx.HTTPError, OSError):
        return False


def _looks_like_path(name: str) -> bool:
    return name.startswith((".", "/", "~")) or os.sep in name.strip("/").split("/", 1)[-1] or \
        name.count("/") > 1 or name.endswith((".json", ".safetensors", ".bin"))


def load_model_and_tokenizer(
    model_name_or_path: str,
    *,
    device: str = "cpu",
    dtype: str | None = None,
    trust_remote_code: bool = False,
) -> tuple[Any, Any]:
    """Load a causal LM and its tokenizer from a local directory, or from the hub when online.

    A path that does not exist, or a hub name while offline (``HF_HUB_OFFLINE=1`` or hub unreachable),
    raises :class:`ModelLoadError` at once, never a hang: the load uses ``local_files_only`` then.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    name = str(model_name_or_path)
    path = Path(name).expanduser()
    local = path.exists()
    if not local and _looks_like_path(name):
        raise ModelLoadError(f"model path {name!r} does not exist; pass a directory with config.json and "
                             f"weights (e.g. one written by model.save_pretrained), or a hub name")
    local_only = local or _hub_offline() or not _hub_reachable()
    src = str(path) if local else name
    torch_dtype: Any = None
    if dtype not in (None, "auto"):
        try:
            torch_dtype = getattr(torch, str(dtype))
        except AttributeError as exc:
            raise ConfigError(f"unknown dtype {dtype!r}; use float32, bfloat16 or float16") from exc
    elif dtype == "auto":
        torch_dtype = "auto"
    if local:
        from searchgym.agents.model_files import check_model_dir

        check_model_dir(path, trust_remote_code=trust_remote_code)  # lying headers / configs: ModelLoadError
    try:
        tok = AutoTokenizer.from_pretrained(src, local_files_only=local_only,
                                            trust_remote_code=trust_remote_code)
        kw: dict[str, Any] = {"local_files_only": local_only, "trust_remote_code": trust_remote_code}
        if torch_dtype is not None:
            kw["dtype"] = torch_dtype
        model = AutoModelForCausalLM.from_pretrained(src, **kw)
    except ModelLoadError:
        raise
    except Exception as exc:
        how = ("it is not a local directory and the Hugging Face hub is offline/unreachable; download "
               "it first (huggingface-cli download) and pass the local path"
               if local_only and not local else "check that the directory holds a causal LM and tokenizer")
        raise ModelLoadError(f"cannot load model {name!r}: {how} ({type(exc).__name__}: {exc})") from exc
    try:
        model.to(device)
    except (RuntimeError, AssertionError) as exc:
        raise ModelLoadError(f"cannot move model {name!r} to device {device!r}: {exc}") from exc
    model.eval()
    if getattr(tok, "pad_token_id", None) is None and getattr(tok, "eos_token_id", None) is not None:
        tok.pad_token = tok.eos_token
    return model, tok


# --------------------------------------------------------------------------------------------------
# The agent


@dataclass
class _Slot:
    prompt_ids: list[int] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)  # prompt + everything after it, as fed to the model
    mask: list[int] = field(default_factory=list)  # 1 = the agent's own token (after the prompt)
    text: str = ""  # the conversation after the prompt (actions + observations), for display
    history: KVHistory | None = None  # what the model has read of ids (generate(history=...))


def encode_prompt(tokenizer: Any, prompt: str, *, use_chat_template: bool | None = None) -> list[int]:
    """Token ids of a prompt as the policy sees it: one user message through the chat template when the
    tokenizer has one (``use_chat_template=None``), else the plain text with the tokenizer's special tokens.
    Demonstrations and rollouts both encode prompts here, so SFT and RL see the same format."""
    if use_chat_template is None:
        use_chat_template = bool(getattr(tokenizer, "chat_template", None))
    if use_chat_template:
        # rendered within output-size, time and memory bounds (the template is code from the model directory),
        # then tokenized as apply_chat_template does (the template carries its own special tokens)
        from searchgym.agents.chat_template import render_chat_template

        text = render_chat_template(tokenizer, [{"role": "user", "content": prompt}], add_generation_prompt=True)
        return [int(x) for x in tokenizer(text, add_special_tokens=False)["input_ids"]]
    return [int(x) for x in tokenizer(prompt, add_special_tokens=True)["input_ids"]]


class LMAgent:
    """A policy backed by a Hugging Face causal LM, multi-turn, batched over env slots.

    The first observation of an episode (the env prompt) becomes the user message of the chat template
    when the tokenizer has one (plain text otherwise); the agent's actions and the ``<information>``
    observations are then appended to the assistant turn, as Search-R1 does. Per-slot token ids and a
    loss mask (1 on the agent's own tokens) are kept in ``slot_state(i)``; ``last_outputs`` holds the
    :class:`GenerationOutput` of the last ``act`` call.
    """

    def __init__(
        self,
        model_name_or_path: str | None = None,
        *,
        device: str = "cpu",
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_new_tokens: int = 64,
        trust_remote_code: bool = False,
        dtype: str | None = None,
        model: Any = None,
        tokenizer: Any = None,
        seed: int | None = None,
        use_chat_template: bool | None = None,
        name: str | None = None,
    ):
        import torch

        if model is None or tokenizer is None:
            if model_name_or_path is None:
                raise ConfigError("LMAgent needs model_name_or_path, or model= and tokenizer=")
            model, tokenizer = load_model_and_tokenizer(model_name_or_path, device=device, dtype=dtype,
                                                        trust_remote_code=trust_remote_code)
        self.model, self.tokenizer = model, tokenizer
        self.device = device
        self.temperature, self.top_p, self.max_new_tokens = temperature, top_p, max_new_tokens
        has_template = bool(getattr(tokenizer, "chat_template", None))
        self.use_chat_template = has_template if use_chat_template is None else use_chat_template
        self.name = name or str(model_name_or_path or type(model).__name__)
        self.generator: torch.Generator | None = None
        if seed is not None:
            self.generator = torch.Generator(device=device).manual_seed(int(seed))
        self._slots: dict[int, _Slot] = {}
        self.last_outputs: list[GenerationOutput] = []

    # -- state ---------------------------------------------------------------------------------------
    def reset(self, indices: Sequence[int] | None = None) -> None:
        if indices is None:
            self._slots.clear()
        else:
            for i in indices:
                self._slots.pop(int(i), None)

    def slot_state(self, index: int) -> _Slot | None:
        return self._slots.get(index)

    def encode_prompt(self, prompt: str) -> list[int]:
        return encode_prompt(self.tokenizer, prompt, use_chat_template=self.use_chat_template)

    def _observe(self, index: int, obs: str, info: dict) -> _Slot:
        from searchgym.agents.base import is_new_episode

        slot = self._slots.get(index)
        if slot is None or is_new_episode(obs, info):
            ids = self.encode_prompt(obs)
            slot = _Slot(prompt_ids=list(ids), ids=list(ids), mask=[0] * len(ids))
            self._slots[index] = slot
        else:
            new = [int(x) for x in self.tokenizer(obs, add_special_tokens=False)["input_ids"]]
            slot.ids.extend(new)
            slot.mask.extend([0] * len(new))
            slot.text += obs
        return slot

    # -- acting --------------------------------------------------------------------------------------
    def act_with_stats(self, observations: Sequence[str], infos: Sequence[dict] | None = None, *,
                       indices: Sequence[int] | None = None) -> list[GenerationOutput]:
        from searchgym.agents.base import batch_indices, infos_or_empty

        idx = batch_indices(len(observations), indices)
        infs = infos_or_empty(infos, len(observations))
        slots = [self._observe(i, o, inf) for i, o, inf in zip(idx, observations, infs)]
        outs = generate(self.model, self.tokenizer, [s.ids for s in slots],
                        max_new_tokens=self.max_new_tokens, temperature=self.temperature, top_p=self.top_p,
                        device=self.device, generator=self.generator, history=[s.history for s in slots],
                        keep_history=True)
        for s, o in zip(slots, outs):
            s.history = o.extra.pop("history", None)  # the next turn reads only what was added
            s.ids.extend(o.token_ids)
            s.mask.extend([1] * len(o.token_ids))
            s.text += o.text
        self.last_outputs = outs
        return outs

    def act(self, observations: Sequence[str], infos: Sequence[dict] | None = None, *,
            indices: Sequence[int] | None = None) -> list[str]:
        return [o.text for o in self.act_with_stats(observations, infos, indices=indices)]
