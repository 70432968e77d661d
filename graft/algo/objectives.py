"""Per-minibatch policy losses: GRAFT's Eq. 10 and the update rules the ablations swap in.

Conventions shared by every function here:
- tensors are [B, T] per token and [B] per response; ``mask`` marks response tokens (EOS included when
  generated);
- a response is *kept* when its weight is > 0; the token-mean denominator counts the kept responses' tokens
  (paper Eq. 10: "sum over j in B of |o_j|" runs over the minibatch's responses, and responses the gate drops
  are removed before optimisation). Own responses have weight 1, so zero-advantage own groups still count,
  as in GRPO's token-mean;
- the returned loss is the negative objective (minimise it); stats are detached 0-d tensors;
- positions outside ``mask`` are never read: log-probs there are replaced before any arithmetic (a select, not a
  multiply), so a padded -inf or NaN can reach neither the loss nor its gradient.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

Stats = dict[str, torch.Tensor]


def clipped_surrogate(
    ratio: torch.Tensor,
    advantages: torch.Tensor,
    eps_low: float,
    eps_high: float,
    dual_clip: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """min(rho * a, clip(rho, 1 - eps_low, 1 + eps_high) * a), and where a clip binds.

    The clipped branch binds (and the token's gradient is zero) exactly when it is strictly smaller:
    a > 0 with rho > 1 + eps_high, or a < 0 with rho < 1 - eps_low.

    ``dual_clip``: None is Eq. 10 as written. A number c > 1 adds the dual clip of verl's default policy loss
    (``clip_ratio_c``, Ye et al. 2020): for a < 0 the objective is max(min(...), c * a), so a token whose ratio
    exceeds c stops pushing its probability down (ratio 4, a = -1: objective -4 without, -3 with c = 3). A
    token where the dual clip binds counts as clipped (its gradient is zero).
    """
    unclipped = ratio * advantages
    clipped = ratio.clamp(1.0 - eps_low, 1.0 + eps_high) * advantages
    objective = torch.minimum(unclipped, clipped)
    binds = clipped < unclipped
    if dual_clip is not None:
        floor = dual_clip * advantages
        dual = (advantages < 0) & (objective < floor)
        objective = torch.where(dual, floor.expand_as(objective), objective)
        binds = binds | dual
    return objective, binds


def _masked(logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Both log-prob tensors with 0 outside ``mask``, selected rather than multiplied, so that a non-finite value
    at a padded position cannot turn the loss or its gradient into NaN."""
    keep = mask.bool()
    zero = torch.zeros_like(logp)
    return torch.where(keep, logp, zero), torch.where(keep, old_logp.detach(), zero)


def _weighted_token_mean(
    per_token: torch.Tensor,
    clipped: torch.Tensor,
    weights: torch.Tensor,
    mask: torch.Tensor,
    is_peer: torch.Tensor | None,
) -> tuple[torch.Tensor, Stats]:
    """-(1 / sum_j |o_j|) sum_j w_j sum_t per_token[j, t] over kept responses, with clipping statistics."""
    kept = mask.bool() & (weights > 0).unsqueeze(-1)
    n_tokens = kept.sum().to(per_token.dtype)
    weighted = torch.where(kept, weights.unsqueeze(-1) * per_token, torch.zeros_like(per_token))
    objective = weighted.sum() / n_tokens.clamp(min=1.0)
    clipped_kept = clipped & kept
    stats: Stats = {
        "tokens": n_tokens.detach(),
        "clip_frac": (clipped_kept.sum() / n_tokens.clamp(min=1.0)).detach(),
    }
    if is_peer is not None:
        for name, rows in (("own", ~is_peer.bool()), ("peer", is_peer.bool())):
            side = kept & rows.unsqueeze(-1)
            count = side.sum().to(per_token.dtype)
            stats[f"tokens_{name}"] = count.detach()
            stats[f"clip_frac_{name}"] = ((clipped_kept & side).sum() / count.clamp(min=1.0)).detach()
    return -objective, stats


def clipped_token_objective(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    weights: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float,
    eps_high: float,
    *,
    is_peer: torch.Tensor | None = None,
    dual_clip: float | None = None,
) -> tuple[torch.Tensor, Stats]:
    """GRAFT's receiver objective, paper Eq. 10 (Eq. 2 when every weight is 1).

    J = (1 / sum_j |o_j^B|) sum_j w_j sum_t min(rho_t a_j, clip(rho_t, 1 - eps_low, 1 + eps_high) a_j),
    rho_t = pi_theta^B(o_t) / pi_old^B(o_t) (Eq. 9) for own and grafted tokens alike: the denominator is
    always the receiver's behaviour policy, never the peer's. Advantages and weights are constants.

    Args:
        logp: [B, T] log-probs under the current receiver policy (carries the gradient).
        old_logp: [B, T] log-probs under the receiver's behaviour policy (constant).
        advantages: [B] own or source-computed advantages.
        weights: [B] compatibility weights w(o) (Eq. 8); 1 for own responses; 0 drops a response.
        mask: [B, T] response-token mask.
        is_peer: optional bool [B]; adds own/peer token counts and clipped fractions to the stats.
        dual_clip: None (Eq. 10 as written) or verl's cap on negative-advantage ratios (``clipped_surrogate``).

    Returns:
        (loss = -J, stats with "clip_frac", "tokens" and, with is_peer, per-side values).
    """
    logp, old_logp = _masked(logp, old_logp, mask)
    ratio = torch.exp(logp - old_logp)
    adv = advantages.detach().unsqueeze(-1)
    per_token, clipped = clipped_surrogate(ratio, adv, eps_low, eps_high, dual_clip)
    return _weighted_token_mean(per_token, clipped, weights.detach(), mask, is_peer)


def sequence_ratio_objective(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    weights: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float,
    eps_high: float,
    *,
    is_peer: torch.Tensor | None = None,
    dual_clip: float | None = None,
    peer_only: bool = False,
) -> tuple[torch.Tensor, Stats]:
    """The "w/o token-level ratio" ablation (paper Table 2a): Eq. 10 with one ratio per response.

    The paper says only that the token-level ratio is replaced by a sequence-level one (Section 6.3: "replacing
    the token-level ratio with a sequence-level ratio"); we take the length-normalised (GSPO-style) ratio
    s_j = exp(mean_t(log pi_theta - log pi_old)) over the response's tokens, the only sequence ratio that stays
    comparable across the receiver's responses of different lengths. Everything else (clip range, weights,
    token-mean) stays as in Eq. 10, so only the ratio's granularity changes.

    ``peer_only``: the second reading of the ablation (preset ``graft_seq_ratio_peer``): only the responses that
    ``is_peer`` marks take the sequence ratio, own ones keep Eq. 9's token ratio; False: every response, own and
    peer alike (preset ``graft_seq_ratio``). Other arguments as in ``clipped_token_objective``.
    """
    logp, old_logp = _masked(logp, old_logp, mask)
    keep = mask.bool()
    token_log_ratio = logp - old_logp
    seq_log_ratio = token_log_ratio.sum(dim=-1) / keep.sum(dim=-1).clamp(min=1).to(logp.dtype)
    log_ratio = seq_log_ratio.unsqueeze(-1).expand_as(logp)
    if peer_only:
        if is_peer is None:
            raise ValueError("peer_only needs is_peer")
        log_ratio = torch.where(is_peer.bool().unsqueeze(-1), log_ratio, token_log_ratio)
    adv = advantages.detach().unsqueeze(-1)
    per_token, clipped = clipped_surrogate(torch.exp(log_ratio), adv, eps_low, eps_high, dual_clip)
    return _weighted_token_mean(per_token, clipped, weights.detach(), mask, is_peer)


def luffy_shaping(prob: torch.Tensor, gamma: float) -> torch.Tensor:
    """LUFFY's regularised importance shaping f(x) = x / (x + gamma) (Yan et al., 2025)."""
    return prob / (prob + gamma)


def luffy_objective(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    weights: torch.Tensor,
    mask: torch.Tensor,
    is_peer: torch.Tensor,
    eps_low: float,
    eps_high: float,
    *,
    gamma: float,
    dual_clip: float | None = None,
) -> tuple[torch.Tensor, Stats]:
    """ "LUFFY update" on GRAFT's selection (paper Appendix G).

    Peer tokens contribute f(pi_theta(o_t)) * a with the behaviour probability taken as 1 and no clipping;
    own tokens use the clipped surrogate of Eq. 10. Both are token-averaged together. The gate is replaced,
    so callers pass weight 1 for every response they keep. ``dual_clip`` acts on own tokens only.
    """
    logp, old_logp = _masked(logp, old_logp, mask)
    peer_rows = is_peer.bool().unsqueeze(-1)
    adv = advantages.detach().unsqueeze(-1)
    ratio = torch.exp(logp - old_logp)
    own_obj, own_clipped = clipped_surrogate(ratio, adv, eps_low, eps_high, dual_clip)
    peer_obj = luffy_shaping(torch.exp(logp), gamma) * adv
    per_token = torch.where(peer_rows, peer_obj, own_obj)
    clipped = own_clipped & ~peer_rows
    return _weighted_token_mean(per_token, clipped, weights.detach(), mask, is_peer)


def sgt_nll(logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """SGT's supervised term: the negative log-likelihood of the transferred correct responses.

    Token mean within each response (docs/design.md section 10), then mean over the responses that have tokens,
    so each transferred prompt counts once. The caller adds coef * this (0.1 in the paper) to the GRPO loss.
    Returns 0 (with a graph) when no response has a token.
    """
    keep = mask.bool()
    lengths = keep.sum(dim=-1)
    per_response = -torch.where(keep, logp, torch.zeros_like(logp)).sum(dim=-1) / lengths.clamp(min=1)
    has_tokens = lengths > 0
    count = has_tokens.sum().clamp(min=1)
    return torch.where(has_tokens, per_response, torch.zeros_like(per_response)).sum() / count


RatioObjective = Callable[..., tuple[torch.Tensor, Stats]]

RATIO_OBJECTIVES: dict[str, RatioObjective] = {
    "token": clipped_token_objective,
    "sequence": sequence_ratio_objective,
    "sequence_peer": functools.partial(sequence_ratio_objective, peer_only=True),
}
"""Eq. 10 by ratio granularity, keyed by the method record's ``ratio`` switch."""
