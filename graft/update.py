"""One optimizer update on one minibatch of whole groups, with the loss the method's update rule names.

Micro-batching and sharding over processes only bound memory and time: each micro-batch's loss is scaled by its
share of the whole minibatch's normaliser (kept tokens for token-mean losses, responses for HACPO's sequence
mean), so the accumulated gradient, summed over processes, equals the gradient of the whole minibatch's loss.
"""

from __future__ import annotations

import torch

from graft.algo import RATIO_OBJECTIVES, hacpo_loss, luffy_objective, sgt_nll
from graft.distributed import SINGLE, World
from graft.exchange import Row
from graft.methods import Method
from graft.policy import Policy, response_logprobs


def _pad(values: list[list[float]], width: int, device: torch.device) -> torch.Tensor:
    out = torch.zeros(len(values), width, device=device)
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
    device = logp.device
    old = _pad([r.old_logp for r in rows], logp.shape[1], device)
    adv = torch.tensor([r.advantage for r in rows], device=device)
    weights = torch.tensor([r.weight for r in rows], device=device)
    is_peer = torch.tensor([r.is_peer for r in rows], device=device)
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
        src = torch.tensor([r.src_mean_ll for r in rows], device=device)
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


def plan_micro_batches(
    rows: list[Row], world_size: int, max_rows: int, max_tokens: int | None = None
) -> list[list[list[int]]]:
    """Which rows each process runs in which forward pass: ``plan[rank][micro] = row indices``.

    Rows go to processes longest first, each to the least loaded (in tokens), then each process packs its rows,
    in their original order, into micro-batches of at most ``max_rows`` rows and, when ``max_tokens`` is set,
    at most that many padded tokens (rows x longest prompt + response; a longer row goes alone). Every process
    gets the same number of micro-batches (padded with empty ones) because a sharded forward pass is collective.
    The plan is a pure function of the rows, so every process computes the same one.
    """
    length = [len(r.prompt_ids) + len(r.response_ids) for r in rows]
    load = [0] * world_size
    mine: list[list[int]] = [[] for _ in range(world_size)]
    for i in sorted(range(len(rows)), key=lambda i: (-length[i], i)):
        rank = min(range(world_size), key=lambda r: (load[r], r))
        load[rank] += length[i]
        mine[rank].append(i)
    plan: list[list[list[int]]] = []
    for indices in mine:
        micro: list[list[int]] = []
        width = 0
        for i in sorted(indices):
            wider = max(width, length[i])
            fits = micro and len(micro[-1]) < max_rows
            if fits and max_tokens is not None:
                fits = wider * (len(micro[-1]) + 1) <= max_tokens
            if fits:
                micro[-1].append(i)
                width = wider
            else:
                micro.append([i])
                width = length[i]
        plan.append(micro)
    most = max((len(m) for m in plan), default=0)
    return [m + [[] for _ in range(most - len(m))] for m in plan]


def _accumulate(
    rows: list[Row],
    world: World,
    micro_batch: int,
    micro_batch_tokens: int | None,
    loss_fn,
    share_fn,
) -> list[dict[str, torch.Tensor]]:
    """Backward of sum(loss(chunk) * share(chunk)) over this process's chunks of ``rows``; returns the stats of
    each chunk with its share under ``share``. An empty chunk (a process with fewer rows) runs a zero-weighted
    pass on one row so that the sharded collectives stay in step."""
    plan = plan_micro_batches(rows, world.size, micro_batch, micro_batch_tokens)[world.rank]
    out = []
    for indices in plan:
        chunk = [rows[i] for i in indices] if indices else rows[:1]
        loss, stats = loss_fn(chunk)
        share = share_fn(chunk) if indices else 0.0
        # FSDP averages gradients over processes; the shares already sum to one over all of them
        (loss * (share * world.size)).backward()
        if indices:
            out.append({**stats, "loss": loss.detach(), "share": share})
    return out


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
    micro_batch_tokens: int | None = None,
    world: World = SINGLE,
) -> dict[str, float]:
    """Zero grads, accumulate the minibatch loss over micro-batches (and processes), clip the grad norm, step.

    Every process holds the whole minibatch ``rows`` and runs its share of them; the normalisers are those of
    the whole minibatch, so the summed gradient is the one-process gradient. Returns stats summed over
    processes.
    """
    optimizer.zero_grad(set_to_none=True)
    pg_rows = [r for r in rows if not r.nll_only]
    nll_rows = [r for r in rows if r.nll_only]
    total_tokens = max(_kept_tokens(pg_rows), 1)

    def pg_loss(chunk):
        return _chunk_loss(method, policy, ref_model, chunk, update_index, omega_src_learner, temperature)

    def pg_share(chunk):
        return len(chunk) / len(pg_rows) if method.update == "hacpo" else _kept_tokens(chunk) / total_tokens

    # [loss, nll, clipped own, tokens own, clipped peer, tokens peer]
    sums = [0.0] * 6
    for stats in _accumulate(pg_rows, world, micro_batch, micro_batch_tokens, pg_loss, pg_share):
        sums[0] += float(stats["loss"]) * stats["share"]
        for k, side in enumerate(("own", "peer")):
            if f"tokens_{side}" in stats:
                n = float(stats[f"tokens_{side}"])
                sums[2 + 2 * k] += float(stats[f"clip_frac_{side}"]) * n
                sums[3 + 2 * k] += n
    if nll_rows:
        total_nll = max(sum(1 for r in nll_rows if r.response_ids), 1)

        def nll_loss(chunk):
            logp, mask = response_logprobs(
                policy.model,
                [r.prompt_ids for r in chunk],
                [r.response_ids for r in chunk],
                policy.pad_token_id,
                temperature,
            )
            nll = sgt_nll(logp, mask)
            return method.nll_coef * nll, {"nll": nll.detach()}

        def nll_share(chunk):
            return sum(1 for r in chunk if r.response_ids) / total_nll

        for stats in _accumulate(nll_rows, world, micro_batch, micro_batch_tokens, nll_loss, nll_share):
            sums[1] += float(stats["nll"]) * stats["share"]
    grad_norm = torch.nn.utils.clip_grad_norm_(policy.model.parameters(), grad_clip)
    if hasattr(grad_norm, "full_tensor"):  # a DTensor under FSDP2: the norm over all shards
        grad_norm = grad_norm.full_tensor()
    optimizer.step()
    sums = world.sum(sums)
    totals: dict[str, float] = {"loss": sums[0], "grad_norm": float(grad_norm)}
    if nll_rows:
        totals["nll"] = sums[1]
    totals["clipped_tokens_own"], totals["tokens_own"] = sums[2], sums[3]
    totals["clipped_tokens_peer"], totals["tokens_peer"] = sums[4], sums[5]
    return totals
