"""The policy losses of a minibatch update, one registry keyed by the method's switches (in the manner of verl's
``register_policy_loss``): ``update`` names the rule for peer responses, and the clipped rule comes in the ratio
granularities of ``ratio``. Each entry adapts one micro-batch's tensors to a pure function of ``graft.algo`` (the
paper's equation it cites) and returns the loss with its statistics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from graft.algo import RATIO_OBJECTIVES, hacpo_loss, luffy_objective
from graft.methods import Method


@dataclass(frozen=True)
class LossBatch:
    """One micro-batch as every policy loss reads it: [R, T] log-probs and mask, [R] per-response values."""

    logp: torch.Tensor
    old_logp: torch.Tensor
    advantages: torch.Tensor
    weights: torch.Tensor
    mask: torch.Tensor
    is_peer: torch.Tensor
    src_mean_ll: torch.Tensor
    """The source's mean generation log-prob of each response (HACPO's peer ratio)."""
    ref_logp: torch.Tensor | None
    """The reference policy's log-probs, where the method has a KL term (``kl_coef`` > 0)."""
    omega_src_learner: float
    """HACPO's capability ratio of the source to the learner."""
    update_index: int
    """Which minibatch update of the step this is (HACPO's rising peer clip bound)."""
    dual_clip: float | None


PolicyLoss = Callable[[LossBatch, Method], tuple[torch.Tensor, dict[str, torch.Tensor]]]
POLICY_LOSSES: dict[str, PolicyLoss] = {}


def register_policy_loss(name: str) -> Callable[[PolicyLoss], PolicyLoss]:
    def register(loss: PolicyLoss) -> PolicyLoss:
        if name in POLICY_LOSSES:
            raise ValueError(f"policy loss {name!r} is registered twice")
        POLICY_LOSSES[name] = loss
        return loss

    return register


def loss_key(method: Method) -> str:
    """The registry key of a method: ``clipped/<ratio>`` for Eq. 10's clipped rule (also the own responses of the
    NLL rule, whose peer responses take SGT's NLL apart), else the update rule's name."""
    return f"clipped/{method.ratio}" if method.update in ("clipped", "nll") else method.update


def policy_loss(method: Method) -> PolicyLoss:
    return POLICY_LOSSES[loss_key(method)]


def _clipped(ratio: str) -> PolicyLoss:
    objective = RATIO_OBJECTIVES[ratio]

    def loss(b: LossBatch, method: Method) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        return objective(
            b.logp, b.old_logp, b.advantages, b.weights, b.mask, method.eps_low, method.eps_high,
            is_peer=b.is_peer, dual_clip=b.dual_clip,
        )  # fmt: skip

    return loss


for _ratio in RATIO_OBJECTIVES:
    register_policy_loss(f"clipped/{_ratio}")(_clipped(_ratio))


@register_policy_loss("luffy")
def _luffy(b: LossBatch, method: Method) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    return luffy_objective(
        b.logp, b.old_logp, b.advantages, b.weights, b.mask, b.is_peer, method.eps_low, method.eps_high,
        gamma=method.luffy_gamma, dual_clip=b.dual_clip,
    )  # fmt: skip


@register_policy_loss("hacpo")
def _hacpo(b: LossBatch, method: Method) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    return hacpo_loss(
        b.logp, b.old_logp, b.ref_logp, b.mask, b.is_peer, b.advantages, b.src_mean_ll, b.omega_src_learner,
        b.update_index, clip_low=method.hacpo_clip_low, clip_high=method.hacpo_clip_high,
        cross_delta=method.hacpo_cross_delta, cross_step=method.hacpo_cross_step, kl_coef=method.kl_coef,
    )  # fmt: skip
