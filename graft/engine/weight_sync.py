"""The trained weights into a rollout engine after each step, one parameter at a time.

A sharded model is gathered parameter by parameter (every process takes part in each gather, a collective), so no
process ever holds the whole model gathered, on its GPU or in memory; each gathered tensor is cast to the engine's
dtype, moved to the CPU and, on the first process of each node only, appended to one safetensors file, which every
engine of that node then reads. Per node and step that is one copy of the model in the engine's dtype written and
read, where gathering the whole model in float32 on every GPU and writing one file per process cost the model in
float32 on each GPU and the engine's copy once per process.
"""

from __future__ import annotations

import json
import os
import struct
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from graft.engine.distributed import World

SAFETENSORS_DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}


@dataclass(frozen=True)
class WeightStream:
    """A model's full tensors in state-dict order, gathered one at a time on every process."""

    model: torch.nn.Module
    """The trained module: plain, sharded with FSDP2 (DTensor parameters) or partitioned by DeepSpeed ZeRO-3."""

    def entries(self) -> list[tuple[str, tuple[int, ...]]]:
        """Names and full shapes, known without gathering anything."""
        out = []
        for name, value in self.model.state_dict(keep_vars=True).items():
            shape = getattr(value, "ds_shape", None) or value.shape  # a ZeRO-3 partition keeps its full shape
            out.append((name, tuple(shape)))
        return out

    def tensors(self) -> Iterator[tuple[str, torch.Tensor]]:
        """Each tensor whole, then released: a collective per tensor under FSDP2 or ZeRO-3, so every process must
        consume the whole stream."""
        for name, value in self.model.state_dict(keep_vars=True).items():
            if hasattr(value, "full_tensor"):  # FSDP2's DTensor
                yield name, value.full_tensor().detach()
            elif hasattr(value, "ds_id"):  # a ZeRO-3 partition
                import deepspeed

                with deepspeed.zero.GatheredParameters([value], modifier_rank=None):
                    yield name, value.detach().clone()
            else:
                yield name, value.detach()


def gather_to_main(weights: WeightStream, world: World) -> dict[str, torch.Tensor]:
    """The whole model on the first process's CPU (an empty dict elsewhere), gathered one tensor at a time: what a
    checkpoint's Hugging Face copy is written from. Collective."""
    out = {}
    for name, tensor in weights.tensors():
        if world.is_main:
            out[name] = tensor.to("cpu", copy=True)
    return out


def write_safetensors(
    path: Path, entries: list[tuple[str, tuple[int, ...]]], dtype: torch.dtype, tensors: Iterable[torch.Tensor] | None
) -> int:
    """Write a safetensors file tensor by tensor: the header from ``entries`` first, then each tensor of
    ``tensors`` (in the entries' order) cast to ``dtype``, so at most one tensor is held at a time. ``tensors``
    None: only count. Returns the bytes the file has."""
    itemsize = torch.empty(0, dtype=dtype).element_size()
    header: dict[str, dict] = {}
    offset = 0
    for name, shape in entries:
        size = itemsize * int(torch.Size(shape).numel())
        header[name] = {
            "dtype": SAFETENSORS_DTYPES[dtype],
            "shape": list(shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the format aligns the data to 8 bytes
    if tensors is None:
        return 8 + len(encoded) + offset
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)))
        f.write(encoded)
        for (name, shape), tensor in zip(entries, tensors, strict=True):
            if tuple(tensor.shape) != shape:
                raise ValueError(f"{name}: shape {tuple(tensor.shape)}, the header says {shape}")
            data = tensor.detach().to("cpu", dtype).contiguous().reshape(-1)
            f.write(memoryview(data.view(torch.uint8).numpy()))
    return 8 + len(encoded) + offset


@contextmanager
def node_file(weights: WeightStream, world: World, dtype: torch.dtype) -> Iterator[Path]:
    """The whole model in ``dtype`` in one safetensors file per node, written by the node's first process while
    every process takes part in each gather; every process gets its node's file, which is removed once every
    process has left the block. Collective."""
    tensors = (t for _, t in weights.tensors())
    mine = None
    if world.local_rank == 0:
        handle, name = tempfile.mkstemp(prefix="graft-weights-", suffix=".safetensors")
        os.close(handle)
        mine = Path(name)
    try:
        if mine is not None:
            write_safetensors(mine, weights.entries(), dtype, tensors)
        else:
            for _ in tensors:
                pass
        paths = world.gather(None if mine is None else str(mine))
        yield Path(paths[world.rank - world.local_rank])
        world.barrier()  # the file stays until every process of the node has read it
    finally:
        if mine is not None:
            mine.unlink()
