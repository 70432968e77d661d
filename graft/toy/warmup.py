"""Supervised warm-up: next-token training on worked solutions, loss on the response tokens only.

The prompt is formatted by the same ``Policy.prompt_text`` that RL uses, and EOS ends every target, so a
warmed-up model answers in the format the grader reads and stops.
"""

from __future__ import annotations

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
) -> list[float]:
    """Train on (problem, solution) pairs for ``steps`` AdamW steps; returns the loss per step.

    Batches are drawn with a seeded ``random.Random``; the learning rate decays linearly to 10%.
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
        logp, mask = response_logprobs(model, [p for p, _ in batch], [r for _, r in batch], policy.pad_token_id)
        loss = -(logp * mask).sum() / mask.sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        if log is not None and (step + 1) % 50 == 0:
            log(step + 1, losses[-1])
    model.eval()
    return losses
