import math

import pytest
import torch

from graft.algo import (
    CapabilityTracker,
    capability_ratio,
    hacpo_advantages,
    hacpo_cross_clip_lower,
    hacpo_loss,
    hacpo_own_objective,
    hacpo_peer_objective,
    low_var_kl,
)
from graft.methods import get_method

F64 = torch.float64
HACPO = get_method("hacpo", {})
CLIP = {"clip_low": HACPO.hacpo_clip_low, "clip_high": HACPO.hacpo_clip_high}
SETTINGS = {**CLIP, "cross_delta": HACPO.hacpo_cross_delta, "cross_step": HACPO.hacpo_cross_step}


def test_capability_tracker_window_and_state():
    tracker = CapabilityTracker(window=5)
    assert tracker.value == 1.0
    for r in [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]:
        tracker.update(r)
    assert tracker.value == pytest.approx(0.4)  # mean of the last five
    other = CapabilityTracker(window=5)
    other.load_state_dict(tracker.state_dict())
    assert other.value == tracker.value
    zero = CapabilityTracker(window=5)
    zero.update(0.0)
    assert zero.value == 1e-8


def test_capability_ratio_is_clipped():
    assert capability_ratio(0.5, 0.25) == 2.0
    assert capability_ratio(1.0, 1e-8) == 10.0
    assert capability_ratio(1e-8, 1.0) == 0.1


def test_hacpo_advantages_hand_worked():
    own = torch.zeros(1, 4, dtype=F64)
    peer = torch.tensor([[1.0, 1.0, 0.0, 0.0]], dtype=F64)
    std = math.sqrt(1.5 / 7)
    own_adv, _peer_adv = hacpo_advantages(own, peer, omega_own_peer=1.0)
    torch.testing.assert_close(own_adv, torch.full((1, 4), -0.25 / (std + 1e-6), dtype=F64))
    # omega = 2 doubles the peer's weight in the baseline: mu = (0 + 2 * 2) / 8 = 0.5
    own_adv2, peer_adv2 = hacpo_advantages(own, peer, omega_own_peer=2.0)
    torch.testing.assert_close(own_adv2, torch.full((1, 4), -0.5 / (std + 1e-6), dtype=F64))
    torch.testing.assert_close(peer_adv2[0, 0], torch.tensor(0.5 / (std + 1e-6), dtype=F64))


def test_hacpo_advantages_special_cases():
    ones = torch.ones(1, 4, dtype=F64)
    own_adv, peer_adv = hacpo_advantages(ones, ones, omega_own_peer=10.0)
    assert (own_adv == 0).all() and (peer_adv == 0).all()  # all-equal joint group: plain mean
    peer = torch.tensor([[1.0, 1.0, 1.0, 0.0]], dtype=F64)
    own_adv, peer_adv = hacpo_advantages(ones, peer, omega_own_peer=10.0)
    # mu = (4 + 10 * 3) / 8 > 1: falls back to the own mean, 1
    assert (own_adv.abs() < 1e-12).all()
    std = torch.cat([ones, peer], -1).std()
    torch.testing.assert_close(peer_adv[0, 3], -1.0 / (std + 1e-6))


def test_cross_clip_lower_rises_per_update():
    rising = (HACPO.hacpo_cross_delta, HACPO.hacpo_cross_step)
    assert hacpo_cross_clip_lower(0, *rising) == pytest.approx(0.8)
    assert hacpo_cross_clip_lower(4, *rising) == pytest.approx(0.9)
    assert hacpo_cross_clip_lower(100, *rising) == 1.0
    with pytest.raises(ValueError):
        hacpo_cross_clip_lower(-1, *rising)


def test_own_objective_is_tightly_clipped():
    old = torch.zeros(1, 2, dtype=F64)
    logp = torch.full((1, 2), 0.01, dtype=F64, requires_grad=True)  # s = e^0.01 > 1 + 4e-4
    obj = hacpo_own_objective(logp, old, torch.tensor([1.0], dtype=F64), torch.ones(1, 2, dtype=torch.bool), **CLIP)
    torch.testing.assert_close(obj, torch.tensor([1.0004], dtype=F64))
    obj.sum().backward()
    assert (logp.grad == 0).all()


def test_peer_objective_clip_and_stop_gradient():
    mask = torch.ones(1, 2, dtype=torch.bool)
    low = torch.full((1, 2), -1.0, dtype=F64, requires_grad=True)  # s = e^-1 < 0.8: clipped to the bound
    obj = hacpo_peer_objective(low, mask, torch.zeros(1, dtype=F64), torch.tensor([2.0], dtype=F64), 0.5, 0.8)
    torch.testing.assert_close(obj, torch.tensor([0.8 * 0.8 * 0.5 * 2.0], dtype=F64))
    obj.sum().backward()
    assert (low.grad == 0).all()
    inside = torch.full((1, 2), -0.1, dtype=F64, requires_grad=True)
    obj = hacpo_peer_objective(inside, mask, torch.zeros(1, dtype=F64), torch.tensor([2.0], dtype=F64), 0.5, 0.8)
    s = math.exp(-0.1)
    torch.testing.assert_close(obj, torch.tensor([s * s * 0.5 * 2.0], dtype=F64))
    obj.sum().backward()
    # d/dl of s * sg(s): s * s / 2 per token (mean over two tokens), times omega * a
    torch.testing.assert_close(inside.grad, torch.full((1, 2), s * s * 0.5 * 2.0 / 2, dtype=F64))


def test_low_var_kl_zero_at_reference_and_positive_elsewhere():
    mask = torch.ones(2, 3, dtype=torch.bool)
    logp = torch.randn(2, 3, dtype=F64)
    assert torch.equal(low_var_kl(logp, logp, mask), torch.zeros(2, dtype=F64))
    assert (low_var_kl(logp, logp + 0.3, mask) > 0).all()


def test_hacpo_loss_combines_own_peer_and_kl():
    mask = torch.ones(2, 2, dtype=torch.bool)
    logp = torch.zeros(2, 2, dtype=F64)
    ref = torch.full((2, 2), -0.5, dtype=F64)
    is_peer = torch.tensor([False, True])
    adv = torch.tensor([1.0, 1.0], dtype=F64)
    src = torch.tensor([0.0, 0.0], dtype=F64)
    loss, stats = hacpo_loss(
        logp, logp, ref, mask, is_peer, adv, src, omega_src_learner=2.0, update_index=0, **SETTINGS, kl_coef=1e-3
    )
    kl = math.exp(-0.5) + 0.5 - 1
    # own: s = 1 -> 1; peer: s = 1 -> 1 * 1 * 2 * 1; sequence mean = 1.5
    torch.testing.assert_close(loss, torch.tensor(-1.5 + 1e-3 * kl, dtype=F64))
    assert stats["kl"].item() == pytest.approx(kl)


def test_hacpo_loss_leaves_out_a_response_with_no_tokens():
    # two own rows with tokens and advantages +1 / -1 at ratio 1, plus an empty peer row with advantage 5:
    # counting the empty row with ratio 1 would add its bare advantage (loss -(1 - 1 + 5) / 3)
    logp = torch.tensor([[-1.0, -1.0], [-2.0, 0.0], [0.0, 0.0]], dtype=F64)
    mask = torch.tensor([[True, True], [True, False], [False, False]])
    is_peer = torch.tensor([False, False, True])
    adv = torch.tensor([1.0, -1.0, 5.0], dtype=F64)
    src = torch.zeros(3, dtype=F64)
    loss, _ = hacpo_loss(logp, logp.clone(), None, mask, is_peer, adv, src, 1.0, 0, **SETTINGS, kl_coef=0.0)
    assert loss.item() == pytest.approx(0.0)  # -(1 - 1) / 2
    full, _ = hacpo_loss(
        logp[:2], logp[:2].clone(), None, mask[:2], is_peer[:2], adv[:2], src[:2], 1.0, 0, **SETTINGS, kl_coef=1e-3
    )
    assert loss.item() == pytest.approx(full.item())


def test_hacpo_loss_ignores_non_finite_values_at_padded_positions():
    logp = torch.tensor([[-1.0, -0.5], [-2.0, 0.0]], dtype=F64)
    mask = torch.tensor([[True, True], [True, False]])
    dirty = logp.clone()
    dirty[1, 1] = float("nan")
    ref = logp.clone() - 0.1
    args = (mask, torch.tensor([False, True]), torch.tensor([0.5, -0.5], dtype=F64), torch.full((2,), -1.5, dtype=F64))
    clean, _ = hacpo_loss(logp, logp.clone(), ref, *args, 1.0, 1, **SETTINGS, kl_coef=1e-3)
    x = dirty.clone().requires_grad_(True)
    loss, _ = hacpo_loss(x, dirty.clone(), ref, *args, 1.0, 1, **SETTINGS, kl_coef=1e-3)
    loss.backward()
    assert loss.item() == pytest.approx(clean.item()) and torch.isfinite(x.grad).all()
