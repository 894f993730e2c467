"""LMAgent and generate() on a tiny random GPT-2 built here from a config and an offline-trained tokenizer."""

from __future__ import annotations

import math

import gymnasium as gym
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import searchgym  # noqa: F401
from searchgym.agents.lm import LMAgent, generate, load_model_and_tokenizer
from searchgym.agents.rollout import rollout
from searchgym.errors import ModelLoadError

SENTENCES = [
    "<think> I need the director </think> <search> who directed the film </search>",
    "<answer> paris </answer>", "<information>Doc 1(Title: x) the city was founded in 1901</information>",
    "Question: what year was the company founded?", "Answer the given question.",
]


def build_tiny(path, *, chat_template: bool = False):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=["<unk>", "<pad>", "<eos>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(SENTENCES * 4, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", eos_token="<eos>")
    if chat_template:
        fast.chat_template = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}"
                              "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=len(fast), n_positions=512,
                     eos_token_id=fast.eos_token_id, bos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id)
    model = GPT2LMHeadModel(cfg)
    fast.save_pretrained(path)
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return build_tiny(tmp_path_factory.mktemp("tiny_lm"))


@pytest.fixture(scope="module")
def tiny(tiny_dir):
    return load_model_and_tokenizer(str(tiny_dir))


def _teacher_forced_logprobs(model, prompt_ids, gen_ids, temperature=1.0):
    ids = torch.tensor([prompt_ids + gen_ids])
    with torch.no_grad():
        logits = model(ids).logits[0].float() / temperature
    logp = torch.log_softmax(logits, -1)
    p0 = len(prompt_ids)
    return [float(logp[p0 - 1 + t, g]) for t, g in enumerate(gen_ids)]


def test_generate_batched_kv_cache_matches_teacher_forcing(tiny):
    model, tok = tiny
    prompts = [tok("Question: what year was it founded?")["input_ids"], tok("<search> who")["input_ids"],
               tok("Answer")["input_ids"]]
    assert len({len(p) for p in prompts}) == 3  # different lengths -> real left padding
    g = torch.Generator().manual_seed(0)
    outs = generate(model, tok, prompts, max_new_tokens=12, temperature=0.7, top_p=1.0, stop_strings=(),
                    generator=g, device="cpu")
    vocab = model.config.vocab_size
    for p, o in zip(prompts, outs):
        assert len(o.token_ids) == len(o.logprobs) == len(o.entropies) == 12
        assert o.finish_reason in ("length", "eos")
        assert all(math.isfinite(x) and x <= 0 for x in o.logprobs)
        assert all(math.isfinite(h) and 0 <= h <= math.log(vocab) + 1e-4 for h in o.entropies)
        ref = _teacher_forced_logprobs(model, list(p), o.token_ids, temperature=0.7)
        assert o.logprobs == pytest.approx(ref, abs=2e-4)
    # rows that stop early leave the batch (and the KV cache); the others stay exact
    stop_tok = outs[0].token_ids[2]
    early = generate(model, tok, prompts, max_new_tokens=12, temperature=0.7, stop_strings=(),
                     stop_token_ids=[stop_tok], generator=torch.Generator().manual_seed(0))
    assert early[0].finish_reason == "stop" and len(early[0].token_ids) <= 3
    assert early[0].token_ids == outs[0].token_ids[: len(early[0].token_ids)]
    for p, o in zip(prompts, early):
        assert o.logprobs == pytest.approx(_teacher_forced_logprobs(model, list(p), o.token_ids, 0.7), abs=2e-4)
    # greedy is the same one prompt at a time as in a batch (padding does not leak)
    batched = generate(model, tok, prompts, max_new_tokens=8, temperature=0.0, stop_strings=())
    single = [generate(model, tok, [p], max_new_tokens=8, temperature=0.0, stop_strings=())[0] for p in prompts]
    assert [b.token_ids for b in batched] == [s.token_ids for s in single]


def test_generate_keeps_only_last_logits_and_samples_the_same(tiny):
    """generate() asks the model for the last position's logits only (``logits_to_keep=1``); a model whose
    forward lacks that argument is called without it, and both sample the same tokens with the same logprobs."""
    from searchgym.agents.lm import _accepts_logits_to_keep, _cache_kwarg

    model, tok = tiny
    seen: list[dict] = []

    class NoKeep(torch.nn.Module):  # the same weights behind a forward without logits_to_keep
        def __init__(self, inner):
            super().__init__()
            self.inner, self.config, self.generation_config = inner, inner.config, inner.generation_config

        def forward(self, input_ids, attention_mask=None, position_ids=None, past_key_values=None, use_cache=None):
            seen.append({"width": input_ids.shape[1]})
            return self.inner(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                              use_cache=use_cache, **{_cache_kwarg(self.inner): past_key_values})

    plain = NoKeep(model)
    assert _accepts_logits_to_keep(model) and not _accepts_logits_to_keep(plain)
    prompts = [tok("Question: what year was it founded?")["input_ids"], tok("Answer")["input_ids"]]
    kept = generate(model, tok, prompts, max_new_tokens=10, temperature=1.0, stop_strings=(),
                    generator=torch.Generator().manual_seed(5))
    full = generate(plain, tok, prompts, max_new_tokens=10, temperature=1.0, stop_strings=(),
                    generator=torch.Generator().manual_seed(5))
    assert seen and seen[0]["width"] == max(len(p) for p in prompts)  # the fallback path ran
    assert [o.token_ids for o in kept] == [o.token_ids for o in full]
    for a, b in zip(kept, full):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)


def test_generate_passes_the_cache_under_the_models_own_name(tiny):
    """transformers renamed ``past_key_values`` to ``cache`` (5.24; the old name warns on every forward): generate()
    uses whichever name the model's forward takes, so a rollout prints no deprecation warning, and the KV cache
    still acts (the second forward gets one token, not the whole prompt)."""
    import warnings

    from searchgym.agents.lm import _cache_kwarg, _forward_params

    model, tok = tiny
    expected = "cache" if "cache" in _forward_params(model) else "past_key_values"
    assert _cache_kwarg(model) == expected
    widths: list[int] = []
    hook = model.register_forward_pre_hook(lambda _m, args, kwargs: widths.append(kwargs["input_ids"].shape[1]),
                                           with_kwargs=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)
            generate(model, tok, [tok("Question: who?")["input_ids"]], max_new_tokens=4, temperature=0.0,
                     stop_strings=())
    finally:
        hook.remove()
    assert len(widths) >= 2 and widths[1] == 1


def test_generate_stops_at_stop_string_per_sequence(tiny):
    model, tok = tiny
    prompts = ["Question: what", "<answer> paris"]

    def run(stops):
        return generate(model, tok, prompts, max_new_tokens=24, temperature=1.0, stop_strings=stops,
                        generator=torch.Generator().manual_seed(3))

    free = run(())
    text0 = free[0].text
    # a 3-character piece of sequence 0's text that first occurs at position k >= 2
    k = next(k for k in range(2, len(text0) - 3) if text0.find(text0[k:k + 3]) == k)
    stop = text0[k:k + 3]
    cut = run((stop,))
    assert cut[0].finish_reason == "stop" and cut[0].stop_string == stop
    assert cut[0].text == text0[: k + 3]
    assert len(cut[0].token_ids) < 24
    assert cut[0].token_ids == free[0].token_ids[: len(cut[0].token_ids)]
    assert cut[0].logprobs == free[0].logprobs[: len(cut[0].token_ids)]
    # greedy: the other sequence runs on unaffected when one stops (and leaves the batch)
    g_free = generate(model, tok, prompts, max_new_tokens=24, temperature=0.0, stop_strings=())
    t0 = g_free[0].text
    k = next((k for k in range(2, len(t0) - 3) if t0.find(t0[k:k + 3]) == k and t0[k:k + 3] not in g_free[1].text),
             None)
    if k is not None:
        g_cut = generate(model, tok, prompts, max_new_tokens=24, temperature=0.0, stop_strings=(t0[k:k + 3],))
        assert g_cut[0].text == t0[: k + 3]
        assert g_cut[1].token_ids == g_free[1].token_ids


def test_top_p_and_seeded_sampling(tiny):
    model, tok = tiny
    p = [tok("Answer the given question.")["input_ids"]] * 4
    a = generate(model, tok, p, max_new_tokens=6, temperature=1.0, top_p=0.5,
                 generator=torch.Generator().manual_seed(1), stop_strings=())
    b = generate(model, tok, p, max_new_tokens=6, temperature=1.0, top_p=0.5,
                 generator=torch.Generator().manual_seed(1), stop_strings=())
    assert [x.token_ids for x in a] == [x.token_ids for x in b]
    with pytest.raises(ValueError):
        generate(model, tok, p, max_new_tokens=4, top_p=0.0)


def test_lm_agent_loads_by_path_and_plays_the_env(tiny_dir):
    agent = LMAgent(str(tiny_dir), max_new_tokens=8, temperature=1.0, seed=0)
    env = gym.make("searchgym/SearchQA-v0", split="dev", max_turns=1)
    trajs = rollout(agent, env, 2, progress=False)
    assert len(trajs) == 2
    for t in trajs:  # random weights: mostly invalid actions, never a crash, stats on every step
        assert t.steps and all("num_tokens" in s.extra and "entropy_mean" in s.extra for s in t.steps)
    st = agent.slot_state(0)
    assert st is not None and len(st.ids) == len(st.mask) and sum(st.mask) > 0
    assert len(agent.last_outputs) == 1 and agent.last_outputs[0].entropies


def test_lm_agent_uses_chat_template(tmp_path):
    d = build_tiny(tmp_path / "chat", chat_template=True)
    agent = LMAgent(str(d), max_new_tokens=4, seed=0)
    assert agent.use_chat_template
    outs = agent.act_with_stats(["Question: who?"], [{}])
    st = agent.slot_state(0)
    prompt_text = agent.tokenizer.decode(st.prompt_ids)
    assert prompt_text.startswith("<|user|>") and prompt_text.endswith("<|assistant|>")
    assert len(outs[0].token_ids) <= 4
    # the next observation continues the same slot
    agent.act(["\n\n<information>Doc 1(Title: x) y</information>\n\n"], [{"kind": "search"}])
    assert len(agent.slot_state(0).ids) > len(st.prompt_ids) + len(outs[0].token_ids)


def test_demonstrations_encode_prompts_like_the_lm_policy(tmp_path):
    """SFT demonstrations (AgentPolicy) and RL rollouts (LMPolicy) must show the model one prompt format."""
    from searchgym.train.rollout import AgentPolicy, LMPolicy

    d = build_tiny(tmp_path / "chat", chat_template=True)
    agent = LMAgent(str(d), max_new_tokens=4, seed=0)
    prompt = "Question: who founded Grostad?\n"
    demo_ids = AgentPolicy(object(), agent.tokenizer).encode_prompt(prompt)
    assert agent.tokenizer.decode(demo_ids).startswith("<|user|>")
    assert demo_ids == LMPolicy(agent.model, agent.tokenizer).encode_prompt(prompt) == agent.encode_prompt(prompt)


def test_missing_path_and_offline_hub_name_fail_fast(monkeypatch, tmp_path):
    with pytest.raises(ModelLoadError, match="does not exist"):
        LMAgent(str(tmp_path / "no-such-model"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match="offline"):
        LMAgent("some-org/definitely-not-a-model-xyz")


def test_generate_continues_from_a_kv_history_as_from_the_whole_prompt(tiny):
    """A multi-turn caller reads only each turn's new tokens (the keys/values of the earlier ones are kept):
    the same tokens are sampled as when every prompt is read whole, with the same log-probs."""
    model, tok = tiny
    prompts = [tok(s, add_special_tokens=False)["input_ids"] for s in SENTENCES[:4]]  # unequal lengths

    def g(seed):
        return torch.Generator().manual_seed(seed)

    first = generate(model, tok, prompts, max_new_tokens=6, stop_strings=(), generator=g(1), keep_history=True)
    hist = [o.extra["history"] for o in first]
    for p, o, h in zip(prompts, first, hist):  # everything read so far: the prompt and all but the last sample
        assert h is not None and h.ids == p + o.token_ids[:-1]
        assert all(k.shape[1] == len(h.ids) for kv in h.kv for k in kv)
    obs = tok(" <information>Doc 1(Title: x) more</information>", add_special_tokens=False)["input_ids"]
    nxt = [p + o.token_ids + obs[: 3 + 2 * i] for i, (p, o) in enumerate(zip(prompts, first))]
    kept = generate(model, tok, nxt, max_new_tokens=8, generator=g(2), history=hist)
    whole = generate(model, tok, nxt, max_new_tokens=8, generator=g(2))
    assert [o.token_ids for o in kept] == [o.token_ids for o in whole]
    assert [o.text for o in kept] == [o.text for o in whole]
    for a, b in zip(kept, whole):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
        assert a.entropies == pytest.approx(b.entropies, abs=1e-4)
    # a history that is not the start of its prompt is not used: the prompt is read whole
    crossed = generate(model, tok, nxt, max_new_tokens=8, generator=g(2), history=hist[::-1])
    assert [o.token_ids for o in crossed] == [o.token_ids for o in whole]
