"""What a cluster user meets first, said in one line before any job is submitted."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from graft.config import RunConfig
from graft.planning.job_lengths import JobKind
from graft.planning.site import (
    SINFO_FORMAT,
    parse_proctrack,
    parse_sinfo,
    proctrack_warning,
    runtime_hours,
    site_problems,
)

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


def _command_output(command: list[str]) -> str:
    """A Slurm command's standard output; empty where it fails (the check then finds what is missing)."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if done.returncode == 0 else ""


def site_check(
    cfg: RunConfig, kinds: list[JobKind], jobs_per_run: int, run: Callable[[list[str]], str] = _command_output
) -> tuple[list[str], list[str]]:
    """The problems (each one line) that stop the workflow before its first job, and warnings: the config's
    ``slurm`` partitions, time limits and GPU GRES type against ``sinfo``; each rule's estimated longest job
    (graft.planning.job_lengths) against its time limit, a training run's against ``jobs_per_run`` chained jobs
    (a job warned at its limit saves, and its retry resumes); whether Slurm's warning reaches the trainers
    (``scontrol show config``)."""
    problems = site_problems(cfg, parse_sinfo(run(["sinfo", "-h", "-a", "-o", SINFO_FORMAT])))
    for kind in kinds:
        limit = runtime_hours(cfg, kind.rule)
        if limit is None or kind.longest is None:
            continue
        jobs = jobs_per_run if kind.rule == "train" else 1
        if kind.longest > limit * jobs:
            chained = f" x {jobs} jobs (a warned job saves, its retry resumes)" if jobs > 1 else ""
            setting = "max_runtime_hours" if kind.rule == "train" else "evaluation_hours"
            problems.append(
                f"{kind.rule} jobs take up to {kind.longest:.1f} h (graft plan), more than their time limit of "
                f"{limit:g} h{chained} (slurm.{setting}); shorten them with {kind.split}"
            )
    warning = proctrack_warning(parse_proctrack(run(["scontrol", "show", "config"])))
    return problems, [warning] if warning else []
