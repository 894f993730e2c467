"""Policy-gradient RL for search agents, CleanRL style: GRPO, RLOO and PPO-clip in one readable loop.

Every hyperparameter is in :class:`RLArgs` with a one-line help. One step of :func:`train_rl`:

1. roll out ``prompts_per_step`` questions x ``group_size`` samples against the environment (token-level
   masks: only the policy's own tokens are trained on, ``<information>`` tokens never are);
2. advantages: GRPO (group mean/std normalised), RLOO (leave-one-out baseline) or PPO (GAE on a value head);
3. ``update_epochs`` x ``num_minibatches`` optimizer steps on the token-mean loss
   ``policy_loss - ent_coef * entropy + kl_coef * KL(pi || ref) [+ vf_coef * value_loss]`` where
   ``policy_loss`` is PPO-clip (``clip_high > clip_low`` is DAPO clip-higher), Clip-Cov or KL-Cov (exactly as
   released, literature.md §1.5-1.6);
4. log named scalars (``charts/...``, ``losses/...``) to ``metrics.jsonl``; feed the rollouts to a callback
   (the DiversityTracker); checkpoint atomically; ``resume=True`` continues exactly.

Rollout seeds, sampling and Clip-Cov's random draw are functions of ``(seed, step)``, so a resumed run
reproduces the uninterrupted one's metrics exactly.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.errors import ConfigError
from searchgym.train.runlog import append_metrics, sync_metrics

ALGOS = ("grpo", "rloo", "ppo")
POLICY_LOSSES = ("ppo_clip", "clip_cov", "kl_cov")


@dataclass
class RLArgs:
    # --- experiment
    seed: int = 1                       # seeds rollouts, sampling and Clip-Cov's draw (with the step number)
    algo: str = "grpo"                  # grpo | rloo | ppo
    total_steps: int = 30               # policy updates (one rollout batch each)
    device: str = "cpu"                 # cpu | cuda
    # --- rollouts
    prompts_per_step: int = 8           # distinct questions per step
    group_size: int = 8                 # samples per question (GRPO/RLOO need >= 2)
    temperature: float = 1.0            # sampling temperature (the loss uses the same one)
    top_p: float = 1.0                  # nucleus sampling
    max_new_tokens: int = 32            # tokens per agent turn
    max_context: int = 1024             # an episode whose context would exceed this ends with reward 0
    obs_max_words: int | None = 30      # words kept per retrieved passage (short contexts for CPU)
    # --- optimisation
    learning_rate: float = 2e-4         # AdamW learning rate (tiny LM; ~1e-6 for a pretrained LLM)
    weight_decay: float = 0.0           # AdamW weight decay
    update_epochs: int = 1              # passes over each rollout batch
    num_minibatches: int = 1            # optimizer steps per pass
    micro_batch_size: int = 32          # episodes per forward pass (loss is computed per micro-batch, as verl)
    max_grad_norm: float = 1.0          # gradient clipping
    # --- advantages
    norm_adv_by_std: bool = True        # GRPO: divide by the group std (False = Dr. GRPO mean-centring)
    skip_zero_adv: bool = True          # GRPO/RLOO: leave groups whose rewards are all equal out of the
    #                                     policy-gradient term (their gradient is 0; as DAPO's dynamic sampling,
    #                                     its token-mean is over the informative groups, so every arm takes a
    #                                     GRPO-sized policy step). The regularisers (entropy bonus, KL to the
    #                                     reference, KL-Cov's penalty) still act on EVERY episode: on a collapsed
    #                                     policy every group ties, and that is where a remedy must act.
    gamma: float = 1.0                  # PPO: discount over agent tokens
    gae_lambda: float = 1.0             # PPO: GAE lambda
    vf_coef: float = 0.5                # PPO: value-loss coefficient
    vf_clip: float | None = 0.2         # PPO: value clipping range (None = off)
    # --- policy loss
    policy_loss: str = "ppo_clip"       # ppo_clip | clip_cov | kl_cov
    clip_low: float = 0.2               # PPO ratio clip below (1 - clip_low)
    clip_high: float = 0.2              # PPO ratio clip above (1 + clip_high); 0.28 = DAPO clip-higher
    clip_cov_ratio: float = 2e-4        # Clip-Cov: fraction of tokens whose gradient is detached
    clip_cov_lb: float = 1.0            # Clip-Cov: covariance band lower bound
    clip_cov_ub: float = 5.0            # Clip-Cov: covariance band upper bound
    kl_cov_ratio: float = 2e-4          # KL-Cov: fraction of top-covariance tokens that get the KL penalty
    kl_cov_coef: float = 1.0            # KL-Cov: coefficient of |logp - old_logp| on those tokens
    # --- regularisers
    ent_coef: float = 0.0               # entropy bonus coefficient (PPO's c2)
    kl_coef: float = 0.0                # KL-to-reference coefficient (0 = no reference model)
    kl_estimator: str = "low_var_kl"    # k1 | k2 | k3 | low_var_kl | abs
    log_kl_to_start: bool = False       # log charts/kl_to_start (k3 of the rollouts vs the starting policy) in every
    #                                     arm, not only KL-regularised ones: the RL dose (one extra forward)
    # --- bookkeeping
    checkpoint_every: int = 10          # steps between checkpoints (and always at the end)
    log_every: int = 1                  # steps between console lines
    fast_paths: bool = True             # rollouts read only each turn's new tokens (the KV cache is kept across
    #                                     turns) and the update reads episodes without padding: the same numbers
    #                                     to float rounding, ~2x faster a step. False: the padded computation,
    #                                     bit for bit as before issue 31 (KL-Cov's |logp - old_logp| penalty
    #                                     takes the sign of that rounding on the first, on-policy minibatch)

    def validate(self) -> None:
        from searchgym.train.losses import KL_KINDS

        if self.algo not in ALGOS:
            raise ConfigError(f"algo={self.algo!r}; choose one of {ALGOS}")
        if self.algo in ("grpo", "rloo") and self.group_size < 2:
            raise ConfigError(f"{self.algo.upper()} with group_size={self.group_size}: a group baseline needs at "
                              "least 2 samples per question (use --group-size 8, or algo=ppo)")
        if self.group_size < 1 or self.prompts_per_step < 1:
            raise ConfigError("group_size and prompts_per_step must be >= 1")
        if self.policy_loss not in POLICY_LOSSES:
            raise ConfigError(f"policy_loss={self.policy_loss!r}; choose one of {POLICY_LOSSES}")
        if self.kl_estimator not in KL_KINDS:
            raise ConfigError(f"kl_estimator={self.kl_estimator!r}; choose one of {KL_KINDS}")
        if not self.learning_rate > 0:
            raise ConfigError(f"learning_rate must be > 0, got {self.learning_rate}")
        if self.temperature <= 0:
            raise ConfigError(f"temperature must be > 0 for RL sampling, got {self.temperature}")
        if not (0 <= self.clip_low <= 1) or self.clip_high < 0:  # Clip-Cov's released scripts use 1
            raise ConfigError(f"clip range (1-{self.clip_low}, 1+{self.clip_high}) is not valid")
        if self.policy_loss == "clip_cov" and not (0 < self.clip_cov_ratio <= 1 and
                                                   self.clip_cov_lb < self.clip_cov_ub):
            raise ConfigError("Clip-Cov needs 0 < clip_cov_ratio <= 1 and clip_cov_lb < clip_cov_ub")
        if self.policy_loss == "kl_cov" and not (0 < self.kl_cov_ratio <= 1):
            raise ConfigError("KL-Cov needs 0 < kl_cov_ratio <= 1")
        n = self.prompts_per_step * self.group_size
        if self.num_minibatches < 1 or n % self.num_minibatches:
            raise ConfigError(f"{n} episodes per step do not split into {self.num_minibatches} minibatches")
        if self.learning_rate <= 0 or self.total_steps < 1 or self.update_epochs < 1:
            raise ConfigError("learning_rate, total_steps and update_epochs must be positive")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RLArgs:
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ConfigError(f"unknown RL arguments {sorted(unknown)}")
        return cls(**d)


def step_seeds(seed: int, step: int, n_prompts: int) -> list[int]:
    """Reset seeds of the questions of one step (a pure function of seed and step)."""
    return [int(x) for x in np.random.default_rng([seed, step, 17]).integers(0, 2**31 - 1, size=n_prompts)]


def _torch_gen(seed: int, step: int, salt: int, device: str = "cpu") -> Any:
    import torch

    s = int(np.random.default_rng([seed, step, salt]).integers(0, 2**62))
    return torch.Generator(device=device).manual_seed(s)


def compute_advantages(args: RLArgs, rewards: Any) -> Any:
    """Per-episode advantages for GRPO (group-normalised) and RLOO (leave-one-out); ``None`` for PPO, whose
    token-level GAE advantages need the value head. ``rewards`` is laid out group by group."""
    from searchgym.train import losses as L

    if args.algo == "grpo":
        return L.grpo_advantages(rewards, args.group_size, norm_by_std=args.norm_adv_by_std)
    if args.algo == "rloo":
        return L.rloo_advantages(rewards, args.group_size)
    return None


def policy_loss(args: RLArgs, logp: Any, old_logp: Any, adv: Any, mask: Any, *,
                generator: Any = None, reg_mask: Any = None) -> tuple[Any, dict[str, float]]:
    """The token-mean policy loss ``args.policy_loss`` selects, with stats under common names:
    ``clip_fraction`` (tokens whose PPO ratio was clipped), ``abs_log_ratio`` (mean |log pi/pi_old|: 0 on the
    first on-policy update, so a control that acts through the ratio needs several mini-batches) and
    ``cov_selected_share`` (share of tokens Clip-Cov detached or KL-Cov penalised; 0 for plain PPO-clip).

    ``mask`` holds the tokens of the policy-gradient term; ``reg_mask`` (default ``mask``) the tokens KL-Cov's
    penalty acts on (every episode, all-tied groups included)."""
    from searchgym.train import losses as L

    if args.policy_loss == "clip_cov":
        pg, st = L.clip_cov_loss(logp, old_logp, adv, mask, clip_cov_ratio=args.clip_cov_ratio,
                                 clip_cov_lb=args.clip_cov_lb, clip_cov_ub=args.clip_cov_ub,
                                 clip_low=args.clip_low, clip_high=args.clip_high, generator=generator)
        share = st["clipfrac_cov"]
    elif args.policy_loss == "kl_cov":
        both = reg_mask is None or reg_mask is mask
        pg, st = L.kl_cov_loss(logp, old_logp, adv, mask if both else reg_mask, kl_cov_ratio=args.kl_cov_ratio,
                               kl_coef=args.kl_cov_coef, pg_mask=None if both else mask)
        share = st["kl_cov_frac"]
    else:
        pg, st = L.ppo_clip_loss(logp, old_logp, adv, mask, clip_low=args.clip_low, clip_high=args.clip_high)
        share = 0.0
    st["clip_fraction"] = float(st.get("clipfrac", 0.0))
    st["abs_log_ratio"] = L.masked_mean((logp - old_logp).detach().abs(), mask).item()
    st["cov_selected_share"] = float(share)
    return pg, st


@dataclass
class _Run:
    """What one train_rl call holds across steps: the model, optimizer, optional value head and reference."""

    model: Any
    tokenizer: Any
    envs: Sequence[Any]
    args: RLArgs
    opt: Any
    params: list[Any]
    pad: int
    out: Path | None
    value_head: Any = None
    ref: Any = None
    start: int = 0
    history: list[dict[str, float]] = field(default_factory=list)

    @property
    def ckpt(self) -> Path | None:
        return self.out / "checkpoint" if self.out is not None else None


@dataclass
class _Batch:
    """One step's rollouts and what the update needs of them, computed once before it."""

    first: list[Any]                 # the first attempts (logged, tracked)
    episodes: list[Any]              # first attempts + refinements (trained on)
    raw: list[float]                 # the first attempts' rewards
    rewards: Any                     # ... as shaped (the advantages' input)
    seq_adv: Any                     # per-episode advantages (None for PPO)
    micro: list[list[int]]           # micro-batches of the no-grad pass
    tok_adv: list[Any] = field(default_factory=list)
    tok_ret: list[Any] = field(default_factory=list)
    old_vals: list[Any] = field(default_factory=list)
    ref_lp: list[Any] = field(default_factory=list)
    ppo_masks: list[Any] = field(default_factory=list)  # PPO: each micro-batch's agent-token mask
    kl_start: tuple[float, float] = (0.0, 0.0)  # sum and count of the k3 KL to the start over agent tokens


def _setup(model: Any, tokenizer: Any, envs: Sequence[Any], args: RLArgs, out_dir: str | Path | None,
           ref_model: Any, resume: bool) -> _Run:
    """The optimizer (and PPO's value head), the frozen reference when one is needed, and the out dir."""
    import torch

    from searchgym.train.value_head import make_value_head

    model.to(args.device)
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    value_head = None
    params = list(model.parameters())
    if args.algo == "ppo":
        value_head = make_value_head(model.config.hidden_size, seed=args.seed).to(args.device)
        params += list(value_head.parameters())
    opt = torch.optim.AdamW(params, lr=args.learning_rate, weight_decay=args.weight_decay)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    run = _Run(model=model, tokenizer=tokenizer, envs=envs, args=args, opt=opt, params=params, pad=pad, out=out,
               value_head=value_head)
    run.ref = _reference(run, ref_model, resume)
    return run


def _reference(run: _Run, ref_model: Any, resume: bool) -> Any:
    """The reference policy of the KL term and the dose: the starting point of this run (saved once, reloaded on
    resume), frozen; None when neither is asked for."""
    ref = ref_model
    if (run.args.kl_coef > 0 or run.args.log_kl_to_start) and ref is None:
        ref_dir = run.out / "ref_model" if run.out is not None else None
        if resume and ref_dir is not None and ref_dir.exists():
            from transformers import AutoModelForCausalLM

            ref = AutoModelForCausalLM.from_pretrained(ref_dir).to(run.args.device)
        else:
            ref = copy.deepcopy(run.model)
            if ref_dir is not None:
                ref.save_pretrained(ref_dir)
    if ref is not None:
        ref.eval()
        for p_ in ref.parameters():
            p_.requires_grad_(False)
    return ref


def _restore(run: _Run, shape_rewards: Any) -> None:
    """Continue from the checkpoint: weights, optimizer, value head, RNG, history and the shaper's state."""
    from transformers import AutoModelForCausalLM

    from searchgym.train.checkpoint import load_checkpoint, set_rng_state

    c = load_checkpoint(run.ckpt, device=run.args.device)
    run.model.load_state_dict(AutoModelForCausalLM.from_pretrained(c["model_dir"]).state_dict())
    run.opt.load_state_dict(c["optimizer"])
    if run.value_head is not None:
        run.value_head.load_state_dict(c["extra"]["value_head"])
    set_rng_state(c["rng"])
    run.start, run.history = int(c["state"]["step"]), list(c["state"]["history"])
    if hasattr(shape_rewards, "load_state_dict") and (c["extra"] or {}).get("shaper") is not None:
        shape_rewards.load_state_dict(c["extra"]["shaper"])  # e.g. the count bonus's counts


def _rollouts(run: _Run, step: int, qs: list[tuple[int | None, dict | None]],
              refine: Callable[[int, list[Any]], list[tuple[int, dict]]] | None) -> tuple[list[Any], list[Any]]:
    """``(first attempts, first attempts + refinements)`` of one step: G samples of each of the P questions."""
    from searchgym.train.rollout import LMPolicy, run_episodes

    args, envs = run.args, run.envs
    G, P = args.group_size, args.prompts_per_step
    if len(qs) != P:
        raise ConfigError(f"questions({step}) returned {len(qs)} questions, need {P}")
    run.model.eval()
    policy = LMPolicy(run.model, run.tokenizer, temperature=args.temperature, top_p=args.top_p,
                      max_new_tokens=args.max_new_tokens, device=args.device,
                      generator=_torch_gen(args.seed, step, 1, args.device), reuse_kv=args.fast_paths)
    common = {"max_context": args.max_context, "max_new_tokens": args.max_new_tokens,
              "obs_max_words": args.obs_max_words, "policy_step": step}
    episodes = run_episodes(policy, envs, [qs[i // G][0] for i in range(P * G)],
                            options=[qs[i // G][1] for i in range(P * G)], groups=[i // G for i in range(P * G)],
                            agent_name=f"rl-{args.algo}", **common)
    if refine is None:
        return episodes, episodes
    plan = refine(step, episodes)[: len(envs)]
    if not plan:
        return episodes, episodes
    ref_eps = run_episodes(policy, envs[:len(plan)], [None] * len(plan), options=[o for _, o in plan],
                           groups=[episodes[i].group for i, _ in plan], agent_name=f"rl-{args.algo}-refine",
                           **common)
    return episodes, episodes + ref_eps


def _advantages(run: _Run, step: int, first: list[Any], episodes: list[Any],
                shape_rewards: Callable[[int, list[Any], list[float]], list[float]] | None) -> _Batch:
    """Rewards (shaped), per-episode advantages, and the no-grad pass: PPO's values and GAE, the reference's
    log-probs and the KL to the start."""
    import torch

    from searchgym.train import losses as L

    args = run.args
    raw = [float(e.reward) for e in first]
    rewards = torch.tensor(shape_rewards(step, first, raw) if shape_rewards else raw, dtype=torch.float32)
    if len(episodes) > len(first):  # refinements join their question's group
        seq_adv = L.group_advantages(torch.tensor([float(e.reward) for e in episodes]),
                                     torch.tensor([e.group for e in episodes]), norm_by_std=args.norm_adv_by_std)
    else:
        seq_adv = compute_advantages(args, rewards)
    micro = [list(range(i, min(i + args.micro_batch_size, len(episodes))))
             for i in range(0, len(episodes), args.micro_batch_size)]
    batch = _Batch(first=first, episodes=episodes, raw=raw, rewards=rewards, seq_adv=seq_adv, micro=micro)
    with torch.no_grad():
        for mb in micro:
            _no_grad_pass(run, batch, mb)
    if args.algo == "ppo":  # whiten GAE advantages over the batch's agent tokens
        flat = torch.cat([a[a_mask > 0] for a, a_mask in zip(batch.tok_adv, batch.ppo_masks)])
        mu, sd = flat.mean(), flat.std().clamp_min(1e-6) if flat.numel() > 1 else torch.tensor(1.0)
        batch.tok_adv = [(a - mu) / sd for a in batch.tok_adv]
    return batch


def _no_grad_pass(run: _Run, batch: _Batch, mb: list[int]) -> None:
    """One micro-batch of the pass before the update (appends to ``batch``'s per-micro-batch lists)."""
    import torch

    from searchgym.train import losses as L
    from searchgym.train.rollout import collate, forward_episodes
    from searchgym.train.value_head import values_from_hidden

    args, dev = run.args, run.args.device
    eps = [batch.episodes[i] for i in mb]
    b = collate(eps, run.pad, dev)
    if args.algo == "ppo":
        _, _, hid = forward_episodes(run.model, eps, run.pad, dev, unpadded=args.fast_paths, temperature=args.temperature,
                                     with_entropy=False, output_hidden=True)
        v = values_from_hidden(run.value_head, hid) * b["mask"]
        r_tok = torch.zeros_like(v)
        for j, i in enumerate(mb):
            nz = torch.nonzero(b["mask"][j] > 0, as_tuple=True)[0]
            if len(nz):
                r_tok[j, nz[-1]] = batch.episodes[i].reward
        a, ret = L.gae_advantages(r_tok, v, b["mask"], gamma=args.gamma, lam=args.gae_lambda)
        batch.tok_adv.append(a)
        batch.tok_ret.append(ret)
        batch.old_vals.append(v)
        batch.ppo_masks.append(b["mask"])
    else:
        batch.tok_adv.append(batch.seq_adv[mb].unsqueeze(1).to(dev) * b["mask"])
    if run.ref is not None:
        batch.ref_lp.append(forward_episodes(run.ref, eps, run.pad, dev, unpadded=args.fast_paths, temperature=args.temperature,
                                             with_entropy=False)[0])
        # the dose: KL(behaviour || start) on the agent's tokens (k3 from the rollout's own samples)
        kl_tok = L.kl_penalty(b["old_logp"], batch.ref_lp[-1], "k3") * b["mask"]
        s, n = batch.kl_start
        batch.kl_start = (s + float(kl_tok.sum()), n + float(b["mask"].sum()))


@dataclass
class _Update:
    """Which episodes the update trains on, and its averaged loss statistics."""

    informative: Any                 # bool per episode: in the policy-gradient term
    pool: Any                        # indices the optimizer steps draw from
    regularised: bool                # some regulariser acts on every episode
    stats: dict[str, list[float]] = field(default_factory=dict)


def _update(run: _Run, step: int, batch: _Batch) -> _Update:
    """``update_epochs`` x ``num_minibatches`` optimizer steps on the step's rollouts.

    The policy-gradient term trains on the informative groups only (the same filter for every arm, so every
    arm's policy-gradient step has one size); the regularisers act on every episode."""
    import torch

    args = run.args
    run.model.train()
    informative = np.ones(len(batch.episodes), dtype=bool)
    if batch.seq_adv is not None and args.skip_zero_adv:
        informative = (batch.seq_adv != 0).numpy()
    regularised = args.ent_coef != 0 or _kl_loss(run) or args.policy_loss == "kl_cov"
    pool = np.arange(len(batch.episodes)) if regularised else np.flatnonzero(informative)
    upd = _Update(informative=informative, pool=pool, regularised=regularised)
    perm_rng = np.random.default_rng([args.seed, step, 3])
    cov_gen = _torch_gen(args.seed, step, 2, "cpu")
    for _epoch in range(args.update_epochs if len(pool) else 0):
        order = pool[perm_rng.permutation(len(pool))] if args.num_minibatches > 1 else pool
        for part in np.array_split(order, args.num_minibatches):
            idx = [int(x) for x in part]
            if not idx:
                continue
            chunks = [idx[i:i + args.micro_batch_size] for i in range(0, len(idx), args.micro_batch_size)]
            run.opt.zero_grad(set_to_none=True)
            for chunk in chunks:
                loss, st = _chunk_loss(run, batch, upd, chunk, cov_gen)
                (loss / len(chunks)).backward()
                for key, val in st.items():
                    upd.stats.setdefault(key, []).append(float(val))
            gnorm = torch.nn.utils.clip_grad_norm_(run.params, args.max_grad_norm).item()
            upd.stats.setdefault("grad_norm", []).append(gnorm)
            run.opt.step()
    return upd


def _kl_loss(run: _Run) -> bool:
    return run.ref is not None and run.args.kl_coef > 0


def _chunk_loss(run: _Run, batch: _Batch, upd: _Update, chunk: list[int], cov_gen: Any) -> tuple[Any, dict]:
    """The token-mean loss of one micro-batch and its statistics."""
    import torch

    from searchgym.train import losses as L
    from searchgym.train.rollout import collate, forward_episodes
    from searchgym.train.value_head import values_from_hidden

    args, dev = run.args, run.args.device
    eps = [batch.episodes[i] for i in chunk]
    b = collate(eps, run.pad, dev)
    mask = b["mask"]
    pg_mask = mask * torch.tensor(upd.informative[chunk], dtype=mask.dtype, device=dev)[:, None]
    width = mask.shape[1]
    adv = _gather(batch.tok_adv, batch.micro, chunk, width, dev) * mask
    lp, ent, hid = forward_episodes(run.model, eps, run.pad, dev, unpadded=args.fast_paths, temperature=args.temperature, with_entropy=True,
                                    output_hidden=args.algo == "ppo")
    pg, st = policy_loss(args, lp, b["old_logp"], adv, pg_mask, generator=cov_gen, reg_mask=mask)
    ent_mean = L.masked_mean(ent, mask)
    loss = pg - args.ent_coef * ent_mean
    st["policy"] = pg.item()
    st["entropy"] = ent_mean.item()
    if _kl_loss(run):
        rl = _gather(batch.ref_lp, batch.micro, chunk, width, dev)
        kl = L.masked_mean(L.kl_penalty(lp, rl, args.kl_estimator), mask)
        loss = loss + args.kl_coef * kl
        st["kl_ref"] = kl.item()
    if args.algo == "ppo":
        v = values_from_hidden(run.value_head, hid)
        ret = _gather(batch.tok_ret, batch.micro, chunk, width, dev)
        ov = _gather(batch.old_vals, batch.micro, chunk, width, dev)
        vl = L.value_loss(v, ret, ov, mask, clip=args.vf_clip)
        loss = loss + args.vf_coef * vl
        st["value"] = vl.item()
    return loss, st


def _metrics_row(run: _Run, step: int, batch: _Batch, upd: _Update, times: tuple[float, float],
                 shaped: bool, refined: bool) -> dict[str, float]:
    """The step's named scalars (``charts/...``, ``losses/...``) over the first attempts."""
    from searchgym.train.segments import segment_entropy

    G, P = run.args.group_size, run.args.prompts_per_step
    episodes, rewards = batch.first, batch.rewards
    n_tok = [e.num_agent_tokens for e in episodes]
    all_ent = [x for e in episodes for x, m in zip(e.entropies, e.mask) if m]
    g_rewards = rewards.reshape(P, G) if G > 1 else rewards.reshape(-1, 1)
    t_roll, t_upd = times
    row: dict[str, float] = {
        "step": step + 1,
        "charts/reward": float(np.mean(batch.raw)),
        "charts/em": float(np.mean([e.em for e in episodes])),
        "charts/f1": float(np.mean([e.f1 for e in episodes])),
        "charts/num_searches": float(np.mean([e.trajectory.num_searches for e in episodes])),
        "charts/answered": float(np.mean([e.trajectory.prediction is not None for e in episodes])),
        "charts/response_tokens": float(np.mean(n_tok)),
        "charts/token_entropy": float(np.mean(all_ent)) if all_ent else 0.0,
        "charts/zero_adv_groups": float((g_rewards.std(dim=1) == 0).float().mean()) if G > 1 else 0.0,
        "charts/episodes_trained": float(upd.informative.sum()),  # in the policy-gradient term
        "charts/episodes_regularised": float(len(upd.pool)) if upd.regularised else 0.0,
        "charts/time_rollout": t_roll, "charts/time_update": t_upd,
        "charts/episodes_per_s": len(episodes) / max(t_roll, 1e-9),
    }
    if shaped:
        row["charts/shaped_reward"] = float(rewards.mean())
    if refined:
        extra = batch.episodes[len(batch.first):]
        row["charts/refinements"] = float(len(extra))
        row["charts/refinement_em"] = float(np.mean([e.em for e in extra])) if extra else 0.0
    if batch.kl_start[1]:
        row["charts/kl_to_start"] = batch.kl_start[0] / batch.kl_start[1]
    row.update({f"charts/{k}": v for k, v in segment_entropy(episodes, run.tokenizer).items()})
    return row


def _finish_row(row: dict[str, float], upd: _Update, extra_upd: dict[str, float] | None) -> None:
    if extra_upd:
        row.update(extra_upd)
    for key, vals in upd.stats.items():
        prefix = "charts/" if key == "grad_norm" else "losses/"
        row[prefix + key] = float(np.mean(vals))
    row.setdefault("losses/policy", 0.0)  # no informative group this step: nothing to update


def _checkpoint(run: _Run, step: int, shape_rewards: Any, t_start: float) -> None:
    """Save atomically every ``checkpoint_every`` steps and at the last one (when there is an out dir)."""
    from searchgym.train.checkpoint import save_checkpoint

    args = run.args
    if run.ckpt is None or not ((args.checkpoint_every and (step + 1) % args.checkpoint_every == 0)
                                or step + 1 == args.total_steps):
        return
    save_checkpoint(run.ckpt, model=run.model, tokenizer=run.tokenizer, optimizer=run.opt,
                    state={"step": step + 1, "history": run.history, "args": asdict(args), "kind": "rl",
                           "elapsed_s": time.time() - t_start},
                    extra={"value_head": run.value_head.state_dict() if run.value_head is not None else None,
                           "shaper": shape_rewards.state_dict() if hasattr(shape_rewards, "state_dict")
                           else None})


def train_rl(model: Any, tokenizer: Any, envs: Sequence[Any], args: RLArgs, *, out_dir: str | Path | None = None,
             resume: bool = False, questions: Callable[[int], list[tuple[int | None, dict | None]]] | None = None,
             on_rollouts: Callable[[int, list[Any], dict[str, float]], dict[str, float] | None] | None = None,
             log: Callable[[dict[str, float]], None] | None = None, ref_model: Any = None,
             stop_after: int | None = None,
             shape_rewards: Callable[[int, list[Any], list[float]], list[float]] | None = None,
             after_update: Callable[[int, Any, Any], dict[str, float] | None] | None = None,
             refine: Callable[[int, list[Any]], list[tuple[int, dict]]] | None = None,
             ) -> list[dict[str, float]]:
    """Train ``model`` in place; ``envs`` holds ``prompts_per_step * group_size`` environments.

    ``questions(step)`` returns ``prompts_per_step`` ``(reset_seed, reset_options)`` pairs (default: seeds
    from :func:`step_seeds`); each is used by ``group_size`` consecutive envs. ``on_rollouts(step, episodes,
    row)`` may return extra scalars to log (the diversity tracker). ``stop_after`` ends the run after that many
    steps as if killed right after a checkpoint (tests). ``shape_rewards(step, episodes, rewards)`` returns
    the rewards the advantages are computed from (DARLING; must be a pure function of the step's rollouts for
    exact resume, or an object with ``state_dict``/``load_state_dict``, which the checkpoint then carries).
    ``after_update(step, model, optimizer)`` runs after each step's policy update, before the
    checkpoint (periodic SFT refresh through the same, checkpointed optimizer); its scalars are logged.
    ``refine(step, episodes)`` (Critique-GRPO, GRPO only) returns, for some failed episodes, ``(episode index,
    reset options)`` of one refinement attempt each (the options pose the question with the environment's
    critique appended); the refinements are rolled out with the same policy and join their question's group,
    so the group-normalised advantages compare first attempts and refinements. Returns the metric rows.

    One step: rollouts (:func:`_rollouts`), advantages and the no-grad pass (:func:`_advantages`), the update
    (:func:`_update`), the metric row (:func:`_metrics_row`) and the hooks, then the checkpoint.
    """
    args.validate()
    if refine is not None and (args.algo != "grpo" or shape_rewards is not None):
        raise ConfigError("refine (Critique-GRPO) needs algo='grpo' and no shape_rewards")
    G, P = args.group_size, args.prompts_per_step
    if len(envs) != P * G:
        raise ConfigError(f"train_rl needs prompts_per_step*group_size = {P * G} envs, got {len(envs)}")
    run = _setup(model, tokenizer, envs, args, out_dir, ref_model, resume)
    if resume and run.ckpt is not None and run.ckpt.exists():
        _restore(run, shape_rewards)
    sync_metrics(run.out, run.history, resumed=run.start > 0)
    questions = questions or (lambda step: [(s, None) for s in step_seeds(args.seed, step, P)])
    t_start = time.time()
    for step in range(run.start, args.total_steps if stop_after is None else min(stop_after, args.total_steps)):
        t0 = time.time()
        first, episodes = _rollouts(run, step, questions(step), refine)
        t1 = time.time()
        batch = _advantages(run, step, first, episodes, shape_rewards)
        upd = _update(run, step, batch)
        extra_upd = after_update(step, model, run.opt) if after_update is not None else None
        row = _metrics_row(run, step, batch, upd, (t1 - t0, time.time() - t1), shape_rewards is not None,
                           refine is not None)
        _finish_row(row, upd, extra_upd)
        extra = on_rollouts(step + 1, first, row) if on_rollouts is not None else None
        row.update(extra or {})
        run.history.append(row)
        append_metrics(run.out, row)
        if log is not None and (step + 1) % max(1, args.log_every) == 0:
            log(row)
        _checkpoint(run, step, shape_rewards, t_start)
    model.eval()
    return run.history


def _gather(per_micro: list[Any], micro: list[list[int]], chunk: list[int], width: int, device: str) -> Any:
    """Rows of precomputed per-micro-batch tensors for the episodes in ``chunk``, padded to ``width``."""
    import torch

    where = {}
    for m, mb in enumerate(micro):
        for j, i in enumerate(mb):
            where[i] = (m, j)
    out = torch.zeros((len(chunk), width), dtype=torch.float32, device=device)
    for r, i in enumerate(chunk):
        m, j = where[i]
        src = per_micro[m][j]
        w = min(width, src.shape[0])
        out[r, :w] = src[:w]
    return out
