"""One optimizer update on one minibatch of whole groups, with the loss the method's update rule names.

Micro-batching only bounds memory: each micro-batch's loss is scaled by its share of the minibatch's
normaliser (kept tokens for token-mean losses, responses for HACPO's sequence mean), so the accumulated
gradient equals the gradient of the whole minibatch's loss.
"""

from __future__ import annotations

import torch

from graft.algo import RATIO_OBJECTIVES, hacpo_loss, luffy_objective, sgt_nll
from graft.exchange import Row
from graft.methods import Method
from graft.policy import Policy, response_logprobs


def _pad(values: list[list[float]], width: int) -> torch.Tensor:
    out = torch.zeros(len(values), width)
    for i, v in enumerate(values):
        out[i, : len(v)] = torch.tensor(v)
    return out


def _kept_tokens(rows: list[Row]) -> int:
    return sum(len(r.response_ids) for r in rows if r.weight > 0)


def _chunk_loss(
    method: Method,
    policy: Policy,
    ref_model: torch.nn.Module | None,
    rows: list[Row],
    update_index: int,
    omega_src_learner: float,
    temperature: float,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    logp, mask = response_logprobs(
        policy.model, [r.prompt_ids for r in rows], [r.response_ids for r in rows], policy.pad_token_id, temperature
    )
    old = _pad([r.old_logp for r in rows], logp.shape[1])
    adv = torch.tensor([r.advantage for r in rows])
    weights = torch.tensor([r.weight for r in rows])
    is_peer = torch.tensor([r.is_peer for r in rows])
    eps = (method.eps_low, method.eps_high)
    if method.update == "luffy":
        return luffy_objective(logp, old, adv, weights, mask, is_peer, *eps, gamma=method.luffy_gamma)
    if method.update == "hacpo":
        ref = None
        if ref_model is not None and method.kl_coef > 0:
            with torch.no_grad():
                ref, _ = response_logprobs(
                    ref_model,
                    [r.prompt_ids for r in rows],
                    [r.response_ids for r in rows],
                    policy.pad_token_id,
                    temperature,
                )
        src = torch.tensor([r.src_mean_ll for r in rows])
        return hacpo_loss(
            logp,
            old,
            ref,
            mask,
            is_peer,
            adv,
            src,
            omega_src_learner,
            update_index,
            clip_low=method.hacpo_clip_low,
            clip_high=method.hacpo_clip_high,
            cross_delta=method.hacpo_cross_delta,
            cross_step=method.hacpo_cross_step,
            kl_coef=method.kl_coef,
        )
    return RATIO_OBJECTIVES[method.ratio](logp, old, adv, weights, mask, *eps, is_peer=is_peer)


def minibatch_update(
    method: Method,
    policy: Policy,
    optimizer: torch.optim.Optimizer,
    rows: list[Row],
    update_index: int,
    grad_clip: float,
    micro_batch: int,
    ref_model: torch.nn.Module | None = None,
    omega_src_learner: float = 1.0,
    temperature: float = 1.0,
) -> dict[str, float]:
    """Zero grads, accumulate the minibatch loss over micro-batches, clip the grad norm, step. Returns stats."""
    optimizer.zero_grad(set_to_none=True)
    pg_rows = [r for r in rows if not r.nll_only]
    nll_rows = [r for r in rows if r.nll_only]
    total_tokens = max(_kept_tokens(pg_rows), 1)
    totals: dict[str, float] = {"loss": 0.0}
    clipped = {"own": [0.0, 0.0], "peer": [0.0, 0.0]}
    for start in range(0, len(pg_rows), micro_batch):
        chunk = pg_rows[start : start + micro_batch]
        loss, stats = _chunk_loss(method, policy, ref_model, chunk, update_index, omega_src_learner, temperature)
        share = len(chunk) / len(pg_rows) if method.update == "hacpo" else _kept_tokens(chunk) / total_tokens
        (loss * share).backward()
        totals["loss"] += loss.item() * share
        for side in ("own", "peer"):
            if f"tokens_{side}" in stats:
                n = float(stats[f"tokens_{side}"])
                clipped[side][0] += float(stats[f"clip_frac_{side}"]) * n
                clipped[side][1] += n
    if nll_rows:
        total_nll = sum(1 for r in nll_rows if r.response_ids)
        for start in range(0, len(nll_rows), micro_batch):
            chunk = nll_rows[start : start + micro_batch]
            logp, mask = response_logprobs(
                policy.model,
                [r.prompt_ids for r in chunk],
                [r.response_ids for r in chunk],
                policy.pad_token_id,
                temperature,
            )
            share = sum(1 for r in chunk if r.response_ids) / max(total_nll, 1)
            nll = sgt_nll(logp, mask)
            (method.nll_coef * nll * share).backward()
            totals["nll"] = totals.get("nll", 0.0) + nll.item() * share
    grad_norm = torch.nn.utils.clip_grad_norm_(policy.model.parameters(), grad_clip)
    optimizer.step()
    totals["grad_norm"] = float(grad_norm)
    for side, (num, den) in clipped.items():
        totals[f"clipped_tokens_{side}"] = num
        totals[f"tokens_{side}"] = den
    return totals
