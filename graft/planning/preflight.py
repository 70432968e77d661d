"""What a cluster user meets first, said in one line before any job is submitted."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

SLURM_TOOLS = ("sbatch", "sacct")
"""What snakemake-executor-plugin-slurm calls: sbatch to submit, sacct to poll."""


def slurm_problem(which: Callable[[str], str | None] = shutil.which) -> str | None:
    """Why the Slurm executor cannot work from this machine, in one line, or None. Without sbatch and sacct the
    executor plugin would submit every job and fail each with "No such file or directory: 'sacct'"."""
    missing = [tool for tool in SLURM_TOOLS if which(tool) is None]
    if not missing:
        return None
    return (
        f"--profile slurm: no {' or '.join(missing)} on this machine's PATH; the Slurm executor submits with sbatch "
        "and polls with sacct, so run Snakemake on the cluster's login node, or here without Slurm: "
        "snakemake --cores N all"
    )


GPU_ENV_COMMAND = "bash requirements/gpu-env.sh"
"""Builds the paper's GPU environment (the ``gpu`` extra: vLLM and its CUDA torch, DeepSpeed) as a venv."""


def environment_problem(environment: Path) -> str | None:
    """Why ``workflow.environment`` cannot run the jobs, in one line, or None: every job's commands run from its
    ``bin/`` (graft, torchrun), so it must hold the graft command."""
    if (environment / "bin" / "graft").is_file():
        return None
    return (
        f"workflow.environment: {str(environment)!r} has no bin/graft; build it with: {GPU_ENV_COMMAND} "
        f"{environment} (or set workflow.environment to an environment that has the graft package, or to null)"
    )
