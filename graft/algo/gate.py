"""The compatibility gate (paper Eqs. 6-8) and its random-admission ablation (Eq. 11)."""

from __future__ import annotations

import torch


def mean_token_logprob(logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Average token log-likelihood l(pi, o^M | q) of paper Eq. 6, one value per response.

    Args:
        logp: [B, T] per-token log-probabilities (any value at masked positions, -inf included).
        mask: [B, T] bool or {0, 1}; True on the response's tokens (EOS included when generated).

    Returns:
        [B]. A response with no tokens gets 0: it contributes no token to any loss, so its gate value
        never matters.
    """
    keep = mask.bool()
    total = torch.where(keep, logp, torch.zeros_like(logp)).sum(dim=-1)
    return total / keep.sum(dim=-1).clamp(min=1).to(logp.dtype)


def compatibility(
    recv_mean_ll: torch.Tensor, src_mean_ll: torch.Tensor, delta: float, cap: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Compatibility score and bounded weight (paper Eqs. 7 and 8).

    s = exp(l(pi_old^B, o^B | q) - l(pi_old^A, o^A | q)); w = 1[s > delta] * min(s, cap). The floor is
    strict: s == delta is dropped. delta = 0 is the "w/o floor" ablation (w = min(s, cap), every s > 0).

    Args:
        recv_mean_ll: [R] receiver behaviour-policy mean log-likelihood of the re-tokenized peer strings.
        src_mean_ll: [R] source mean generation log-prob of the same strings under its own tokenizer.
        delta: admission floor.
        cap: upper bound on the weight.

    Returns:
        (s [R], w [R]).
    """
    s = torch.exp(recv_mean_ll - src_mean_ll)
    w = torch.where(s > delta, torch.clamp(s, max=cap), torch.zeros_like(s))
    return s, w


def random_admission(
    s: torch.Tensor,
    valid: torch.Tensor,
    delta: float,
    generator: torch.Generator,
    cap: float,
) -> torch.Tensor:
    """Count-matched random admission (paper Appendix G, Eq. 11).

    Among the transferred peer responses (``valid``), count those with s > delta, then admit exactly that many
    drawn uniformly; the admitted get w = min(s, cap), whatever their s, the rest 0. The floor only sets the
    count.

    Args:
        s: compatibility scores, any shape.
        valid: bool, same shape: which entries are transferred peer responses.

    Returns:
        weights, same shape as s.
    """
    flat_s = s.reshape(-1)
    flat_valid = valid.reshape(-1).bool()
    count = int((flat_valid & (flat_s > delta)).sum())
    pool = flat_valid.nonzero().squeeze(-1)
    chosen = pool[torch.randperm(pool.numel(), generator=generator)[:count]]
    weights = torch.zeros_like(flat_s)
    weights[chosen] = torch.clamp(flat_s[chosen], max=cap)
    return weights.reshape(s.shape)
