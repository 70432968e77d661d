"""Run under torchrun by tests/integration/test_distributed.py: the weight sync of a tiny tied model sharded with FSDP2
over the processes, in bf16 from float32 masters, two files written at once through buckets of a few elements.
Each process records what each gather was given (the local shard's dtype and shape, the full shape, whether it is
sharded) and whether its node's files read back as the unsharded model cast to bf16, bit for bit."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch.distributed.tensor import DTensor

from graft.engine import weight_sync
from graft.engine.distributed import close_world, init_world, shard_model
from graft.engine.weight_sync import WeightStream, node_files, read_weights
from helpers.tiny_qwen3 import tiny_qwen3


def main(out: Path) -> None:
    torch.set_num_threads(1)
    world = init_world()
    model = tiny_qwen3(tied=True)  # the same weights on every process (seeded)
    expected = {name: value.detach().to(torch.bfloat16) for name, value in model.state_dict().items()}
    shard_model(model, world)
    gathers = []
    full_tensor = DTensor.full_tensor

    def recorded(self: DTensor, *args, **kwargs):
        local = self.to_local()
        gathers.append((local.dtype, tuple(local.shape), tuple(self.shape), all(p.is_shard() for p in self.placements)))
        return full_tensor(self, *args, **kwargs)

    DTensor.full_tensor = recorded
    torch.set_num_threads(2)  # two writers: the node's first process writes two files at once
    weight_sync.BUCKET_BYTES = 96  # shared by the two: buckets of 24 bf16 elements, which most tensors span
    sync_dir = out / f"sync{world.rank}"
    sync_dir.mkdir()
    with node_files(WeightStream(model), world, torch.bfloat16, sync_dir) as paths:
        read = {name: tensor.clone() for name, tensor in read_weights(paths)}
        files = len(paths)
    same = read.keys() == expected.keys() and all(
        torch.equal(read[name].view(torch.int16), value.view(torch.int16)) for name, value in expected.items()
    )
    torch.save({"gathers": gathers, "same": same, "files": files}, out / f"rank{world.rank}.pt")
    close_world(world)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
