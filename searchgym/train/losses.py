"""Loss functions and advantage estimators shared by the trainers (pure torch, unit-testable).

Every policy loss takes per-token tensors of shape ``[B, T]``: ``logp`` (current policy, with grad),
``old_logp`` (behaviour policy), ``adv`` (advantage broadcast to the tokens), ``mask`` (1 on the agent's own
tokens, 0 on prompt, ``<information>`` and padding). Aggregation is "token-mean": the masked mean over all
valid tokens of the batch passed in (verl's ``loss_agg_mode="token-mean"``).

Clip-Cov and KL-Cov follow the released code of Cui et al. 2025 (PRIME-RL/Entropy-Mechanism-of-RL, upstream
verl ``compute_policy_loss_clip_cov`` / ``compute_policy_loss_kl_cov``); see literature.md §1.4-1.6.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from searchgym.errors import ConfigError

KL_KINDS = ("k1", "k2", "k3", "low_var_kl", "abs")


def masked_sum(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum()


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``x`` over the positions where ``mask`` is 1 (0 when the mask is empty)."""
    return (x * mask).sum() / mask.sum().clamp_min(1.0)


token_mean = masked_mean


# ----------------------------------------------------------------------------------------------- advantages
def _groups(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    if group_size < 2:
        raise ConfigError(f"group_size={group_size}: group baselines need at least 2 samples per prompt "
                          "(set --group-size 2 or more)")
    if rewards.numel() % group_size:
        raise ConfigError(f"{rewards.numel()} rewards do not split into groups of {group_size}")
    return rewards.reshape(-1, group_size).float()


def grpo_advantages(rewards: torch.Tensor, group_size: int, *, norm_by_std: bool = True,
                    eps: float = 1e-6) -> torch.Tensor:
    """GRPO outcome advantages: ``(r - mean_group) / (std_group + eps)``.

    Rewards are laid out group by group (``group_size`` consecutive samples share a prompt). ``std`` is the
    unbiased (Bessel) standard deviation, as verl's ``compute_grpo_outcome_advantage`` uses ``torch.std``.
    ``norm_by_std=False`` gives Dr. GRPO's mean-only centring.
    """
    g = _groups(rewards, group_size)
    a = g - g.mean(dim=1, keepdim=True)
    if norm_by_std:
        a = a / (g.std(dim=1, keepdim=True) + eps)
    return a.reshape(-1)


def group_advantages(rewards: torch.Tensor, groups: torch.Tensor, *, norm_by_std: bool = True,
                     eps: float = 1e-6) -> torch.Tensor:
    """GRPO advantages for groups of any size (``groups[i]``: the group of sample i), e.g. first attempts plus
    their refinements in Critique-GRPO; a group of one gets advantage 0."""
    r = rewards.float()
    out = torch.zeros_like(r)
    for g in torch.unique(groups):
        m = groups == g
        if int(m.sum()) < 2:
            continue
        a = r[m] - r[m].mean()
        if norm_by_std:
            a = a / (r[m].std() + eps)
        out[m] = a
    return out


def rloo_advantages(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """REINFORCE leave-one-out: ``r_i - mean_{j != i} r_j`` = ``n/(n-1) * (r_i - mean)``."""
    g = _groups(rewards, group_size)
    n = g.shape[1]
    baseline = (g.sum(dim=1, keepdim=True) - g) / (n - 1)
    return (g - baseline).reshape(-1)


def gae_advantages(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, *, gamma: float = 1.0,
                   lam: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-level GAE over the masked (agent) tokens only; ``rewards [B, T]`` holds the outcome on the
    last agent token. Masked-out tokens (observations, padding) are skipped, not treated as time steps,
    exactly like Search-R1's state masking. Returns ``(advantages, returns)``, both zero off the mask."""
    B = rewards.shape[0]
    adv = torch.zeros_like(values)
    with torch.no_grad():
        for b in range(B):
            idx = torch.nonzero(mask[b] > 0, as_tuple=True)[0]
            last = 0.0
            next_v = 0.0
            for j in range(len(idx) - 1, -1, -1):
                t = idx[j]
                delta = rewards[b, t] + gamma * next_v - values[b, t]
                last = delta + gamma * lam * last
                adv[b, t] = last
                next_v = values[b, t]
    returns = adv + values
    return adv * mask, returns * mask


def whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    mean = masked_mean(x, mask)
    var = masked_mean((x - mean) ** 2, mask)
    return (x - mean) * torch.rsqrt(var + eps) * mask


# ----------------------------------------------------------------------------------------------- policy losses
def ppo_clip_loss(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, *,
                  clip_low: float = 0.2, clip_high: float = 0.2,
                  dual_clip_c: float | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO-clip with separate low/high ranges (DAPO clip-higher: ``clip_high > clip_low``).

    Per token ``max(-A r, -A clip(r, 1-eps_low, 1+eps_high))``; optional dual clip for A<0 (``c``)."""
    log_ratio = logp - old_logp
    ratio = torch.exp(log_ratio)
    loss_unc = -adv * ratio
    loss_clp = -adv * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    token_loss = torch.maximum(loss_unc, loss_clp)
    clipped = (loss_clp > loss_unc).float()
    if dual_clip_c is not None:
        dual = torch.minimum(token_loss, -adv * dual_clip_c)
        token_loss = torch.where(adv < 0, dual, token_loss)
    loss = masked_mean(token_loss, mask)
    stats = {"clipfrac": masked_mean(clipped, mask).item(),
             "approx_kl": masked_mean(-log_ratio, mask).item()}
    return loss, stats


def clip_cov_loss(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, *,
                  clip_cov_ratio: float = 2e-4, clip_cov_lb: float = 1.0, clip_cov_ub: float = 5.0,
                  clip_low: float = 1.0, clip_high: float = 1.0,
                  generator: torch.Generator | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """Clip-Cov (Cui et al. 2025), as released.

    Tokens whose centred covariance ``(A - mean A)(sg(logp) - mean sg(logp))`` lies strictly inside
    ``(lb, ub)`` are candidates (PPO-clipped and masked tokens never are); ``max(1, floor(ratio * N))`` of them,
    drawn uniformly at random, get their loss (and so their gradient) zeroed. The released scripts set the
    PPO clip ranges to 1 (ratio clamped to [0, 2]). ``generator`` makes the random draw reproducible.
    """
    if clip_cov_ratio <= 0:
        raise ConfigError(f"clip_cov_ratio must be > 0, got {clip_cov_ratio}")
    log_ratio = logp - old_logp
    ratio = torch.exp(log_ratio)
    loss_unc = -adv * ratio
    loss_clp = -adv * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    valid = mask > 0
    ppo_clipped = (loss_clp > loss_unc) & valid
    lp = logp.detach()
    cov = (adv - masked_mean(adv, mask)) * (lp - masked_mean(lp, mask))
    cov = cov.masked_fill(~valid, float("-inf")).masked_fill(ppo_clipped, float("-inf"))
    n_sel = max(int(clip_cov_ratio * mask.sum().item()), 1)
    cand = torch.nonzero((cov < clip_cov_ub) & (cov > clip_cov_lb) & valid)
    corr = torch.ones_like(adv)
    if len(cand) > 0:
        perm = torch.randperm(len(cand), generator=generator)
        sel = cand[perm[: min(n_sel, len(cand))]]
        corr[sel[:, 0], sel[:, 1]] = 0.0
    token_loss = torch.maximum(loss_unc, loss_clp) * corr
    loss = masked_mean(token_loss, mask)
    stats = {"clipfrac_cov": masked_mean((corr == 0).float(), mask).item(),
             "n_cov_selected": float((corr == 0).sum().item()),
             "n_cov_candidates": float(len(cand)),
             "clipfrac": masked_mean(ppo_clipped.float(), mask).item(),
             "approx_kl": masked_mean(-log_ratio, mask).item()}
    return loss, stats


def kl_cov_loss(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, *,
                kl_cov_ratio: float = 2e-4, kl_coef: float = 1.0,
                pg_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """KL-Cov (Cui et al. 2025), as released.

    Plain ``-A r`` on every token (no PPO clipping); on the top ``max(1, floor(N * ratio))`` valid tokens by
    centred covariance, add ``kl_coef * |logp - old_logp|``.

    ``pg_mask`` (a sub-mask of ``mask``) restricts the policy-gradient term to those tokens (the trainers pass
    the informative groups' tokens) while the selection and the penalty act on every token of ``mask``: the
    penalty is a regulariser, and a regulariser must act on all-tied groups too. ``None``: one mask for both."""
    if kl_cov_ratio <= 0:
        raise ConfigError(f"kl_cov_ratio must be > 0, got {kl_cov_ratio}")
    log_ratio = logp - old_logp
    ratio = torch.exp(log_ratio)
    pg = -adv * ratio
    pg_kl = pg + kl_coef * log_ratio.abs()
    valid = mask.reshape(-1) > 0
    valid_idx = torch.nonzero(valid, as_tuple=True)[0]
    sel = torch.zeros(pg.numel(), dtype=torch.bool, device=pg.device)  # on the loss device (CUDA too)
    if len(valid_idx) > 0:
        a = adv.detach().reshape(-1)[valid_idx]
        lp = logp.detach().reshape(-1)[valid_idx]
        cov = (a - a.mean()) * (lp - lp.mean())
        n_top = max(1, int(len(cov) * kl_cov_ratio))
        top = torch.topk(cov, n_top, largest=True).indices
        sel[valid_idx[top]] = True
    sel = sel.reshape(pg.shape)
    if pg_mask is None:
        loss = masked_mean(torch.where(sel, pg_kl, pg), mask)
    else:
        loss = masked_mean(pg, pg_mask) + kl_coef * masked_mean(log_ratio.abs() * sel, mask)
    stats = {"kl_cov_frac": masked_mean(sel.float(), mask).item(),
             "n_cov_selected": float(sel.sum().item()),
             "ppo_kl_abs": masked_mean(log_ratio.abs(), mask).item(),
             "approx_kl": masked_mean(-log_ratio, mask).item()}
    return loss, stats


# ----------------------------------------------------------------------------------------------- KL, entropy
def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str = "low_var_kl") -> torch.Tensor:
    """Per-token estimate of KL(pi_theta || pi_ref) from samples of pi_theta (Schulman's k1/k2/k3).

    - ``k1``: ``logp - ref`` (unbiased, high variance, can be negative)
    - ``k2``: ``0.5 (logp - ref)^2``
    - ``k3``: ``exp(ref - logp) - (ref - logp) - 1`` (unbiased, >= 0)
    - ``low_var_kl``: k3 as verl computes it (log-ratio clamped to [-20, 20], result clamped to [-10, 10])
    - ``abs``: ``|logp - ref|``
    """
    d = logp - ref_logp
    if kind == "k1":
        return d
    if kind == "k2":
        return 0.5 * d.square()
    if kind == "abs":
        return d.abs()
    if kind == "k3":
        return torch.exp(-d) + d - 1.0
    if kind == "low_var_kl":
        kl = torch.clamp(-d, min=-20.0, max=20.0)
        return torch.clamp(torch.exp(kl) - kl - 1.0, min=-10.0, max=10.0)
    raise ConfigError(f"unknown KL estimator {kind!r}; choose one of {KL_KINDS}")


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of softmax(logits) over the last dim: ``logsumexp(z) - sum(p z)``."""
    p = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - (p * logits).sum(dim=-1)


def logprobs_and_entropy(logits: torch.Tensor, targets: torch.Tensor, *, temperature: float = 1.0,
                         with_entropy: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-prob of ``targets`` under softmax(logits / T) and the entropy of that distribution."""
    if temperature != 1.0:
        logits = logits / temperature
    logz = torch.logsumexp(logits, dim=-1)
    lp = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - logz
    ent = None
    if with_entropy:
        ent = logz - (torch.softmax(logits, dim=-1) * logits).sum(dim=-1)
    return lp, ent


def sft_loss(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Masked token-mean cross-entropy (only the agent's own tokens are imitated)."""
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1),
                         reduction="none").reshape(targets.shape)
    return masked_mean(ce, mask)


def value_loss(values: torch.Tensor, returns: torch.Tensor, old_values: torch.Tensor, mask: torch.Tensor, *,
               clip: float | None = 0.2) -> torch.Tensor:
    """PPO value loss ``0.5 * max((v - R)^2, (clip(v) - R)^2)``, token-mean over the mask."""
    unclipped = (values - returns).square()
    if clip is None:
        return 0.5 * masked_mean(unclipped, mask)
    v_clip = old_values + torch.clamp(values - old_values, -clip, clip)
    return 0.5 * masked_mean(torch.maximum(unclipped, (v_clip - returns).square()), mask)
