"""Run ``graft <args>`` under torchrun in process groups laid out as on GPUs, with NCCL's rule on host tensors.

On a GPU node the job's groups are ``process_group_backend("cuda")``: gloo for CPU tensors beside NCCL, which
refuses any tensor not on a CUDA device. Without a GPU, NCCL cannot be created; gloo registered for CUDA tensors
only stands in for it (``cuda:gloo``), so a host tensor reaching a collective that has no CPU backend fails here
with the error NCCL gives ("No backend type associated with device type cpu"). The group is made before graft's
``init_world``, which then takes it as it is, so every collective graft calls (sums, gathers, barriers, the split
placement's groups, checkpoints) runs under that rule.

Usage: torchrun ... cuda_only_groups.py LAYOUT graft-arguments...
LAYOUT: ``gpu`` (the job's groups as ``process_group_backend`` makes them on GPUs) or ``nccl-alone`` (NCCL as the
only backend, as the groups were made before the CPU backend was added beside it).
"""

from __future__ import annotations

import sys

import torch.distributed as dist

from graft.cli import main
from graft.engine.distributed import ACCELERATOR_BACKENDS, process_group_backend

STAND_IN = "gloo"
"""Registered for the CUDA device type only, it serves no CPU tensor: NCCL's rule."""


def backend(layout: str) -> str:
    gpu = process_group_backend("cuda").replace(f"cuda:{ACCELERATOR_BACKENDS['cuda']}", f"cuda:{STAND_IN}")
    return {"gpu": gpu, "nccl-alone": f"cuda:{STAND_IN}"}[layout]


if __name__ == "__main__":
    dist.init_process_group(backend(sys.argv[1]))
    sys.exit(main(sys.argv[2:]))
