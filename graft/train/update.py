"""One optimizer update on one minibatch of whole groups, with the loss the method's update rule names.

Micro-batching and sharding over processes only bound memory and time: each micro-batch's loss is scaled by its
share of the whole minibatch's normaliser (kept tokens for token-mean losses, responses for HACPO's sequence
mean), so the accumulated gradient, summed over processes, equals the gradient of the whole minibatch's loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from graft.algo import sgt_nll
from graft.config import TrainSpec
from graft.engine.batching import plan_passes
from graft.engine.deepspeed_engine import is_engine
from graft.engine.distributed import SINGLE, World
from graft.engine.policy import Policy, response_logprobs
from graft.engine.scoring import ScoringSettings
from graft.engine.trajectory import Trajectory
from graft.methods import Method
from graft.train.losses import UPDATES, LossBatch, policy_loss


def _pad(values: list[list[float]], width: int, device: torch.device) -> torch.Tensor:
    out = torch.zeros(len(values), width, device=device)
    for i, v in enumerate(values):
        out[i, : len(v)] = torch.tensor(v)
    return out


def _kept_tokens(rows: list[Trajectory]) -> int:
    return sum(len(r.response_ids) for r in rows if r.weight > 0)


def _logprobs(
    model: torch.nn.Module, policy: Policy, rows: list[Trajectory], settings: UpdateSettings
) -> tuple[torch.Tensor, torch.Tensor]:
    prompts, responses = [r.prompt_ids for r in rows], [r.response_ids for r in rows]
    return response_logprobs(
        model,
        prompts,
        responses,
        policy.pad_token_id,
        settings.temperature,
        settings.logits_chunk_mib,
        settings.packing,
    )


def _chunk_loss(
    method: Method,
    policy: Policy,
    model: torch.nn.Module,
    ref_model: torch.nn.Module | None,
    rows: list[Trajectory],
    update_index: int,
    settings: UpdateSettings,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    logp, mask = _logprobs(model, policy, rows, settings)
    device = logp.device
    ref = None
    if ref_model is not None and method.kl_coef > 0:
        with torch.no_grad():
            ref, _ = _logprobs(ref_model, policy, rows, settings)
    batch = LossBatch(
        logp=logp,
        old_logp=_pad([r.old_logp for r in rows], logp.shape[1], device),
        advantages=torch.tensor([r.advantage for r in rows], device=device),
        weights=torch.tensor([r.weight for r in rows], device=device),
        mask=mask,
        is_peer=torch.tensor([r.is_peer for r in rows], device=device),
        src_mean_ll=torch.tensor([r.src_mean_ll for r in rows], device=device),
        capability_ratio=torch.tensor([r.capability_ratio for r in rows], device=device),
        ref_logp=ref,
        update_index=update_index,
        dual_clip=settings.dual_clip,
    )
    return policy_loss(method)(batch, method)


def plan_micro_batches(
    rows: list[Trajectory], world_size: int, max_rows: int, max_tokens: int | None = None, packed: bool = False
) -> list[list[list[int]]]:
    """Which rows each process runs in which forward pass: ``plan[rank][micro] = row indices``, from the rows'
    prompt + response lengths (graft.engine.batching.plan_passes: tokens balanced over the processes, the same
    number of passes on each, packed passes filled by tokens longest row first)."""
    length = [len(r.prompt_ids) + len(r.response_ids) for r in rows]
    return plan_passes(length, world_size, max_rows, max_tokens, packed)


class _TorchStep:
    """One process or FSDP2: plain backward passes, then the norm clipped and the optimizer stepped."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, grad_clip: float):
        self.model, self.optimizer, self.grad_clip = model, optimizer, grad_clip
        self.forward_model = model

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def backward(self, loss: torch.Tensor, boundary: bool) -> None:
        loss.backward()

    def step(self) -> float:
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        if hasattr(grad_norm, "full_tensor"):  # a DTensor under FSDP2: the norm over all shards
            grad_norm = grad_norm.full_tensor()
        self.optimizer.step()
        return float(grad_norm)


class _DeepSpeedStep:
    """A DeepSpeed engine: it reduces gradients at the pass marked as the boundary, then clips and steps."""

    def __init__(self, engine):
        self.engine = engine
        # training forwards go through the engine: it starts each micro-batch's gradient bookkeeping there
        # (ZeRO-3 would otherwise overwrite, not add, the earlier micro-batches' gradients)
        self.forward_model = engine

    def zero_grad(self) -> None:
        self.engine.zero_grad()

    def backward(self, loss: torch.Tensor, boundary: bool) -> None:
        self.engine.set_gradient_accumulation_boundary(boundary)
        self.engine.backward(loss, scale_wrt_gas=False)

    def step(self) -> float:
        self.engine.step()
        return float(self.engine.get_global_grad_norm())


def _accumulate(
    rows: list[Trajectory],
    world: World,
    settings: UpdateSettings,
    loss_fn,
    share_fn,
    stepper,
    closes: bool,
) -> list[dict[str, torch.Tensor]]:
    """Backward of sum(loss(chunk) * share(chunk)) over this process's chunks of ``rows``; returns the stats of
    each chunk with its share under ``share``. An empty chunk (a process with fewer rows) runs a zero-weighted
    pass on one row so that the sharded collectives stay in step. ``closes``: this pass ends the minibatch (its
    last backward is the accumulation boundary)."""
    budget = (settings.micro_batch, settings.micro_batch_tokens, settings.packing)
    plan = plan_micro_batches(rows, world.size, *budget)[world.rank]
    out = []
    for k, indices in enumerate(plan):
        chunk = [rows[i] for i in indices] if indices else rows[:1]
        loss, stats = loss_fn(chunk)
        share = share_fn(chunk) if indices else 0.0
        # FSDP and DeepSpeed average gradients over processes; the shares already sum to one over all of them
        stepper.backward(loss * (share * world.size), closes and k == len(plan) - 1)
        if indices:
            out.append({**stats, "loss": loss.detach(), "share": share})
    return out


@dataclass(frozen=True)
class UpdateSettings(ScoringSettings):
    """How an update runs, from the config's ``train`` section: the training forward's settings, the norm clip
    and the dual clip; none of it changes the optimisation except ``grad_clip``, ``dual_clip`` and
    ``temperature``."""

    grad_clip: float = TrainSpec.grad_clip
    """Maximum gradient norm."""
    dual_clip: float | None = TrainSpec.dual_clip
    """verl's cap on the ratio of negative-advantage tokens (``train.dual_clip``); None: Eq. 10 as written."""


@dataclass
class UpdateTotals:
    """What one or more updates did, summed over processes (and over the minibatches of a step by ``add``)."""

    loss: float = 0.0
    grad_norm: float = 0.0
    nll: float | None = None
    """SGT's supervised term, when the minibatch had rows for it."""
    clipped_tokens_own: float = 0.0
    tokens_own: float = 0.0
    clipped_tokens_peer: float = 0.0
    tokens_peer: float = 0.0

    def add(self, other: UpdateTotals) -> None:
        for name in ("loss", "grad_norm", "clipped_tokens_own", "tokens_own", "clipped_tokens_peer", "tokens_peer"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        if other.nll is not None:
            self.nll = (self.nll or 0.0) + other.nll


def _accumulate_nll(
    method: Method, policy: Policy, rows: list[Trajectory], settings: UpdateSettings, world: World, stepper
) -> float:
    """Backward of SGT's supervised term (token-mean NLL per response, averaged over responses, times
    ``nll_coef``) over this process's share of ``rows``; returns this process's share of the mean NLL."""
    total = max(sum(1 for r in rows if r.response_ids), 1)

    def loss(chunk):
        logp, mask = _logprobs(stepper.forward_model, policy, chunk, settings)
        nll = sgt_nll(logp, mask)
        return method.nll_coef * nll, {"nll": nll.detach()}

    def share(chunk):
        return sum(1 for r in chunk if r.response_ids) / total

    passes = _accumulate(rows, world, settings, loss, share, stepper, closes=True)
    return sum(float(stats["nll"]) * stats["share"] for stats in passes)


def minibatch_update(
    method: Method,
    policy: Policy,
    optimizer,
    rows: list[Trajectory],
    *,
    settings: UpdateSettings,
    update_index: int = 0,
    ref_model: torch.nn.Module | None = None,
    world: World = SINGLE,
) -> UpdateTotals:
    """Zero grads, accumulate the minibatch loss over micro-batches (and processes), clip the grad norm, step.

    Every process holds the whole minibatch ``rows`` and runs its share of them; the normalisers are those of
    the whole minibatch, so the summed gradient is the one-process gradient. ``optimizer``: a torch optimizer
    (one process, FSDP2) or a DeepSpeed engine. ``update_index``: the minibatch's position in the step (HACPO's
    stepwise peer clip bound).
    """
    if is_engine(optimizer):
        stepper = _DeepSpeedStep(optimizer)
    else:
        stepper = _TorchStep(policy.model, optimizer, settings.grad_clip)
    stepper.zero_grad()
    pg_rows = [r for r in rows if not r.nll_only]
    nll_rows = [r for r in rows if r.nll_only]
    total_tokens = max(_kept_tokens(pg_rows), 1)

    def pg_loss(chunk):
        model = stepper.forward_model
        return _chunk_loss(method, policy, model, ref_model, chunk, update_index, settings)

    # HACPO's sequence mean counts the responses that have tokens (hacpo_loss leaves empty ones out)
    total_responses = max(sum(1 for r in pg_rows if r.response_ids), 1)
    response_mean = UPDATES.of(method).response_mean

    def pg_share(chunk):
        if response_mean:
            return sum(1 for r in chunk if r.response_ids) / total_responses
        return _kept_tokens(chunk) / total_tokens

    sums = dict.fromkeys(("loss", "nll", "clipped_tokens_own", "tokens_own", "clipped_tokens_peer", "tokens_peer"), 0.0)
    for stats in _accumulate(pg_rows, world, settings, pg_loss, pg_share, stepper, closes=not nll_rows):
        sums["loss"] += float(stats["loss"]) * stats["share"]
        for side in ("own", "peer"):
            if f"tokens_{side}" in stats:
                n = float(stats[f"tokens_{side}"])
                sums[f"clipped_tokens_{side}"] += float(stats[f"clip_frac_{side}"]) * n
                sums[f"tokens_{side}"] += n
    if nll_rows:
        sums["nll"] = _accumulate_nll(method, policy, nll_rows, settings, world, stepper)
    grad_norm = stepper.step()
    summed = dict(zip(sums, world.sum(list(sums.values())), strict=True))
    nll = summed.pop("nll")
    return UpdateTotals(**summed, grad_norm=grad_norm, nll=nll if nll_rows else None)
