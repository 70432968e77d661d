"""Supervised warm-up: next-token training on worked solutions, loss on the response tokens only.

The prompt is formatted by the same ``Policy.prompt_text`` that RL uses, and EOS ends every target, so a
warmed-up model answers in the format the grader reads and stops.
"""

from __future__ import annotations

import itertools
import random

import torch

from graft.engine.policy import Policy, response_logprobs


def warm_up(
    policy: Policy,
    examples: list[tuple[str, str]],
    steps: int,
    batch_size: int = 64,
    lr: float = 2e-3,
    seed: int = 0,
    log=None,
    micro_batches: int = 1,
) -> list[float]:
    """Train on (problem, solution) pairs for ``steps`` AdamW steps; returns the loss per step.

    Batches are drawn with a seeded ``random.Random``; the learning rate decays linearly to 10%. Each batch runs
    as ``micro_batches`` forward passes over its examples sorted by length (less padding), each pass's loss
    divided by the whole batch's token count, so the gradient is the whole batch's.
    """
    rng = random.Random(seed)
    torch.manual_seed(seed)
    model = policy.model
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 - 0.9 * s / max(steps, 1))
    encoded = [
        (policy.encode(policy.prompt_text(problem)), policy.tokenizer(solution)["input_ids"] + [policy.eos_token_id])
        for problem, solution in examples
    ]
    losses = []
    for step in range(steps):
        batch = [encoded[rng.randrange(len(encoded))] for _ in range(batch_size)]
        optimizer.zero_grad(set_to_none=True)
        loss = nll_backward(model, length_parts(batch, micro_batches), policy.pad_token_id)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss)
        if log is not None and (step + 1) % 50 == 0:
            log(step + 1, losses[-1])
    model.eval()
    return losses


def length_parts(batch: list[tuple[list[int], list[int]]], parts: int) -> list[list[tuple[list[int], list[int]]]]:
    """``batch`` cut into ``parts`` near-equal forward passes (1 <= parts <= len(batch)). One part keeps the batch's
    order (the worlds built before ``micro_batches`` existed); more take the examples in length order, so each pass
    pads less."""
    if parts > 1:
        batch = sorted(batch, key=lambda example: len(example[0]) + len(example[1]))
    bounds = [len(batch) * i // parts for i in range(parts + 1)]
    return [batch[a:b] for a, b in itertools.pairwise(bounds)]


def nll_backward(model, parts: list[list[tuple[list[int], list[int]]]], pad_token_id: int) -> float:
    """Backward of the token-mean NLL over the response tokens of all ``parts`` together (one batch), one forward
    pass per part, each divided by the whole batch's token count; returns that loss."""
    tokens = sum(len(response) for part in parts for _, response in part)
    total = 0.0
    for part in parts:
        logp, mask = response_logprobs(model, [p for p, _ in part], [r for _, r in part], pad_token_id)
        loss = -(logp * mask).sum() / tokens
        loss.backward()
        total += loss.item()
    return total
