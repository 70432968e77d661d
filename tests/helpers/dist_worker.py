"""Run under torchrun by tests/integration/test_distributed.py: two minibatch updates of the shared case with the model
sharded by FSDP2 over the processes and gradient checkpointing on, a sharded checkpoint after the first, and
the second update redone from that checkpoint. Rank 0 writes the losses and the full parameters."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import torch

from graft.engine.distributed import (
    close_world,
    enable_gradient_checkpointing,
    full_state_dict,
    init_world,
    load_sharded,
    save_sharded,
    shard_model,
)
from graft.train.update import UpdateSettings, minibatch_update
from helpers.dist_case import build_case, reference_model, scoring_case


def main(method_name: str, out: Path) -> None:
    torch.set_num_threads(1)
    world = init_world()
    policy, rows, method = build_case(method_name)
    ref = reference_model(policy) if method.kl_coef > 0 else None
    enable_gradient_checkpointing(policy.model)  # must not change the result either
    shard_model(policy.model, world)
    if ref is not None:
        shard_model(ref, world)
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=1e-3)

    def update(index: int) -> dict[str, float]:
        settings = UpdateSettings(grad_clip=1.0, micro_batch=3, micro_batch_tokens=40)
        totals = minibatch_update(
            method, policy, optimizer, rows, settings=settings, update_index=index, ref_model=ref, world=world
        )
        return dataclasses.asdict(totals)

    first = update(0)
    after_one = full_state_dict(policy.model, world)
    save_sharded(policy.model, optimizer, out / "ckpt")
    second = update(1)
    after_two = full_state_dict(policy.model, world)
    load_sharded(policy.model, optimizer, out / "ckpt")
    again = update(1)
    resumed = full_state_dict(policy.model, world)
    if world.is_main:
        torch.save(
            {
                "stats": [first, second, again],
                "after_one": after_one,
                "after_two": after_two,
                "resumed": resumed,
                "world": world.size,
            },
            out / "result.pt",
        )
    close_world(world)


def score(model_dir: Path, out: Path) -> None:
    """Peer responses scored by a sharded receiver, each process scoring its share (micro-batches of 2)."""
    from graft.config import ModelSpec
    from graft.engine.policy import load_policy
    from graft.engine.scoring import score_peer_responses

    torch.set_num_threads(1)
    world = init_world()
    policy = load_policy("A", ModelSpec(path=str(model_dir), template="{problem} =\n"))
    shard_model(policy.model, world)
    texts, responses, eos = scoring_case(policy)
    result = score_peer_responses(policy, texts, responses, eos, micro_batch=2, world=world)
    if world.is_main:
        torch.save(result, out / "scores.pt")
    close_world(world)


if __name__ == "__main__":
    if sys.argv[1] == "score":
        score(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        main(sys.argv[1], Path(sys.argv[2]))
