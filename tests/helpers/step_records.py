"""Hand-made step records for the exchange's unit tests."""

from __future__ import annotations

import torch

from graft.algo import group_advantages
from graft.data.records import StepRecords


def records(model: str, rewards: list[list[float]]) -> StepRecords:
    """One model's records of step 0: a response "x" of one token per reward, GRPO advantages from the rewards."""
    r = torch.tensor(rewards)
    g, n = r.shape
    return StepRecords(
        model=model,
        step=0,
        prompt_ids=[f"p{i}" for i in range(g)],
        texts=[["x"] * n for _ in range(g)],
        token_ids=[[[1]] * n for _ in range(g)],
        logprobs=[[[-0.1]] * n for _ in range(g)],
        rewards=r,
        advantages=group_advantages(r),
        truncated=[[False] * n for _ in range(g)],
    )
