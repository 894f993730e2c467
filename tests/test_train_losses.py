"""Each loss / advantage function against values computed by hand."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from searchgym.errors import ConfigError
from searchgym.train import losses as L


def test_grpo_advantages_hand_values():
    r = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    a = L.grpo_advantages(r, 4, eps=0.0)
    # group 1: mean .25, unbiased std sqrt(.25*.75*4/3)=0.5 -> (1-.25)/.5=1.5, (0-.25)/.5=-.5
    assert torch.allclose(a[:4], torch.tensor([1.5, -0.5, -0.5, -0.5]))
    # group 2: mean .75, std .5
    assert torch.allclose(a[4:], torch.tensor([0.5, 0.5, -1.5, 0.5]))
    # all-equal group -> zero advantage (no NaN)
    z = L.grpo_advantages(torch.ones(4), 4)
    assert torch.all(z == 0)
    assert torch.allclose(L.grpo_advantages(r, 4, norm_by_std=False)[:4], torch.tensor([.75, -.25, -.25, -.25]))


def test_rloo_advantages_hand_values():
    r = torch.tensor([1.0, 0.0, 0.5])
    a = L.rloo_advantages(r, 3)
    assert torch.allclose(a, torch.tensor([1 - 0.25, 0 - 0.75, 0.5 - 0.5]))


def test_group_size_one_is_config_error():
    with pytest.raises(ConfigError):
        L.grpo_advantages(torch.ones(4), 1)
    with pytest.raises(ConfigError):
        L.rloo_advantages(torch.ones(4), 1)
    with pytest.raises(ConfigError):
        L.grpo_advantages(torch.ones(5), 2)


def test_ppo_clip_and_clip_higher():
    old = torch.zeros(1, 4)
    logp = torch.log(torch.tensor([[1.5, 0.5, 1.1, 1.5]]))
    adv = torch.tensor([[1.0, -1.0, 1.0, -1.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    loss, st = L.ppo_clip_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.2)
    # token0: A=1, r=1.5 -> min(1.5, 1.2)=1.2 -> loss -1.2 (clipped)
    # token1: A=-1, r=.5 -> max(.5, .8) = .8 (clipped)
    # token2: A=1, r=1.1 -> -1.1
    assert loss.item() == pytest.approx((-1.2 + 0.8 - 1.1) / 3, abs=1e-6)
    assert st["clipfrac"] == pytest.approx(2 / 3)
    loss_h, _ = L.ppo_clip_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.28)
    assert loss_h.item() == pytest.approx((-1.28 + 0.8 - 1.1) / 3, abs=1e-6)
    # gradient is zero on the clipped tokens and -A*r/N on the unclipped one
    lp = logp.clone().requires_grad_(True)
    L.ppo_clip_loss(lp, old, adv, mask)[0].backward()
    assert lp.grad[0, 0] == 0 and lp.grad[0, 1] == 0 and lp.grad[0, 3] == 0
    assert lp.grad[0, 2].item() == pytest.approx(-1.1 / 3, abs=1e-6)


def test_clip_cov_selection_count_and_band():
    torch.manual_seed(0)
    B, T = 4, 500
    mask = torch.ones(B, T)
    mask[:, 450:] = 0
    adv = torch.randn(B, 1).expand(B, T).contiguous() * 2
    logp = -torch.rand(B, T) * 4
    old = logp.clone()
    g = torch.Generator().manual_seed(1)
    loss, st = L.clip_cov_loss(logp, old, adv, mask, clip_cov_ratio=2e-3, clip_cov_lb=1.0, clip_cov_ub=5.0,
                               generator=g)
    n_valid = int(mask.sum())
    cov = (adv - L.masked_mean(adv, mask)) * (logp - L.masked_mean(logp, mask))
    band = ((cov > 1.0) & (cov < 5.0) & (mask > 0))
    assert st["n_cov_candidates"] == band.sum().item()
    assert st["n_cov_selected"] == min(max(int(2e-3 * n_valid), 1), int(band.sum()))
    # Recompute which were zeroed through the gradient: selected tokens have zero grad.
    lp = logp.clone().requires_grad_(True)
    L.clip_cov_loss(lp, old, adv, mask, clip_cov_ratio=2e-3, generator=torch.Generator().manual_seed(1))[0].backward()
    zero = (lp.grad == 0) & (mask > 0) & (adv != 0)
    assert zero.sum().item() == st["n_cov_selected"]
    assert torch.all(band[zero])  # only in-band tokens are ever selected
    # loss = mean over valid tokens of -A (ratio 1) with the selected ones zeroed
    expect = ((-adv) * mask * (~zero)).sum() / n_valid
    assert loss.item() == pytest.approx(expect.item(), abs=1e-5)


def test_clip_cov_never_selects_out_of_band_or_masked():
    adv = torch.tensor([[10.0, 10.0, -10.0, -10.0]])
    logp = torch.tensor([[-0.1, -5.0, -0.1, -5.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    _, st = L.clip_cov_loss(logp, logp.clone(), adv, mask, clip_cov_ratio=0.5)
    # all covariances are far outside (1, 5) -> nothing selected
    assert st["n_cov_candidates"] == 0 and st["n_cov_selected"] == 0


def test_kl_cov_topk_hand_values():
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0, 0.0]])
    logp = torch.tensor([[-0.5, -2.0, -0.5, -2.0, -1.0]])
    old = logp - torch.tensor([[0.1, 0.1, 0.1, 0.1, 0.1]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0, 0.0]])
    # valid: adv mean 0, logp mean -1.25 -> cov = [.75, -.75, -.75, .75]; topk(1 of 4 at ratio .25): index 0
    loss, st = L.kl_cov_loss(logp, old, adv, mask, kl_cov_ratio=0.25, kl_coef=1.0)
    r = math.exp(0.1)
    expect = (-1 * r + 0.1 + -1 * r + r + r) / 4
    assert loss.item() == pytest.approx(expect, abs=1e-6)
    assert st["n_cov_selected"] == 1
    # ratio 0.5 -> top 2 (indices 0 and 3, both cov .75)
    loss2, st2 = L.kl_cov_loss(logp, old, adv, mask, kl_cov_ratio=0.5)
    assert st2["n_cov_selected"] == 2
    assert loss2.item() == pytest.approx((expect * 4 + 0.1) / 4, abs=1e-6)


def test_kl_estimators():
    logp = torch.tensor([-1.0, -2.0])
    ref = torch.tensor([-1.5, -1.0])
    assert torch.allclose(L.kl_penalty(logp, ref, "k1"), torch.tensor([0.5, -1.0]))
    assert torch.allclose(L.kl_penalty(logp, ref, "k2"), torch.tensor([0.125, 0.5]))
    k3 = torch.tensor([math.exp(-0.5) + 0.5 - 1, math.exp(1.0) - 1.0 - 1])
    assert torch.allclose(L.kl_penalty(logp, ref, "k3"), k3)
    assert torch.allclose(L.kl_penalty(logp, ref, "low_var_kl"), k3)
    big = L.kl_penalty(torch.tensor([-30.0]), torch.tensor([0.0]), "low_var_kl")
    assert big.item() == 10.0  # verl's clamp
    with pytest.raises(ConfigError):
        L.kl_penalty(logp, ref, "k9")


def test_entropy_and_logprobs():
    logits = torch.tensor([[0.0, 0.0, 0.0, 0.0], [10.0, 0.0, 0.0, 0.0]])
    ent = L.entropy_from_logits(logits)
    assert ent[0].item() == pytest.approx(math.log(4), abs=1e-6)
    assert ent[1].item() < 0.01
    lp, e2 = L.logprobs_and_entropy(logits, torch.tensor([1, 0]))
    assert lp[0].item() == pytest.approx(-math.log(4), abs=1e-6)
    assert torch.allclose(ent, e2)


def test_gae_skips_masked_tokens():
    values = torch.tensor([[0.2, 0.9, 0.5, 0.0]])
    mask = torch.tensor([[1.0, 0.0, 1.0, 0.0]])
    rewards = torch.tensor([[0.0, 0.0, 1.0, 0.0]])
    adv, ret = L.gae_advantages(rewards, values, mask, gamma=1.0, lam=1.0)
    # gamma=lam=1: A_t = R - V_t on agent tokens; the observation token (0.9) is not a time step
    assert torch.allclose(adv, torch.tensor([[0.8, 0.0, 0.5, 0.0]]))
    assert torch.allclose(ret, torch.tensor([[1.0, 0.0, 1.0, 0.0]]))
