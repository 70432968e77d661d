"""The policy-loss registry (graft/train/losses.py): every method's switches name a registered loss, and each entry
is the pure function of graft.algo it adapts."""

from __future__ import annotations

import contextlib
import dataclasses
import typing

import torch

from graft.algo import RATIO_OBJECTIVES, hacpo_loss, luffy_objective
from graft.errors import ConfigError
from graft.methods import PRESETS, Method, get_method
from graft.train.losses import POLICY_LOSSES, LossBatch, loss_key, policy_loss


def test_every_combination_of_update_and_ratio_has_a_loss_and_every_loss_a_user():
    hints = typing.get_type_hints(Method)
    keys = set()
    for update in typing.get_args(hints["update"]):
        for ratio in typing.get_args(hints["ratio"]):
            base = get_method("hacpo" if update == "hacpo" else "graft", {})
            with contextlib.suppress(ConfigError):  # a combination the method record refuses runs nothing
                keys.add(loss_key(dataclasses.replace(base, update=update, ratio=ratio)))
    assert keys == set(POLICY_LOSSES)
    assert {loss_key(get_method(name, {})) for name in PRESETS} <= set(POLICY_LOSSES)


def _batch(seed: int = 0) -> LossBatch:
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(4, 6, generator=g, dtype=torch.float64)
    mask = torch.ones(4, 6, dtype=torch.float64)
    mask[1, 4:] = 0
    return LossBatch(
        logp=logp,
        old_logp=logp + 0.1 * torch.randn(4, 6, generator=g, dtype=torch.float64),
        advantages=torch.tensor([1.0, -1.0, 0.5, -0.5], dtype=torch.float64),
        weights=torch.tensor([1.0, 1.0, 0.9, 0.0], dtype=torch.float64),
        mask=mask,
        is_peer=torch.tensor([False, False, True, True]),
        src_mean_ll=torch.tensor([-0.4, -0.5, -0.45, -0.6], dtype=torch.float64),
        capability_ratio=torch.tensor([1.0, 1.0, 1.3, 1.3], dtype=torch.float64),
        ref_logp=logp - 0.05,
        update_index=1,
        dual_clip=None,
    )


def test_each_entry_is_the_algo_function_it_adapts():
    b = _batch()
    graft, luffy, hacpo = get_method("graft", {}), get_method("graft", {}), get_method("hacpo", {})
    luffy = dataclasses.replace(luffy, update="luffy")
    expected = RATIO_OBJECTIVES["token"](
        b.logp, b.old_logp, b.advantages, b.weights, b.mask, graft.eps_low, graft.eps_high, is_peer=b.is_peer
    )[0]
    assert torch.equal(policy_loss(graft)(b, graft)[0], expected)
    expected = luffy_objective(
        b.logp, b.old_logp, b.advantages, b.weights, b.mask, b.is_peer, luffy.eps_low, luffy.eps_high,
        gamma=luffy.luffy_gamma,
    )[0]  # fmt: skip
    assert torch.equal(policy_loss(luffy)(b, luffy)[0], expected)
    expected = hacpo_loss(
        b.logp, b.old_logp, b.ref_logp, b.mask, b.is_peer, b.advantages, b.src_mean_ll, 1.3, 1,
        clip_low=hacpo.hacpo_clip_low, clip_high=hacpo.hacpo_clip_high, cross_delta=hacpo.hacpo_cross_delta,
        cross_step=hacpo.hacpo_cross_step, kl_coef=hacpo.kl_coef,
    )[0]  # fmt: skip
    assert torch.equal(policy_loss(hacpo)(b, hacpo)[0], expected)
    assert loss_key(get_method("sgt", {})).startswith("clipped/")  # SGT's own responses: Eq. 10; its NLL apart
