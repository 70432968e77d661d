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


def receive_from(method, receiver, own: StepRecords, peer: StepRecords, selected, texts, generator, scoring):
    """``graft.train.exchange.receive`` of one receiver (its records ``own`` and prompt strings ``texts``) from the
    records ``peer`` on the ``selected`` prompts, both models' capabilities 1: (groups, stats)."""
    from graft.train.exchange import receive
    from graft.train.peers import PeerView
    from graft.train.sampling import Rollout, own_trajectories

    rollout = Rollout(own, own_trajectories(own, [receiver.encode(text) for text in texts]), texts)
    view = PeerView(peer, selected, int(selected.sum()), 1.0)
    return receive(method, receiver, rollout, view, capability=1.0, generator=generator, scoring=scoring)
