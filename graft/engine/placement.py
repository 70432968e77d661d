"""Where each model of a run lives among the job's processes (docs/design.md section 8).

``colocated`` (the default): every process holds every model of the run, each sharded over all processes; the
models take turns (one samples, then the other; one updates, then the other). ``split``: the processes are cut
into one group per model, in model order and contiguous in rank (so a group fills whole nodes, or part of one),
each model sharded over its own group only; the models sample, score and update at the same time, and only the
exchange's records cross between the groups, once per step (``graft.train.trainer``). A run of one model has
nothing to split and is colocated under either setting.

Sharding within a model's processes is ``full`` (FSDP2 over all of them) or ``hybrid``: sharded within each node
and replicated across nodes (FSDP2 on a two-dimensional mesh), so that the all-gathers of parameters stay on a
node's fast links and only gradients cross nodes, once per update.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch.distributed as dist

from graft.config import model_groups
from graft.engine.distributed import World
from graft.errors import ConfigError


@dataclass(frozen=True)
class Placement:
    """This process's share of a run's models."""

    world: World
    """The whole job: the exchange's collectives, checkpoints' manifest and the step's metrics."""
    homes: dict[str, World]
    """The models this process holds, in the run's order, each with the processes it is sharded over."""
    sizes: dict[str, int]
    """Every model of the run and the number of processes it is sharded over."""
    split: bool

    def publishes(self, name: str) -> bool:
        """Whether this process sends ``name``'s records to the other groups (its group's first process)."""
        return name in self.homes and self.homes[name].is_main


def place(models: list[str], world: World, placement: str, node_processes: int, sharding: str = "full") -> Placement:
    """Cut the job's processes into the placement's groups (collective: every process calls it alike).

    ``node_processes``: processes per node (``scale.processes``), for hybrid sharding and for each group's
    first process on a node (where a rollout engine's weights are written once per node)."""
    if not world.distributed:
        return Placement(world, {m: world for m in models}, {m: 1 for m in models}, False)
    count = model_groups(placement, len(models))
    if world.size % count:
        raise ConfigError(
            f"scale.placement: 'split' gives each of the run's {count} models an equal share of the job's "
            f"{world.size} processes; expected a multiple of {count}"
        )
    size = world.size // count
    mine = world.rank // size
    per_node = min(size, node_processes)
    hybrid = sharding == "hybrid" and size > node_processes and size % node_processes == 0
    mesh = None
    if count > 1 or hybrid:
        from torch.distributed.device_mesh import init_device_mesh

        shape = (count, size // node_processes, node_processes) if hybrid else (count, size)
        names = ("model", "replicate", "shard") if hybrid else ("model", "shard")
        full = init_device_mesh(world.device.type, shape, mesh_dim_names=names)
        mesh = full[names[1:]] if hybrid else full["shard"]
    groups = [world.group] * count
    if count > 1:  # every process creates every group, in the same order, as new_group requires
        groups = [dist.new_group(list(range(i * size, (i + 1) * size))) for i in range(count)]
    home = replace(
        world,
        rank=world.rank - mine * size,
        size=size,
        local_rank=(world.rank - mine * size) % per_node,
        group=groups[mine],
        mesh=mesh,
    )
    held = models[mine : mine + 1] if count > 1 else models
    return Placement(world, {m: home for m in held}, {m: size for m in models}, count > 1)
