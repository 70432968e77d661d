"""Run under torchrun by tests/integration/test_distributed.py: two minibatch updates of the shared case with the model
sharded over the processes (FSDP2, or DeepSpeed ZeRO-2/3) and gradient checkpointing on, a sharded checkpoint
after the first, and the second update redone from that checkpoint. Rank 0 writes the losses and the full
parameters."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

from graft.engine.distributed import (
    close_world,
    enable_gradient_checkpointing,
    end_process,
    init_world,
    load_sharded,
    save_sharded,
    shard_model,
)
from graft.engine.weight_sync import WeightStream, gather_to_main, node_files
from graft.train.update import UpdateSettings, minibatch_update
from helpers.dist_case import build_case, reference_model, scoring_case


def main(method_name: str, out: Path, engine: str = "fsdp2") -> None:
    torch.set_num_threads(1)
    world = init_world()
    policy, rows, method = build_case(method_name)
    ref = reference_model(policy) if method.kl_coef > 0 else None
    native_collectives = False
    enable_gradient_checkpointing(policy.model)  # must not change the result either
    if engine == "fsdp2":
        shard_model(policy.model, world)  # before the optimizer: FSDP2 replaces the parameters
        if ref is not None:
            shard_model(ref, world)
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=1e-3)
    if engine == "fsdp2":
        stepper = optimizer
        weights = lambda: gather_to_main(WeightStream(policy.model), world)  # noqa: E731
        save = lambda: save_sharded(policy.model, optimizer, out / "ckpt", world)  # noqa: E731
        load = lambda: load_sharded(policy.model, optimizer, out / "ckpt", world)  # noqa: E731
    else:  # "zero2" or "zero3"
        from graft.engine import deepspeed_engine

        config = deepspeed_engine.engine_config(1.0, int(engine[-1]), torch.float32)
        stepper = deepspeed_engine.wrap(policy.model, optimizer, config)
        import deepspeed.comm.comm

        native_collectives = deepspeed.comm.comm.cdb.shm_comm_op is not None
        weights = lambda: gather_to_main(WeightStream(stepper.module), world)  # noqa: E731
        save = lambda: deepspeed_engine.save(stepper, out / "ckpt")  # noqa: E731
        load = lambda: deepspeed_engine.load(stepper, out / "ckpt")  # noqa: E731

    def update(index: int) -> dict[str, float]:
        # 0.001 MiB: 4 positions of the 64-token vocabulary per chunk, so the sharded model's output projection
        # runs the checkpointed chunks (the one-process reference makes its logits in one piece)
        settings = UpdateSettings(grad_clip=1.0, micro_batch=3, micro_batch_tokens=40, logits_chunk_mib=0.001)
        totals = minibatch_update(
            method, policy, stepper, rows, settings=settings, update_index=index, ref_model=ref, world=world
        )
        return dataclasses.asdict(totals)

    first = update(0)
    after_one = weights()
    save()
    second = update(1)
    after_two = weights()
    load()
    again = update(1)
    resumed = weights()
    # the rollout engines' weight sync: one file per node (its first process has one thread: one writer), streamed
    # by its first process, read by every process
    sync_dir = out / f"sync{world.rank}"
    sync_dir.mkdir()
    model = stepper.module if engine != "fsdp2" else policy.model
    with node_files(WeightStream(model), world, torch.float32, sync_dir) as paths:
        synced = {name: tensor for path in paths for name, tensor in load_file(path).items()}
        files_during_sync = sorted(p.name for d in out.glob("sync*") for p in d.iterdir())
    world.barrier()
    files_after_sync = sorted(p.name for d in out.glob("sync*") for p in d.iterdir())
    same_file_everywhere = world.gather([str(p) for p in paths])
    assert all(torch.equal(synced[k], v) for k, v in gather_to_main(WeightStream(model, unique=True), world).items())
    if world.is_main:
        torch.save(
            {
                "stats": [first, second, again],
                "after_one": after_one,
                "after_two": after_two,
                "resumed": resumed,
                "world": world.size,
                "native_collectives": native_collectives,
                "synced": synced,
                "sync_files": (files_during_sync, files_after_sync, same_file_everywhere),
            },
            out / "result.pt",
        )
    close_world(world)
    end_process(world, 0)


def packed(method_name: str, out: Path, engine: str) -> None:
    """The shared case's rows scored, then one update of them, every pass packed (FSDP2 or DeepSpeed ZeRO-3,
    gradient checkpointing on, the chunked log-prob head, a token budget that makes several passes of unequal
    rows); rank 0 writes the totals, the full parameters and the scores."""
    from graft.engine.scoring import ScoringSettings, score_responses

    torch.set_num_threads(1)
    world = init_world()
    policy, rows, method = build_case(method_name)
    ref = reference_model(policy) if method.kl_coef > 0 else None
    enable_gradient_checkpointing(policy.model)
    if engine == "fsdp2":
        shard_model(policy.model, world)
        if ref is not None:
            shard_model(ref, world)
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=1e-3)
    stepper, model = optimizer, policy.model
    if engine == "zero3":
        from graft.engine import deepspeed_engine

        stepper = deepspeed_engine.wrap(policy.model, optimizer, deepspeed_engine.engine_config(1.0, 3, torch.float32))
        model = stepper.module
    scoring = ScoringSettings(micro_batch=3, micro_batch_tokens=40, logits_chunk_mib=0.001, packing=True)
    scores = score_responses(policy, [r.prompt_ids for r in rows], [r.response_ids for r in rows], scoring, world)
    settings = UpdateSettings(grad_clip=1.0, micro_batch=3, micro_batch_tokens=40, logits_chunk_mib=0.001, packing=True)
    totals = minibatch_update(method, policy, stepper, rows, settings=settings, ref_model=ref, world=world)
    params = gather_to_main(WeightStream(model), world)
    if world.is_main:
        torch.save({"stats": dataclasses.asdict(totals), "params": params, "scores": scores}, out / "result.pt")
    close_world(world)
    end_process(world, 0)


def score(model_dir: Path, out: Path) -> None:
    """Peer responses scored by a sharded receiver, each process scoring its share (micro-batches of 2)."""
    from graft.config import ModelSpec
    from graft.engine.policy import load_policy
    from graft.engine.scoring import ScoringSettings, score_peer_responses

    torch.set_num_threads(1)
    world = init_world()
    policy = load_policy("A", ModelSpec(path=str(model_dir), template="{problem} =\n"))
    shard_model(policy.model, world)
    texts, responses, eos = scoring_case(policy)
    result = score_peer_responses(policy, texts, responses, eos, ScoringSettings(micro_batch=2), world=world)
    if world.is_main:
        torch.save(result, out / "scores.pt")
    close_world(world)
    end_process(world, 0)


if __name__ == "__main__":
    if sys.argv[1] == "score":
        score(Path(sys.argv[2]), Path(sys.argv[3]))
    elif sys.argv[1] == "packed":
        packed(sys.argv[2], Path(sys.argv[3]), sys.argv[4])
    else:
        main(sys.argv[1], Path(sys.argv[2]), *sys.argv[3:])
