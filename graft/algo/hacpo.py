"""HACPO's pieces (Zhang et al., arXiv 2603.02604), as the GRAFT paper ran the baseline (docs/design.md section 2).

Capability P_k is agent k's mean reward over the last 5 steps; omega_kj = P_k / P_j clipped to [0.1, 10].
Advantages use a capability-weighted baseline over the joint 2n group; own responses use a tightly clipped
sequence ratio, peer responses a sequence ratio against the source's generation log-probs with a lower clip
bound that rises with the minibatch update index.
"""

from __future__ import annotations

from collections import deque

import torch

from graft.algo.advantages import ADVANTAGE_EPS, unbiased_std
from graft.algo.gate import mean_token_logprob


class CapabilityTracker:
    """P_k: mean reward of one agent over the last ``window`` steps (HACPO Eq. 6).

    Before any step the capability is 1.0, so the first step's ratios are 1. Values are floored at
    ``floor`` so that ratios stay finite when an agent has solved nothing yet.
    """

    def __init__(self, window: int, floor: float = 1e-8):
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.window = window
        self.floor = floor
        self._history: deque[float] = deque(maxlen=window)

    def update(self, mean_reward: float) -> None:
        self._history.append(float(mean_reward))

    @property
    def value(self) -> float:
        if not self._history:
            return 1.0
        return max(sum(self._history) / len(self._history), self.floor)

    def state_dict(self) -> dict:
        return {"window": self.window, "floor": self.floor, "history": list(self._history)}

    def load_state_dict(self, state: dict) -> None:
        self.window, self.floor = state["window"], state["floor"]
        self._history = deque(state["history"], maxlen=self.window)


def capability_ratio(p_num: float, p_den: float, low: float = 0.1, high: float = 10.0) -> float:
    """omega = P_num / P_den clipped to [low, high]."""
    return min(max(p_num / p_den, low), high)


def hacpo_advantages(
    own_rewards: torch.Tensor, peer_rewards: torch.Tensor, omega_own_peer: float, eps: float = ADVANTAGE_EPS
) -> tuple[torch.Tensor, torch.Tensor]:
    """HACPO's capability-aware advantage for learner k with peer j (HACPO Eqs. 5-6).

    mu_k = (sum own + omega_kj * sum peer) / (n + m); sigma the unbiased std of all n + m rewards;
    a = (R - mu_k) / (sigma + eps). An all-equal joint group uses its plain mean (advantage 0), and a
    baseline above 1 (possible for binary rewards once omega > 1) falls back to the own group's mean.
    The peer advantages are returned unscaled: ``hacpo_peer_objective`` multiplies them by omega_jk.

    Args:
        own_rewards: [G, n]; peer_rewards: [G, m]; omega_own_peer: omega_kj = P_k / P_j, clipped.

    Returns:
        (own_adv [G, n], peer_adv [G, m]).
    """
    own = own_rewards.to(torch.get_default_dtype()) if not own_rewards.is_floating_point() else own_rewards
    peer = peer_rewards.to(own.dtype)
    joint = torch.cat([own, peer], dim=-1)
    total = joint.shape[-1]
    mu = (own.sum(-1, keepdim=True) + omega_own_peer * peer.sum(-1, keepdim=True)) / total
    all_equal = (joint == joint[:, :1]).all(dim=-1, keepdim=True)
    mu = torch.where(all_equal, joint.mean(-1, keepdim=True), mu)
    mu = torch.where(mu > 1.0, own.mean(-1, keepdim=True), mu)
    adv = (joint - mu) / (unbiased_std(joint) + eps)
    n = own.shape[-1]
    return adv[:, :n], adv[:, n:]


def hacpo_cross_clip_lower(update_index: int, delta: float, step: float) -> float:
    """Lower clip bound of the peer ratio at the m-th minibatch update of a step.

    min(1, 1 - delta + m * step): with HACPO's settings (the ``hacpo`` preset: delta 0.2, step 0.025) 0.8 at the
    first update, rising by 0.025 per update.
    """
    if update_index < 0:
        raise ValueError(f"update_index must be >= 0, got {update_index}")
    return min(1.0, 1.0 - delta + update_index * step)


def hacpo_own_objective(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float,
    clip_high: float,
) -> torch.Tensor:
    """Per-response objective on own samples: sequence ratio s = exp(mean logp_new - mean logp_old),
    min(s a, clip(s, 1 - clip_low, 1 + clip_high) a). Returns [B]."""
    ratio = torch.exp(mean_token_logprob(logp, mask) - mean_token_logprob(old_logp.detach(), mask))
    adv = advantages.detach()
    return torch.minimum(ratio * adv, ratio.clamp(1.0 - clip_low, 1.0 + clip_high) * adv)


def hacpo_peer_objective(
    logp: torch.Tensor,
    mask: torch.Tensor,
    src_mean_ll: torch.Tensor,
    advantages: torch.Tensor,
    omega_src_learner: float | torch.Tensor,
    lower: float,
) -> torch.Tensor:
    """Per-response objective on peer samples (HACPO Eq. 59 with alpha = 1), no min:
    c = clip(s, lower, 1), s = exp(mean logp_theta^learner - mean logp_old^source); objective
    c * sg(c) * omega_jk * a. Returns [B]."""
    ratio = torch.exp(mean_token_logprob(logp, mask) - src_mean_ll.detach())
    clipped = ratio.clamp(lower, 1.0)
    return clipped * clipped.detach() * omega_src_learner * advantages.detach()


def low_var_kl(logp: torch.Tensor, ref_logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi_theta || pi_ref) per token, token-mean per response: [B].

    k3 = exp(ref - logp) - (ref - logp) - 1, clamped to [-10, 10] per token as verl's "low_var_kl" does.
    """
    diff = (ref_logp.detach() - logp).clamp(-20.0, 20.0)
    k3 = (torch.exp(diff) - diff - 1.0).clamp(-10.0, 10.0)
    return mean_token_logprob(k3, mask)


def hacpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    ref_logp: torch.Tensor | None,
    mask: torch.Tensor,
    is_peer: torch.Tensor,
    advantages: torch.Tensor,
    src_mean_ll: torch.Tensor,
    omega_src_learner: float | torch.Tensor,
    update_index: int,
    *,
    clip_low: float,
    clip_high: float,
    cross_delta: float,
    cross_step: float,
    kl_coef: float,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """HACPO's minibatch loss: sequence-mean of the own and peer objectives plus kl_coef * KL on own samples.

    A response with no token under the learner's tokenization (possible for a re-tokenized peer string) has no
    sequence ratio: it is left out of the sequence mean and of the KL, rather than counted with ratio 1 (which
    would add its bare advantage to the loss). Log-probs outside ``mask`` are never read.

    Args:
        logp, old_logp, ref_logp, mask: [B, T] under the learner's tokenization; old_logp of peer
            rows is unused.
        is_peer: bool [B]; advantages [B] (peer ones unscaled); src_mean_ll [B] (own rows unused).
        omega_src_learner: omega_jk, one for every row or [B] (own rows unused).
        update_index: m, the minibatch update's index within the step.
    """
    keep = mask.bool()
    zero = torch.zeros_like(logp)
    logp, old_logp = torch.where(keep, logp, zero), torch.where(keep, old_logp.detach(), zero)
    peer = is_peer.bool()
    has_tokens = keep.any(dim=-1)
    own_obj = hacpo_own_objective(logp, old_logp, advantages, mask, clip_low, clip_high)
    lower = hacpo_cross_clip_lower(update_index, cross_delta, cross_step)
    peer_obj = hacpo_peer_objective(logp, mask, src_mean_ll, advantages, omega_src_learner, lower)
    objective = torch.where(peer, peer_obj, own_obj)
    objective = torch.where(has_tokens, objective, torch.zeros_like(objective))
    loss = -objective.sum() / has_tokens.sum().clamp(min=1)
    stats = {"cross_clip_lower": torch.tensor(lower)}
    own_rows = ~peer & has_tokens
    if ref_logp is not None and kl_coef > 0 and bool(own_rows.any()):
        ref_logp = torch.where(keep, ref_logp.detach(), zero)
        kl = low_var_kl(logp, ref_logp, mask)[own_rows].mean()
        loss = loss + kl_coef * kl
        stats["kl"] = kl.detach()
    return loss, stats
