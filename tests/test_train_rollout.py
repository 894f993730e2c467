"""Rollout masks, SFT, the RL loop, exact resume, config errors and atomic checkpoints on a tiny real setup:
a real procedural world, a real bm25s index, real SearchEnvs and a real (tiny, randomly initialised) Llama."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from searchgym.errors import CheckpointError, ConfigError
from searchgym.train.tiny_lm import GRAMMAR_TOKENS, TinyLMConfig

SMALL = TinyLMConfig(vocab_size=600, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
                     max_positions=512)
PROMPT = "Question: {question}\n"


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    # Tiny models gain nothing from intra-op threads, and on a loaded 2-core machine they lose a lot.
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from searchgym.data import World
    from searchgym.retrieval import CachedRetriever, build_retriever
    from searchgym.train.tiny_lm import create_tiny_lm, world_texts

    world = World.generate(seed=3, n_entities=60)
    retr = CachedRetriever(build_retriever(world.passages, kind="bm25"))
    d = tmp_path_factory.mktemp("lm")
    create_tiny_lm(world_texts(world, prompts=[PROMPT]), d / "init", SMALL, seed=0)
    return world, retr, d / "init"


def make_envs(setup, n, split="train"):
    from searchgym.envs.env import SearchEnv

    world, retr, _ = setup
    return [SearchEnv(dataset=world.split(split), retriever=retr, split=split, max_turns=2,
                      prompt_template=PROMPT, passage_chars=120) for _ in range(n)]


def load(setup):
    from searchgym.train.tiny_lm import load_lm

    return load_lm(setup[2])


class ScriptedAgent:
    """A real agent of the Agent protocol: searches the question, then answers the first passage's title."""

    name = "scripted"

    def act(self, observations, infos=None, indices=None):
        from searchgym.agents.base import parse_information, parse_question

        out = []
        for obs, info in zip(observations, infos or [{}] * len(observations)):
            docs = parse_information(obs)
            if docs:
                out.append(f"<answer> {docs[0].title} </answer>")
            else:
                out.append(f"<search> {parse_question(obs, info)} </search>")
        return out

    def reset(self, indices=None):
        pass


def test_tiny_lm_is_a_normal_hf_dir_with_single_grammar_tokens(setup):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(setup[2])
    model = AutoModelForCausalLM.from_pretrained(setup[2])
    for t in GRAMMAR_TOKENS:
        assert len(tok.encode(t, add_special_tokens=False)) == 1, t
    text = "<search> who founded it </search>"
    assert tok.decode(tok.encode(text, add_special_tokens=False), skip_special_tokens=True) == text
    assert sum(p.numel() for p in model.parameters()) < 1_000_000


def test_demo_masks_are_exactly_the_agent_tokens(setup):
    from searchgym.train.rollout import AgentPolicy, run_episodes

    _, tok = load(setup)
    envs = make_envs(setup, 4)
    eps = run_episodes(AgentPolicy(ScriptedAgent(), tok), envs, [None] * 4,
                       options=[{"index": i} for i in range(4)])
    info_id = tok.convert_tokens_to_ids("<information>")
    for e in eps:
        assert len(e.ids) == len(e.mask) == len(e.logprobs) == len(e.entropies)
        assert all(m == 0 for m in e.mask[:e.prompt_len])
        # split into maximal runs of mask==1 / mask==0 after the prompt
        runs, cur, cur_m = [], [], None
        for t, m in zip(e.ids[e.prompt_len:], e.mask[e.prompt_len:]):
            if m != cur_m and cur:
                runs.append((cur_m, cur))
                cur = []
            cur_m = m
            cur.append(t)
        runs.append((cur_m, cur))
        agent_runs = [tok.decode(r, skip_special_tokens=True) for m, r in runs if m == 1]
        obs_runs = [tok.decode(r, skip_special_tokens=True) for m, r in runs if m == 0]
        assert agent_runs == [s.action for s in e.trajectory.steps]
        assert all(o.lstrip().startswith("<information>") for o in obs_runs)
        # every <information> token is masked out
        assert all(m == 0 for t, m in zip(e.ids, e.mask) if t == info_id)
        assert e.trajectory.num_searches == 1 and e.trajectory.prediction is not None


def test_lm_rollout_logprobs_align_with_training_forward(setup):
    from searchgym.train.rollout import LMPolicy, collate, policy_forward, run_episodes

    model, tok = load(setup)
    envs = make_envs(setup, 6)
    pol = LMPolicy(model, tok, max_new_tokens=10, generator=torch.Generator().manual_seed(0))
    eps = run_episodes(pol, envs, [None] * 6, options=[{"index": i // 3} for i in range(6)], max_new_tokens=10)
    b = collate(eps, tok.pad_token_id)
    with torch.no_grad():
        lp, ent, _ = policy_forward(model, b)
    m = b["mask"] > 0
    assert int(m.sum()) == sum(e.num_agent_tokens for e in eps) > 0
    # the behaviour log-probs recorded while sampling are the training forward's, token for token
    assert torch.allclose(lp[m], b["old_logp"][m], atol=2e-4)
    assert torch.allclose(ent[m], b["entropy"][m], atol=2e-4)
    for e in eps:  # agent turns decode to the actions the env received
        assert [s.action for s in e.trajectory.steps] == [s.action for s in e.trajectory.steps]
        assert sum(e.mask) == sum(1 for x in e.logprobs if x != 0.0) or sum(e.mask) > 0


def test_sft_loss_decreases_and_checkpoints(setup, tmp_path):
    from searchgym.train.checkpoint import load_checkpoint
    from searchgym.train.rollout import AgentPolicy, run_episodes
    from searchgym.train.sft import SFTArgs, train_sft

    model, tok = load(setup)
    envs = make_envs(setup, 16)
    demos = run_episodes(AgentPolicy(ScriptedAgent(), tok), envs, [None] * 16,
                         options=[{"index": i} for i in range(16)])
    hist = train_sft(model, tok, demos, SFTArgs(learning_rate=3e-3, max_steps=25, batch_size=16, warmup_steps=2),
                     out_dir=tmp_path)
    first, last = hist[0]["losses/sft"], hist[-1]["losses/sft"]
    assert last < 0.7 * first, (first, last)
    c = load_checkpoint(tmp_path / "checkpoint")
    assert c["state"]["step"] == 25
    assert (tmp_path / "metrics.jsonl").read_text().count("\n") == 25


def _rl_args(**kw):
    from searchgym.train.rl import RLArgs

    base = {"total_steps": 4, "prompts_per_step": 2, "group_size": 3, "max_new_tokens": 8,
            "micro_batch_size": 3,
                "learning_rate": 1e-3, "checkpoint_every": 2, "max_context": 512}
    base.update(kw)
    return RLArgs(**base)


def _questions(n_prompts):
    return lambda step: [(None, {"index": (step * n_prompts + i) % 20}) for i in range(n_prompts)]


def _strip(rows):
    return [{k: v for k, v in r.items() if "time" not in k and "per_s" not in k} for r in rows]


@pytest.mark.parametrize("extra", [
    {"algo": "grpo", "policy_loss": "kl_cov", "kl_cov_ratio": 0.05, "kl_coef": 0.05, "kl_estimator": "k3"},
    {"algo": "rloo", "policy_loss": "clip_cov", "clip_cov_ratio": 0.05, "clip_cov_lb": 0.0, "clip_cov_ub": 10.0,
         "ent_coef": 0.01},
    {"algo": "ppo", "group_size": 1, "prompts_per_step": 4, "micro_batch_size": 2, "num_minibatches": 2, "update_epochs": 2,
         "clip_high": 0.28},
])
def test_rl_smoke_and_exact_resume(setup, tmp_path, extra):
    from searchgym.train.rl import train_rl

    args = _rl_args(**extra)
    n = args.prompts_per_step * args.group_size
    q = _questions(args.prompts_per_step)
    model, tok = load(setup)
    full = train_rl(model, tok, make_envs(setup, n), args, out_dir=tmp_path / "full", questions=q)
    assert len(full) == 4
    for r in full:
        assert all(math.isfinite(v) for v in r.values())
        assert "losses/policy" in r and "charts/reward" in r and "charts/token_entropy" in r
        assert "charts/forking_share" in r and "charts/token_share_other" in r
    params_full = {k: v.clone() for k, v in model.state_dict().items()}

    model2, tok2 = load(setup)
    part = train_rl(model2, tok2, make_envs(setup, n), args, out_dir=tmp_path / "part", questions=q, stop_after=2)
    assert len(part) == 2
    model3, tok3 = load(setup)  # a fresh process: start from the initial weights, resume from the checkpoint
    resumed = train_rl(model3, tok3, make_envs(setup, n), args, out_dir=tmp_path / "part", questions=q,
                       resume=True)
    assert _strip(resumed) == _strip(full)
    for k, v in model3.state_dict().items():
        assert torch.equal(v, params_full[k]), k
    lines = [json.loads(x) for x in (tmp_path / "part" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [1, 2, 3, 4]


def test_rl_changes_the_policy(setup, tmp_path):
    from searchgym.train.rl import train_rl

    model, tok = load(setup)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    # a reward everyone can get differently: F1 of the (random) answer is mostly 0, so use the format reward
    args = _rl_args(total_steps=2, checkpoint_every=0)
    from searchgym.envs.env import SearchEnv

    world, retr, _ = setup
    envs = [SearchEnv(dataset=world.split("train"), retriever=retr, max_turns=1, prompt_template=PROMPT,
                      reward="f1 + 0.5*format", passage_chars=80) for _ in range(6)]
    hist = train_rl(model, tok, envs, args, questions=_questions(2))
    assert len(hist) == 2
    changed = any(not torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert changed or all(r["charts/zero_adv_groups"] == 1.0 for r in hist)


def test_impossible_configs_fail_fast():
    from searchgym.train.rl import RLArgs

    with pytest.raises(ConfigError, match="group_size"):
        RLArgs(algo="grpo", group_size=1).validate()
    with pytest.raises(ConfigError):
        RLArgs(algo="rloo", group_size=1).validate()
    with pytest.raises(ConfigError):
        RLArgs(policy_loss="nope").validate()
    with pytest.raises(ConfigError):
        RLArgs(kl_estimator="k7").validate()
    with pytest.raises(ConfigError):
        RLArgs(prompts_per_step=3, group_size=3, num_minibatches=2).validate()
    with pytest.raises(ConfigError):
        RLArgs(temperature=0).validate()
    RLArgs(algo="ppo", group_size=1).validate()
    RLArgs(policy_loss="clip_cov", clip_low=1.0, clip_high=1.0).validate()  # the released Clip-Cov setting
    with pytest.raises(ConfigError):
        RLArgs(clip_low=1.5).validate()


def test_train_rl_rejects_group_size_one_before_any_work(setup):
    from searchgym.train.rl import train_rl

    model, tok = load(setup)
    with pytest.raises(ConfigError, match="group_size"):
        train_rl(model, tok, [], _rl_args(group_size=1))


def test_checkpoint_is_atomic(setup, tmp_path):
    from searchgym.train.checkpoint import cleanup_partial, is_complete, load_checkpoint, save_checkpoint

    model, tok = load(setup)
    ck = tmp_path / "ckpt"
    save_checkpoint(ck, model=model, tokenizer=tok, state={"step": 1})
    w0 = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    with pytest.raises(KeyboardInterrupt):  # killed after writing, before the rename
        save_checkpoint(ck, model=model, tokenizer=tok, state={"step": 2}, _crash_before_commit=True)
    # the old checkpoint is intact under the final name; the half-written one is only a temp dir
    c = load_checkpoint(ck)
    assert c["state"]["step"] == 1
    from transformers import AutoModelForCausalLM

    m = AutoModelForCausalLM.from_pretrained(c["model_dir"])
    assert all(torch.equal(v, w0[k]) for k, v in m.state_dict().items())
    leftovers = [p for p in tmp_path.iterdir() if p.name != "ckpt"]
    assert leftovers and all(".tmp-" in p.name for p in leftovers)
    assert cleanup_partial(tmp_path) and [p.name for p in tmp_path.iterdir()] == ["ckpt"]
    # a directory without the COMPLETE marker is refused with a clear error
    (ck / "COMPLETE").unlink()
    assert not is_complete(ck)
    with pytest.raises(CheckpointError, match="incomplete"):
        load_checkpoint(ck)
    with pytest.raises(CheckpointError):
        load_checkpoint(tmp_path / "missing")
    _ = Path


def test_any_hf_causal_lm_path_gpt2(setup, tmp_path):
    """The --model path: a GPT-2 whose tokenizer lacks the grammar tags gets them as single tokens, and the
    split LM head (GPT-2's ``transformer`` body) gives the same log-probs as the full forward."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    from searchgym.train.rl import train_rl
    from searchgym.train.rollout import collate, policy_forward
    from searchgym.train.tiny_lm import load_lm

    world = setup[0]
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator([p.text for p in world.passages], trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<eos>")
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=len(fast), n_positions=512)
                    ).save_pretrained(tmp_path / "gpt2")
    fast.save_pretrained(tmp_path / "gpt2")
    model, tok = load_lm(tmp_path / "gpt2")
    assert len(tok.encode("</search>", add_special_tokens=False)) == 1
    assert model.get_input_embeddings().weight.shape[0] == len(tok)
    envs = make_envs(setup, 4)
    hist = train_rl(model, tok, envs, _rl_args(total_steps=1, group_size=2, max_new_tokens=6),
                    questions=_questions(2))
    assert len(hist) == 1 and math.isfinite(hist[0]["losses/policy"])
    from searchgym.train.rollout import LMPolicy, run_episodes

    eps = run_episodes(LMPolicy(model, tok, max_new_tokens=6, generator=torch.Generator().manual_seed(0)),
                       envs[:2], [None, None], options=[{"index": 0}, {"index": 1}], max_new_tokens=6)
    b = collate(eps, tok.pad_token_id)
    with torch.no_grad():
        lp_split, _, _ = policy_forward(model, b)
        lp_full, _, _ = policy_forward(model, b, all_positions=True)
    m = b["mask"] > 0
    assert torch.allclose(lp_split[m], lp_full[m], atol=1e-5)


def _sft_demos(setup, tok, n=8):
    from searchgym.train.rollout import AgentPolicy, run_episodes

    return run_episodes(AgentPolicy(ScriptedAgent(), tok), make_envs(setup, n), [None] * n,
                        options=[{"index": i} for i in range(n)])


def test_sft_resume_truncates_metrics_to_the_checkpoint(setup, tmp_path):
    """Rows an interrupted SFT run logged after its last checkpoint are dropped on resume, and a fresh run
    does not append to an old run's file (fails before runlog.sync_metrics was shared with the RL trainer)."""
    from searchgym.train.sft import SFTArgs, train_sft

    model, tok = load(setup)
    demos = _sft_demos(setup, tok)
    args = SFTArgs(learning_rate=1e-3, max_steps=3, batch_size=4, micro_batch_size=4, warmup_steps=1,
                   checkpoint_every=2)
    train_sft(model, tok, demos, args, out_dir=tmp_path)
    metrics = tmp_path / "metrics.jsonl"
    with open(metrics, "a") as f:  # what a run killed after its checkpoint had logged beyond it
        f.write(json.dumps({"step": 4, "losses/sft": 9.9}) + "\n")
    model2, tok2 = load(setup)
    train_sft(model2, tok2, demos, SFTArgs(**{**args.__dict__, "max_steps": 5}), out_dir=tmp_path, resume=True)
    rows = [json.loads(x) for x in metrics.read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5]
    assert rows[3]["losses/sft"] != 9.9
    model3, tok3 = load(setup)
    train_sft(model3, tok3, demos, args, out_dir=tmp_path)  # a fresh run replaces the file
    assert [json.loads(x)["step"] for x in metrics.read_text().splitlines()] == [1, 2, 3]


def test_policy_loss_reports_ratio_and_selected_share():
    from searchgym.train.rl import RLArgs, compute_advantages, policy_loss

    g = torch.Generator().manual_seed(0)
    lp = torch.randn(4, 50, generator=g) - 2
    adv = compute_advantages(RLArgs(group_size=2), torch.tensor([1.0, 0.0, 1.0, 1.0]))
    assert adv[2] == adv[3] == 0 and adv[0] > 0 > adv[1]
    adv = adv.unsqueeze(1).expand(4, 50).contiguous()
    mask = torch.ones(4, 50)
    for loss in ("ppo_clip", "clip_cov", "kl_cov"):
        args = RLArgs(policy_loss=loss, clip_cov_ratio=0.05, kl_cov_ratio=0.05, clip_cov_lb=-10.0, clip_cov_ub=10.0)
        _, st0 = policy_loss(args, lp, lp.clone(), adv, mask, generator=torch.Generator().manual_seed(1))
        assert st0["abs_log_ratio"] == 0.0 and st0["clip_fraction"] == 0.0
        old = lp + 0.5 * torch.randn(4, 50, generator=g)
        _, st = policy_loss(args, lp, old, adv, mask, generator=torch.Generator().manual_seed(1))
        assert st["abs_log_ratio"] > 0.1
        if loss == "ppo_clip":
            assert st["cov_selected_share"] == 0.0 and st["clip_fraction"] > 0
        else:
            assert st["cov_selected_share"] == pytest.approx(10 / 200)


@pytest.mark.parametrize("loss", ["clip_cov", "kl_cov"])
def test_cov_controls_act_with_minibatches(setup, tmp_path, loss):
    """With several mini-batch updates per rollout batch the ratio moves, so Clip-Cov/KL-Cov select tokens
    whose ratio is not 1; the per-step log names the clip fraction, |log ratio| and the selected share."""
    from searchgym.envs.env import SearchEnv
    from searchgym.train.rl import train_rl

    world, retr, _ = setup
    envs = [SearchEnv(dataset=world.split("train"), retriever=retr, max_turns=1, prompt_template=PROMPT,
                      reward="f1 + 0.5*format", passage_chars=80) for _ in range(8)]
    model, tok = load(setup)
    args = _rl_args(total_steps=2, group_size=4, num_minibatches=4, checkpoint_every=0, learning_rate=3e-3,
                    policy_loss=loss, clip_cov_ratio=0.05, kl_cov_ratio=0.05, clip_cov_lb=-10.0,
                    clip_cov_ub=10.0, skip_zero_adv=False, ent_coef=0.05)  # moves even if all rewards tie
    hist = train_rl(model, tok, envs, args, questions=_questions(2))
    for key in ("losses/clip_fraction", "losses/abs_log_ratio", "losses/cov_selected_share"):
        assert all(key in r for r in hist), key
    assert max(r["losses/abs_log_ratio"] for r in hist) > 1e-4
    assert max(r["losses/cov_selected_share"] for r in hist) > 0


def test_entropy_bonus_keeps_the_zero_advantage_filter_for_the_policy_gradient_only(setup):
    """The policy-gradient term trains on the informative groups (the same step size as GRPO's), while the
    entropy bonus acts on every episode: all-tied groups included (issue 21 §6)."""
    from searchgym.train.rl import train_rl

    model, tok = load(setup)
    args = _rl_args(total_steps=1, checkpoint_every=0, ent_coef=0.05)
    hist = train_rl(model, tok, make_envs(setup, 6), args, questions=_questions(2))
    r = hist[0]
    informative = round(6 * (1 - r["charts/zero_adv_groups"]))
    assert r["charts/zero_adv_groups"] > 0  # a random tiny LM fails most questions: some group is uninformative
    assert r["charts/episodes_trained"] == informative
    assert r["charts/episodes_regularised"] == 6


def _zero_reward(ctx):
    return 0.0


@pytest.mark.parametrize("ent_coef", [0.0, 0.5])
def test_entropy_bonus_raises_entropy_when_every_group_ties(setup, ent_coef):
    """Every reward is 0, so every group ties and GRPO has no policy gradient. Without a bonus the model is left
    as it was; one step with the entropy bonus raises the token entropy on the step's own episodes."""
    from searchgym.envs.env import SearchEnv
    from searchgym.train.rl import _torch_gen, train_rl
    from searchgym.train.rollout import LMPolicy, collate, policy_forward, run_episodes

    world, retr, _ = setup
    envs = [SearchEnv(dataset=world.split("train"), retriever=retr, split="train", max_turns=2, prompt_template=PROMPT,
                      passage_chars=120, reward=_zero_reward) for _ in range(6)]
    args = _rl_args(total_steps=1, checkpoint_every=0, ent_coef=ent_coef, learning_rate=3e-3)
    model, tok = load(setup)
    q = _questions(2)
    pol = LMPolicy(model, tok, max_new_tokens=args.max_new_tokens, generator=_torch_gen(args.seed, 0, 1))
    eps = run_episodes(pol, envs, [s for s, _ in q(0) for _ in range(3)], options=[o for _, o in q(0) for _ in range(3)],
                       max_context=args.max_context, max_new_tokens=args.max_new_tokens, obs_max_words=args.obs_max_words)
    batch = collate(eps, tok.pad_token_id or 0)

    def entropy() -> float:
        with torch.no_grad():
            _, ent, _ = policy_forward(model, batch)
        return float((ent * batch["mask"]).sum() / batch["mask"].sum())

    before = entropy()
    hist = train_rl(model, tok, envs, args, questions=q)
    assert hist[0]["charts/zero_adv_groups"] == 1.0
    assert hist[0]["charts/episodes_trained"] == 0
    if ent_coef == 0:
        assert entropy() == pytest.approx(before, abs=1e-6)
    else:
        assert entropy() > before + 1e-3


def test_darling_shaping_feeds_the_advantages(setup):
    """train_rl computes advantages from the shaped rewards (DARLING over the episodes' query templates)."""
    from searchgym.diversity import Templater
    from searchgym.train.rl import train_rl
    from searchgym.train.shaping import darling_rewards, query_classes

    world = setup[0]
    templater = Templater(world.titles)
    seen = []

    def shape(step, episodes, rewards):
        classes = query_classes([e.trajectory for e in episodes], templater)
        assert len(classes) == len(episodes) and all(isinstance(c, tuple) for c in classes)
        out = darling_rewards([1.0] * len(rewards), classes, 3)  # a constant quality: only distinctness differs
        seen.append(out)
        return out

    model, tok = load(setup)
    hist = train_rl(model, tok, make_envs(setup, 6), _rl_args(total_steps=1, checkpoint_every=0),
                    questions=_questions(2), shape_rewards=shape)
    assert hist[0]["charts/shaped_reward"] == pytest.approx(sum(seen[0]) / 6)
    distinct_groups = sum(len(set(seen[0][g:g + 3])) > 1 for g in (0, 3))
    assert hist[0]["charts/zero_adv_groups"] == pytest.approx(1 - distinct_groups / 2)


def test_rl_with_sft_refresh_hook_resumes_exactly(setup, tmp_path):
    """SFT steps through the RL optimizer after some updates (the grpo_sft_refresh arm's hook): the optimizer
    state is in the checkpoint, so a killed and resumed run ends with the uninterrupted one's weights."""
    from searchgym.train.rl import train_rl
    from searchgym.train.sft import SFTArgs, sft_backward

    _, tok0 = load(setup)
    demos = _sft_demos(setup, tok0, 6)
    sargs = SFTArgs(batch_size=3, micro_batch_size=3)
    calls = []

    def hook(step, model, opt):
        if step % 2:
            return None
        opt.zero_grad(set_to_none=True)
        loss = sft_backward(model, demos[step % 2::2], sargs, tok0.pad_token_id)
        opt.step()
        calls.append(step)
        return {"losses/sft_refresh": loss}

    args = _rl_args(ent_coef=0.01)
    q = _questions(args.prompts_per_step)
    m1, t1 = load(setup)
    full = train_rl(m1, t1, make_envs(setup, 6), args, out_dir=tmp_path / "full", questions=q, after_update=hook)
    assert calls == [0, 2] and [("losses/sft_refresh" in r) for r in full] == [True, False, True, False]
    m2, t2 = load(setup)
    train_rl(m2, t2, make_envs(setup, 6), args, out_dir=tmp_path / "part", questions=q, after_update=hook,
             stop_after=2)
    m3, t3 = load(setup)
    resumed = train_rl(m3, t3, make_envs(setup, 6), args, out_dir=tmp_path / "part", questions=q,
                       after_update=hook, resume=True)
    assert _strip(resumed) == _strip(full)
    for k, v in m3.state_dict().items():
        assert torch.equal(v, m1.state_dict()[k]), k


def test_count_bonus_counts_survive_a_resume(setup, tmp_path):
    """The count bonus is stateful (counts over all training); its counts go into the checkpoint, so a killed
    and resumed run logs exactly what the uninterrupted one does."""
    from searchgym.diversity import Templater
    from searchgym.train.rl import train_rl
    from searchgym.train.shaping import CountBonus, TemplateCountShaper

    b = CountBonus(0.5)
    assert b(["q1", "q1", "q2"], [("a",), ("a",), ("a",)], [0, 1, 0]) == pytest.approx(
        [0.5 / 2 ** 0.5, 1 + 0.5 / 2 ** 0.5, 0.5])
    assert b(["q2"], [("a",)], [0]) == pytest.approx([0.5 / 2 ** 0.5])  # seen before: a smaller bonus
    world = setup[0]
    args = _rl_args()
    q = _questions(args.prompts_per_step)

    def run(out, **kw):
        m, t = load(setup)
        shaper = TemplateCountShaper(Templater(world.titles), 0.5)
        return train_rl(m, t, make_envs(setup, 6), args, out_dir=out, questions=q, shape_rewards=shaper, **kw), shaper

    full, s_full = run(tmp_path / "full")
    run(tmp_path / "part", stop_after=2)
    resumed, s_res = run(tmp_path / "part", resume=True)
    assert _strip(resumed) == _strip(full)
    assert s_res.state_dict() == s_full.state_dict() and sum(s_full.bonus.counts.values()) == 4 * 6


def test_critique_refinements_join_the_group(setup):
    """Critique-GRPO: every failed episode gets the env's critique and one refinement attempt, posed as the same
    question with the critique appended; refinements enter the update, first attempts alone are logged."""
    from searchgym.experiments.squeeze.critique import CRITIQUES, critique_kind, critique_refiner
    from searchgym.train.rl import train_rl

    world = setup[0]
    refine = critique_refiner(world.split("train"))
    seen: list[int] = []

    def spy(step, episodes):
        plan = refine(step, episodes)
        seen.append(len(plan))
        for i, opts in plan:
            ex = opts["example"]
            assert episodes[i].em == 0 and "Feedback on an earlier attempt:" in ex.question
            assert ex.answers == next(q for q in world.split("train") if q.id == ex.id).answers
            assert critique_kind(episodes[i].trajectory, ex) in CRITIQUES
        return plan

    model, tok = load(setup)
    hist = train_rl(model, tok, make_envs(setup, 6), _rl_args(total_steps=1, checkpoint_every=0), questions=_questions(2),
                    refine=spy)
    r = hist[0]
    assert seen[0] > 0 and r["charts/refinements"] == seen[0]
    assert r["charts/episodes_trained"] <= 6 + seen[0]
    with pytest.raises(ConfigError):
        train_rl(model, tok, make_envs(setup, 6), _rl_args(algo="rloo"), questions=_questions(2), refine=spy)


def test_sft_logs_kl_to_the_start_when_given_a_reference(setup):
    import copy

    from searchgym.train.rollout import AgentPolicy, collate, kl_to_reference, run_episodes
    from searchgym.train.sft import SFTArgs, train_sft

    model, tok = load(setup)
    start = copy.deepcopy(model)
    demos = run_episodes(AgentPolicy(ScriptedAgent(), tok), make_envs(setup, 8), [None] * 8,
                         options=[{"index": i} for i in range(8)])
    args = SFTArgs(learning_rate=3e-3, max_steps=4, batch_size=8, micro_batch_size=3, warmup_steps=1)
    plain = train_sft(copy.deepcopy(model), tok, demos, args)
    hist = train_sft(model, tok, demos, args, ref_model=start)
    assert all("charts/kl_to_start" not in r for r in plain)
    kl = [r["charts/kl_to_start"] for r in hist]
    assert abs(kl[0]) < 1e-6 < kl[1] < kl[-1]  # the first step is measured before any update
    # the SFT figures themselves do not change when the KL is logged
    assert [r["losses/sft"] for r in hist] == [r["losses/sft"] for r in plain]
    # the figure is the exact KL over the vocabulary at the agent tokens, from a plain padded forward
    s, n = kl_to_reference(model, start, demos, tok.pad_token_id, micro_batch_size=3)
    b = collate(demos, tok.pad_token_id)
    with torch.no_grad():
        lp = torch.log_softmax(model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits[:, :-1], -1)
        lq = torch.log_softmax(start(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits[:, :-1], -1)
    sel = b["mask"] > 0
    want = (lp.exp() * (lp - lq)).sum(-1)[sel]
    assert n == int(sel.sum()) and math.isclose(s / n, float(want.mean()), rel_tol=1e-4)
