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
        f"snakemake --cores N all (a dry run here without the site check: {SKIP_CHECK})"
    )


SKIP_CHECK = "--config 'slurm={site_check: false}'"
"""The setting that skips the check before submitting (``slurm.site_check``), as a command line adds it."""


def pre_submission_check(
    cfg: RunConfig,
    kinds: list[JobKind],
    jobs_per_run: int,
    which: Callable[[str], str | None] = shutil.which,
    run: Callable[[list[str]], str | None] = slurm_output,
) -> tuple[list[str], list[str]]:
    """What the workflow checks before it submits a job to Slurm, a dry run included, where ``slurm.site_check``
    (the default) asks for it: the problems (each one line) and warnings of ``slurm_problem``, a missing ``sinfo``
    and ``site_check``. ``which``: a command's path, None where it is missing."""
    if problem := slurm_problem(which):
        return [problem], []
    if which("sinfo") is None:
        return [
            "slurm: no sinfo on this machine's PATH; the check before submitting reads the cluster's partitions with "
            "it, so run Snakemake on the cluster's login node, or, where the site keeps sinfo from its users, skip "
            f"the check: slurm.site_check: false ({SKIP_CHECK})"
        ], []
    return site_check(cfg, kinds, jobs_per_run, run)


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
