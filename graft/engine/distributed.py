"""Training across the GPUs of a node (docs/design.md section 8): processes started by torchrun, models sharded with
FSDP2 (``fully_shard``), sharded checkpoints with ``torch.distributed.checkpoint``.

A ``World`` is the processes a model is sharded over: the whole job when the models of a pair are colocated, its
own group of processes under the split placement (graft.engine.placement). Within a world the loop is the
single-process one; only rollouts and grading (each process takes a share of the prompts), scoring of transferred
responses, updates (each process takes a share of a minibatch's rows) and checkpoints are split. A single process
is a world of size 1 and uses none of this.
"""

from __future__ import annotations

import datetime
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from graft.config import ScaleSpec


@dataclass(frozen=True)
class World:
    """This process's place in the job."""

    rank: int = 0
    size: int = 1
    device_name: str = "cpu"
    """"cpu" or "cuda:<local rank>"."""
    local_rank: int = 0
    """This process's place on its node (torchrun's LOCAL_RANK) among the processes of this world; 0 is the
    node's first one."""
    group: Any = field(default=None, compare=False)
    """The processes' torch.distributed group; None: the whole job (graft.engine.placement makes the others)."""
    mesh: Any = field(default=None, compare=False)
    """The device mesh this world's models are sharded over; None: one dimension over all its processes."""

    @property
    def device(self) -> torch.device:
        return torch.device(self.device_name)

    @property
    def distributed(self) -> bool:
        return self.size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def gather(self, obj: Any) -> list[Any]:
        """Every process's ``obj``, in rank order, on every process (pickled; for rollouts and statistics)."""
        if not self.distributed:
            return [obj]
        out: list[Any] = [None] * self.size
        dist.all_gather_object(out, obj, group=self.group)
        return out

    def share(self, items: Sequence[Any]) -> list[Any]:
        """This process's share of ``items``: every ``size``-th item from position ``rank``."""
        return list(items[self.rank :: self.size])

    def gather_shares(self, mine: list[Any], total: int) -> list[Any]:
        """The inverse of ``share`` over all processes: every process's share put back into the order of the
        ``total`` items it was taken from, on every process."""
        if not self.distributed:
            return list(mine)
        out: list[Any] = [None] * total
        for rank, part in enumerate(self.gather(mine)):
            out[rank :: self.size] = part
        return out

    def sum(self, values: list[float]) -> list[float]:
        """Element-wise sum of a list of floats over the processes (float64, so totals do not drift). A host
        tensor: the job's groups carry gloo for host tensors beside NCCL (``process_group_backend``)."""
        if not self.distributed:
            return list(values)
        t = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(t, group=self.group)
        return t.tolist()

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier(group=self.group)


SINGLE = World()


ACCELERATOR_BACKENDS = {"cuda": "nccl"}
"""The collective backend for each accelerator's tensors."""


def process_group_backend(device_type: str) -> str:
    """The backend of the job's process groups: gloo on CPUs; on GPUs NCCL for device tensors with gloo beside it
    for host tensors (as verl creates its groups). NCCL takes CUDA tensors only ("No backend type associated with
    device type cpu"), and graft's own collectives (``World.sum``, object gathers, barriers, the checkpoint's
    planning) are on host values; the groups graft.engine.placement makes inherit both."""
    if device_type == "cpu":
        return "gloo"
    return f"cpu:gloo,{device_type}:{ACCELERATOR_BACKENDS[device_type]}"


def init_world(timeout_s: float = ScaleSpec.process_group_timeout_s) -> World:
    """The world torchrun describes in the environment (RANK, WORLD_SIZE, LOCAL_RANK), or a single process
    (on the first GPU when there is one).

    One GPU per process when CUDA is present, with the groups of ``process_group_backend``. ``timeout_s``: how
    long a collective may wait for the slowest process (``scale.process_group_timeout_s``)."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size == 1:
        return World(device_name="cuda:0") if torch.cuda.is_available() else SINGLE
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    if not dist.is_initialized():
        dist.init_process_group(
            process_group_backend(device.type),
            device_id=device if device.type != "cpu" else None,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
    return World(rank=dist.get_rank(), size=dist.get_world_size(), device_name=str(device), local_rank=local)


def close_world(world: World, wait: bool = True) -> None:
    """Tear the process group down, by default only once every process is done with it: a process that destroys
    it while a peer still works (process 0 saving results after the last collective) can abort the peer's gloo
    threads ("terminate called without an active exception"). ``wait=False`` after an error, when the others
    may never reach the barrier."""
    if world.distributed and dist.is_initialized():
        if wait:
            dist.barrier()
        dist.destroy_process_group()


def end_process(world: World, code: int) -> int:
    """Return ``code``, or, in a process of a distributed job, exit with it now, without the interpreter's
    finalization. DeepSpeed keeps its process groups alive past ``destroy_process_group`` (its engines and
    ``deepspeed.utils.groups`` hold them), so their gloo or NCCL threads outlive the Python interpreter's teardown;
    one that still needs the GIL then (releasing its last work's tensors) aborts the process ("terminate called
    without an active exception", exit -6) after every result was written, and torchrun reports the job failed.
    Call it after ``close_world``, once every file is closed and every helper process stopped (the grading pool,
    vLLM's engine cores: the Trainer stops them): no ``atexit`` handler runs, so nothing may be left for one to do."""
    if not world.distributed:
        return code
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The transformer blocks of a causal LM (Llama/Qwen/SmolLM ``model.layers``, GPT-2 ``transformer.h``)."""
    base = getattr(model, "model", None) or getattr(model, "transformer", None)
    layers = getattr(base, "layers", None) or getattr(base, "h", None)
    if layers is None:
        raise ValueError(f"{type(model).__name__}: no decoder layers found to shard")
    return list(layers)


def shard_model(model: torch.nn.Module, world: World, compute_dtype: torch.dtype | None = None) -> torch.nn.Module:
    """FSDP2: each decoder block is one unit (gathered just before it runs, freed after), the rest the root.

    Parameters stay in their loaded dtype (float32 masters); ``compute_dtype`` (bf16 in the paper config) is the
    dtype of the gathered parameters, with gradients reduced in float32. FSDP averages gradients over processes
    while each process's loss is already its share of the whole minibatch's loss, so the update multiplies that
    loss by the number of processes; a custom divide factor would do it without the product but
    needs PREMUL_SUM, which gloo lacks.
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = world.mesh if world.mesh is not None else init_device_mesh(world.device.type, (world.size,))
    policy = MixedPrecisionPolicy(param_dtype=compute_dtype, reduce_dtype=torch.float32)
    for layer in decoder_layers(model):
        fully_shard(layer, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    return model


def save_sharded(model: torch.nn.Module, optimizer: torch.optim.Optimizer, directory: Path, world: World) -> None:
    """Model and optimizer shards of every process of ``world`` (torch.distributed.checkpoint), restorable on the
    same or another number of processes."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_sd, optim_sd = get_state_dict(model, optimizer)
    dcp.save({"model": model_sd, "optimizer": optim_sd}, checkpoint_id=str(directory), process_group=world.group)


def load_sharded(model: torch.nn.Module, optimizer: torch.optim.Optimizer, directory: Path, world: World) -> None:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_sd, optim_sd = get_state_dict(model, optimizer)
    state = {"model": model_sd, "optimizer": optim_sd}
    dcp.load(state, checkpoint_id=str(directory), process_group=world.group)
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])


def enable_gradient_checkpointing(model: torch.nn.Module) -> None:
    """Recompute each block's activations in the backward pass instead of storing them (memory for 4,096-token
    responses). Hugging Face applies it only in training mode, so the model is switched to training mode with
    every dropout set to zero: the ratio's denominator must be the same deterministic network."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        if isinstance(getattr(module, "attention_dropout", None), float):
            module.attention_dropout = 0.0
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.2x; the old name warns there
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    model.train()
