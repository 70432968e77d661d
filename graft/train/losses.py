"""The update rules of a minibatch update, keyed by the method's switches (in the manner of verl's
``register_policy_loss``): ``UPDATES`` says what the ``update`` rule for peer responses asks of the exchange and
of the minibatch, and ``POLICY_LOSSES`` holds the losses, the clipped rule in the ratio granularities of ``ratio``.
Each loss adapts one micro-batch's tensors to a pure function of ``graft.algo`` (the paper's equation it cites) and
returns the loss with its statistics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from graft.algo import RATIO_OBJECTIVES, hacpo_loss, luffy_objective
from graft.methods import Method, Registry


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
    capability_ratio: torch.Tensor
    """HACPO's capability ratio of each response's source to the learner (1 for own responses)."""
    ref_logp: torch.Tensor | None
    """The reference policy's log-probs, where the method has a KL term (``kl_coef`` > 0)."""
    update_index: int
    """Which minibatch update of the step this is (HACPO's rising peer clip bound)."""
    dual_clip: float | None


@dataclass(frozen=True)
class UpdateRule:
    """What an update rule asks of the exchange and of the minibatch besides its loss."""

    ratio_loss: bool
    """The policy loss is Eq. 10's clipped rule in the method's ``ratio`` granularity (``clipped/<ratio>``); else
    the loss registered under the rule's own name."""
    peer_old_logprobs: bool = False
    """The ratio of a sent response's tokens divides by the receiver's behaviour log-probs: it scores them."""
    source_trained_logprobs: bool = False
    """The source's mean log-prob of a sent response comes from its training forward where that was recomputed
    (HACPO's official code), not from its generation."""
    peer_nll_only: bool = False
    """Sent responses enter only a supervised term beside the own responses' policy loss (SGT)."""
    response_mean: bool = False
    """The minibatch loss is a mean over responses with tokens, not over kept tokens."""


UPDATES = Registry("update")
"""The update rules, by the method's ``update``."""
UPDATES.register("clipped")(UpdateRule(ratio_loss=True, peer_old_logprobs=True))
UPDATES.register("luffy")(UpdateRule(ratio_loss=False))
UPDATES.register("hacpo")(UpdateRule(ratio_loss=False, source_trained_logprobs=True, response_mean=True))
UPDATES.register("nll")(UpdateRule(ratio_loss=True, peer_nll_only=True))

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
    return f"clipped/{method.ratio}" if UPDATES.of(method).ratio_loss else method.update


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
        b.logp, b.old_logp, b.ref_logp, b.mask, b.is_peer, b.advantages, b.src_mean_ll, b.capability_ratio,
        b.update_index, clip_low=method.hacpo_clip_low, clip_high=method.hacpo_clip_high,
        cross_delta=method.hacpo_cross_delta, cross_step=method.hacpo_cross_step, kl_coef=method.kl_coef,
    )  # fmt: skip
