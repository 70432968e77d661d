"""What a cluster user meets first, said in one line before any job is submitted."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from graft.config import RunConfig
from graft.planning.job_lengths import JobKind
from graft.planning.site import (
    SINFO_FORMAT,
    is_placeholder,
    parse_proctrack,
    parse_qos,
    parse_sinfo,
    proctrack_warning,
    qos_problem,
    runtime_hours,
    site_problems,
    slurm_output,
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


def site_check(
    cfg: RunConfig,
    kinds: list[JobKind],
    jobs_per_run: int,
    run: Callable[[list[str]], str | None] = slurm_output,
) -> tuple[list[str], list[str]]:
    """The problems (each one line) that stop the workflow before its first job, and warnings: the config's
    ``slurm`` section against ``sinfo`` (placeholders, partitions, time limits, the GPU GRES type, the nodes); its
    QoS's MaxWall (``sacctmgr``, a note where it cannot be read); each rule's estimated longest job
    (graft.planning.job_lengths) against its time limit, a training run's against ``jobs_per_run`` chained jobs
    (a job warned at its limit saves, and its retry resumes); whether Slurm's warning reaches the trainers
    (``scontrol show config``). ``run``: a command's output, None where it fails."""
    problems = site_problems(cfg, parse_sinfo(run(["sinfo", "-h", "-a", "-o", SINFO_FORMAT]) or ""))
    notes = []
    qos = cfg.slurm.qos
    if qos is not None and not is_placeholder(qos):
        found = run(["sacctmgr", "show", "qos", qos, "format=Name,MaxWall", "-n", "-P"])
        if found is None:
            notes.append(
                f"note: slurm.qos: the MaxWall of QoS {qos!r} is not checked: sacctmgr cannot read it here (no "
                "accounting database, or no sacctmgr)"
            )
        elif problem := qos_problem(cfg, parse_qos(found)):
            problems.append(problem)
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
    warning = proctrack_warning(parse_proctrack(run(["scontrol", "show", "config"]) or ""))
    return problems, notes + ([warning] if warning else [])
