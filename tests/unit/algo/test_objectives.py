"""Eq. 10 against an independent float64 computation written from the formula, plus its variants."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from graft.algo import (
    clipped_token_objective,
    luffy_objective,
    sequence_ratio_objective,
    sgt_nll,
)

F64 = torch.float64
EPS_LOW, EPS_HIGH = 0.2, 0.28
CLIP = {"eps_low": EPS_LOW, "eps_high": EPS_HIGH}
LUFFY = {**CLIP, "gamma": 0.1}


def reference_eq10(logp, old_logp, adv, w, mask, eps_low=EPS_LOW, eps_high=EPS_HIGH):
    """J of Eq. 10 and dJ/dlogp, in numpy float64, straight from the formula."""
    logp, old_logp, adv, w, mask = (np.asarray(x, dtype=np.float64) for x in (logp, old_logp, adv, w, mask))
    kept = mask * (w[:, None] > 0)
    n_tok = kept.sum()
    rho = np.exp(logp - old_logp)
    a = adv[:, None]
    unclipped = rho * a
    clipped = np.clip(rho, 1 - eps_low, 1 + eps_high) * a
    per_token = np.minimum(unclipped, clipped)
    value = (w[:, None] * per_token * kept).sum() / max(n_tok, 1.0)
    # d min(rho a, clip(rho) a) / d logp = rho a where the unclipped branch is the min, 0 where the clip binds
    binds = clipped < unclipped
    grad = w[:, None] * a * rho * (~binds) * kept / max(n_tok, 1.0)
    return value, grad


def random_batch(seed, b=6, t=9):
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(b, t, generator=g, dtype=F64) * 3
    old_logp = logp + torch.randn(b, t, generator=g, dtype=F64) * 0.3
    adv = torch.randn(b, generator=g, dtype=F64)
    w = torch.rand(b, generator=g, dtype=F64)
    w[0] = 0.0
    w[1] = 1.0
    mask = torch.rand(b, t, generator=g) < 0.8
    return logp, old_logp, adv, w, mask


def test_matches_independent_float64_reference():
    for seed in range(20):
        logp, old_logp, adv, w, mask = random_batch(seed)
        x = logp.clone().requires_grad_(True)
        loss, _ = clipped_token_objective(x, old_logp, adv, w, mask, **CLIP)
        loss.backward()
        value, grad = reference_eq10(logp, old_logp, adv, w, mask)
        np.testing.assert_allclose(loss.item(), -value, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(x.grad.numpy(), -grad, rtol=1e-10, atol=1e-12)


def test_hand_worked_small_case():
    # rho = [[1.5, 1.0], [0.5, 1.0]]; a = [1, -1]; w = [1, 0.5]
    old = torch.zeros(2, 2, dtype=F64)
    logp = torch.log(torch.tensor([[1.5, 1.0], [0.5, 1.0]], dtype=F64))
    loss, stats = clipped_token_objective(
        logp,
        old,
        torch.tensor([1.0, -1.0], dtype=F64),
        torch.tensor([1.0, 0.5], dtype=F64),
        torch.ones(2, 2, dtype=torch.bool),
        **CLIP,
    )
    # row 0: min(1.5, 1.28) + 1 = 2.28; row 1: 0.5 * (min(-0.5, -0.8) + -1) = -0.9; over 4 tokens
    torch.testing.assert_close(loss, torch.tensor(-(2.28 - 0.9) / 4, dtype=F64))
    assert stats["clip_frac"].item() == 0.5 and stats["tokens"].item() == 4


def test_all_unit_weights_reduce_to_grpo_eq2():
    logp, old_logp, adv, _, mask = random_batch(3)
    ones = torch.ones_like(adv)
    loss, _ = clipped_token_objective(logp, old_logp, adv, ones, mask, **CLIP)
    value, _ = reference_eq10(logp, old_logp, adv, ones, mask)
    rho = torch.exp(logp - old_logp)
    a = adv[:, None]
    eq2 = torch.minimum(rho * a, rho.clamp(0.8, 1.28) * a)[mask].sum() / mask.sum()
    torch.testing.assert_close(loss, -eq2)
    np.testing.assert_allclose(value, eq2.item(), rtol=1e-12)


def test_empty_mask_gives_zero_loss_and_zero_grad():
    logp = torch.zeros(3, 4, dtype=F64, requires_grad=True)
    loss, stats = clipped_token_objective(
        logp,
        torch.zeros(3, 4, dtype=F64),
        torch.ones(3, dtype=F64),
        torch.ones(3, dtype=F64),
        torch.zeros(3, 4, dtype=torch.bool),
        **CLIP,
    )
    loss.backward()
    assert loss.item() == 0.0 and stats["clip_frac"].item() == 0.0 and stats["tokens"].item() == 0
    assert torch.equal(logp.grad, torch.zeros(3, 4, dtype=F64))


def test_dropped_responses_do_not_enter_the_denominator():
    logp, old_logp, adv, w, mask = random_batch(5)
    loss_all, _ = clipped_token_objective(logp, old_logp, adv, w, mask, **CLIP)
    keep = w > 0
    loss_kept, _ = clipped_token_objective(logp[keep], old_logp[keep], adv[keep], w[keep], mask[keep], **CLIP)
    torch.testing.assert_close(loss_all, loss_kept)


def test_first_minibatch_ratio_is_one_and_nothing_clips():
    logp, _, adv, w, mask = random_batch(8)
    _, stats = clipped_token_objective(logp, logp, adv, w, mask, **CLIP)
    assert stats["clip_frac"].item() == 0.0


def test_own_and_peer_clip_statistics():
    old = torch.zeros(2, 2, dtype=F64)
    logp = torch.log(torch.tensor([[2.0, 1.0], [2.0, 2.0]], dtype=F64))
    _, stats = clipped_token_objective(
        logp,
        old,
        torch.ones(2, dtype=F64),
        torch.ones(2, dtype=F64),
        torch.ones(2, 2, dtype=torch.bool),
        is_peer=torch.tensor([False, True]),
        **CLIP,
    )
    assert stats["clip_frac_own"].item() == 0.5 and stats["clip_frac_peer"].item() == 1.0
    assert stats["tokens_own"].item() == 2 and stats["tokens_peer"].item() == 2


@settings(max_examples=200)
@given(
    st.lists(st.floats(-1.5, 1.5), min_size=1, max_size=12),
    st.sampled_from([-1.0, -0.3, 0.4, 2.0]),
)
def test_gradient_zero_exactly_where_the_clip_binds(log_ratios, a):
    log_ratio = torch.tensor([log_ratios], dtype=F64)
    # keep clear of the clip boundaries, where the gradient is a matter of convention
    rho = torch.exp(log_ratio)
    near = ((rho - (1 - EPS_LOW)).abs() < 1e-6) | ((rho - (1 + EPS_HIGH)).abs() < 1e-6)
    if near.any():
        return
    x = log_ratio.clone().requires_grad_(True)
    loss, _ = clipped_token_objective(
        x,
        torch.zeros_like(x),
        torch.tensor([a], dtype=F64),
        torch.ones(1, dtype=F64),
        torch.ones_like(x, dtype=torch.bool),
        **CLIP,
    )
    loss.backward()
    binds = (rho > 1 + EPS_HIGH) if a > 0 else (rho < 1 - EPS_LOW)
    assert (x.grad[binds] == 0).all()
    assert (x.grad[~binds] != 0).all()
    # the gradient pushes log-prob up for a > 0 and down for a < 0 (loss is the negative objective)
    assert ((x.grad[~binds] < 0) == (a > 0)).all()


def test_sequence_ratio_equals_token_ratio_when_ratios_are_constant_per_row():
    logp, _, adv, w, mask = random_batch(11)
    shift = torch.tensor([0.1, -0.05, 0.4, -0.3, 0.0, 0.2], dtype=F64)[:, None]
    old = logp - shift
    a, _ = clipped_token_objective(logp, old, adv, w, mask, **CLIP)
    b, _ = sequence_ratio_objective(logp, old, adv, w, mask, **CLIP)
    torch.testing.assert_close(a, b)


def test_sequence_ratio_reference():
    logp, old_logp, adv, w, mask = random_batch(12)
    loss, _ = sequence_ratio_objective(logp, old_logp, adv, w, mask, **CLIP)
    lr = torch.where(mask, logp - old_logp, torch.zeros_like(logp)).sum(-1) / mask.sum(-1).clamp(min=1)
    s = torch.exp(lr)
    per_seq = torch.minimum(s * adv, s.clamp(0.8, 1.28) * adv)
    kept = mask & (w > 0)[:, None]
    expected = (w * per_seq * kept.sum(-1)).sum() / kept.sum()
    torch.testing.assert_close(loss, -expected)


def test_luffy_peer_tokens_value_and_gradient():
    p = torch.tensor([[0.5, 0.05]], dtype=F64)
    logp = torch.log(p).requires_grad_(True)
    loss, stats = luffy_objective(
        logp,
        torch.zeros(1, 2, dtype=F64) - 5.0,
        torch.tensor([2.0], dtype=F64),
        torch.ones(1, dtype=F64),
        torch.ones(1, 2, dtype=torch.bool),
        is_peer=torch.tensor([True]),
        **LUFFY,
    )
    f = p / (p + 0.1)
    torch.testing.assert_close(loss, -(2.0 * f).sum() / 2)
    loss.backward()
    # d f(exp(l)) / dl = gamma p / (p + gamma)^2; the old log-prob plays no role and nothing clips
    torch.testing.assert_close(logp.grad, -(2.0 * 0.1 * p / (p + 0.1) ** 2) / 2)
    assert stats["clip_frac"].item() == 0.0


def test_luffy_own_tokens_match_eq10():
    logp, old_logp, adv, w, mask = random_batch(13)
    w = torch.ones_like(w)
    a, _ = luffy_objective(logp, old_logp, adv, w, mask, is_peer=torch.zeros(6, dtype=torch.bool), **LUFFY)
    b, _ = clipped_token_objective(logp, old_logp, adv, w, mask, **CLIP)
    torch.testing.assert_close(a, b)


def test_sgt_nll_hand_worked():
    logp = torch.tensor([[-1.0, -3.0, 0.0], [-0.5, 0.0, 0.0], [-9.0, -9.0, -9.0]], dtype=F64)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 0, 0]], dtype=torch.bool)
    # per-response token means 2.0 and 0.5; the empty third response is ignored
    torch.testing.assert_close(sgt_nll(logp, mask), torch.tensor(1.25, dtype=F64))
    assert sgt_nll(logp, torch.zeros_like(mask)).item() == 0.0


def _one_token(ratio: float, advantage: float):
    logp = torch.tensor([[float(np.log(ratio))]], dtype=F64)
    return logp, torch.zeros(1, 1, dtype=F64), torch.tensor([advantage], dtype=F64), torch.ones(1, dtype=F64)


def test_dual_clip_hand_worked_case():
    # ratio 4, advantage -1: min(4 * -1, clip(4, 0.8, 1.28) * -1) = -4, loss 4; verl's cap c = 3: max(-4, -3 * 1)
    logp, old, adv, w = _one_token(4.0, -1.0)
    mask = torch.ones(1, 1, dtype=torch.bool)
    loss, stats = clipped_token_objective(logp, old, adv, w, mask, **CLIP)
    assert loss.item() == pytest.approx(4.0)
    assert stats["clip_frac"].item() == 0.0
    loss, stats = clipped_token_objective(logp, old, adv, w, mask, dual_clip=3.0, **CLIP)
    assert loss.item() == pytest.approx(3.0)
    assert stats["clip_frac"].item() == 1.0  # the dual clip binds: no gradient from this token


def test_dual_clip_changes_only_negative_advantages_beyond_the_cap():
    mask = torch.ones(1, 1, dtype=torch.bool)
    for ratio, adv in [(4.0, 1.0), (2.5, -1.0), (0.5, -1.0), (1.0, -2.0)]:
        logp, old, a, w = _one_token(ratio, adv)
        plain, _ = clipped_token_objective(logp, old, a, w, mask, **CLIP)
        capped, _ = clipped_token_objective(logp, old, a, w, mask, dual_clip=3.0, **CLIP)
        assert capped.item() == pytest.approx(plain.item())


@given(st.integers(0, 10_000), st.floats(1.01, 10.0))
@settings(max_examples=40, deadline=None)
def test_dual_clip_never_raises_the_loss_and_equals_verl_form(seed, cap):
    logp, old_logp, adv, w, mask = random_batch(seed)
    logp = logp + torch.randn_like(logp) * 1.5  # ratios far from 1
    plain, _ = clipped_token_objective(logp, old_logp, adv, torch.ones_like(w), mask, **CLIP)
    capped, _ = clipped_token_objective(logp, old_logp, adv, torch.ones_like(w), mask, dual_clip=cap, **CLIP)
    assert capped.item() <= plain.item() + 1e-12
    # verl's form, per token: pg = max(-a rho, -a clip(rho)); for a < 0: min(pg, -a c)
    rho = torch.exp(logp - old_logp)
    a = adv.unsqueeze(-1)
    pg = torch.maximum(-a * rho, -a * rho.clamp(1 - EPS_LOW, 1 + EPS_HIGH))
    pg = torch.where(a < 0, torch.minimum(pg, -a * cap), pg)
    expected = (pg * mask).sum() / mask.sum()
    assert capped.item() == pytest.approx(expected.item(), rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("objective", [clipped_token_objective, sequence_ratio_objective, "luffy"])
@pytest.mark.parametrize("bad", [float("-inf"), float("nan"), float("inf")])
def test_a_non_finite_log_prob_at_a_padded_position_changes_nothing(objective, bad):
    logp, old_logp, adv, w, mask = random_batch(3)
    is_peer = torch.tensor([False, False, True, True, False, True])
    dirty_logp, dirty_old = logp.clone(), old_logp.clone()
    dirty_logp[~mask], dirty_old[~mask] = bad, bad

    def run(lp, old):
        x = lp.clone().requires_grad_(True)
        if objective == "luffy":
            loss, _ = luffy_objective(x, old, adv, w, mask, is_peer, **LUFFY)
        else:
            loss, _ = objective(x, old, adv, w, mask, is_peer=is_peer, **CLIP)
        loss.backward()
        return loss, x.grad

    clean_loss, clean_grad = run(logp, old_logp)
    loss, grad = run(dirty_logp, dirty_old)
    assert torch.isfinite(loss) and torch.isfinite(grad).all()
    assert loss.item() == clean_loss.item()
    assert torch.equal(grad, clean_grad)


def test_sequence_ratio_on_peer_rows_only_keeps_the_token_ratio_for_own_rows():
    logp, old_logp, adv, w, mask = random_batch(5)
    w = torch.ones_like(w)
    is_peer = torch.tensor([True, False, True, False, False, True])
    mixed, _ = sequence_ratio_objective(logp, old_logp, adv, w, mask, is_peer=is_peer, peer_only=True, **CLIP)
    # the same value from the two pure objectives, each on its own rows, re-weighted by token counts
    own, peer = ~is_peer, is_peer
    tok_own, _ = clipped_token_objective(logp[own], old_logp[own], adv[own], w[own], mask[own], **CLIP)
    seq_peer, _ = sequence_ratio_objective(logp[peer], old_logp[peer], adv[peer], w[peer], mask[peer], **CLIP)
    n_own, n_peer = mask[own].sum(), mask[peer].sum()
    expected = (tok_own * n_own + seq_peer * n_peer) / (n_own + n_peer)
    assert mixed.item() == pytest.approx(expected.item(), rel=1e-12)
    all_peer = torch.ones(6, dtype=torch.bool)
    every, _ = sequence_ratio_objective(logp, old_logp, adv, w, mask, is_peer=all_peer, peer_only=True, **CLIP)
    plain, _ = sequence_ratio_objective(logp, old_logp, adv, w, mask, **CLIP)
    assert every.item() == plain.item()
