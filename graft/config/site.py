"""The Slurm site, set once: partitions, account, GPU type, limits (docs/paper-on-slurm.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated

from graft.typed_config import (
    Bounds,
    Count,
    FieldError,
    Positive,
)


@dataclass(frozen=True)
class SlurmSpec:
    """The Slurm site: the one place a cluster's names and limits are set (docs/paper-on-slurm.md). Every rule's
    Slurm resources follow them (graft.planning.site), and Snakemake checks them against ``sinfo`` before it
    submits a job; a local run ignores them, but for the GPU that ``graft plan`` plans with (``gpus``,
    ``gpu_type``). A name written ``<...>`` is a placeholder (config/examples/own-pair.yaml), which that check asks
    the user to fill."""

    gpus: bool = False
    """Training and evaluation jobs run on GPUs and ask for them: ``scale.processes`` on each node of a training
    job, one for an evaluation. False: CPU jobs (the miniature, the rehearsal); a config that names its GPUs, or
    samples with vLLM's GPU build, is refused with it (RunConfig.gpu_ask_problem)."""
    gpu_type: str | None = None
    """The site's GRES type of the GPUs to ask for (``sinfo -o %G`` shows ``gpu:<type>:<count>``), e.g. ``h100``,
    ``nvidia_h100_80gb_hbm3`` or ``a100_80gb``. It names the GPU that ``graft plan`` plans with (graft.config.gpus:
    its memory, peak and speed) where the config does not set those figures itself; None: any GPU of the partition,
    whose figures the config gives. A type with ``-`` (``nvidia_a100-sxm4-80gb``), which the Slurm executor
    plugin cannot pass to sbatch, names the GPU while the jobs ask for any GPU of the partition."""
    gpu_partition: str | None = None
    """Partition of the GPU jobs (training, evaluation); None: the site's default partition."""
    cpu_partition: str | None = None
    """Partition of every other job (downloads, the report, pruning); None: the site's default partition."""
    account: str | None = None
    """Account charged for every job (``--account``); None: the user's default account."""
    qos: str | None = None
    """Quality of service of every job (``--qos``); None: the site's default."""
    constraint: str | None = None
    """Node features the GPU jobs require (``--constraint``); None: any node of the partition."""
    node_cpus: Count | None = None
    """CPUs of one node of the GPU partition (``sinfo -o %c``): a GPU job asks for its GPUs' share of them
    (graft.planning.site.node_share). None: sinfo's, read when the workflow starts; where sinfo is not there, the
    profile's default."""
    node_memory_mb: Count | None = None
    """Memory of one node of the GPU partition that jobs may take, in Slurm's MB (``sinfo -o %m``, less the site's
    reserve where it keeps one: MemSpecLimit), shared out as ``node_cpus``. None: as ``node_cpus``."""
    node_gpus: Count | None = None
    """GPUs of one node of the GPU partition (the count of ``sinfo -o %G``'s ``gpu:<type>:<count>``), which a job's
    share of the node's CPUs and memory is counted in. None: as ``node_cpus``."""
    max_runtime_hours: Positive | None = None
    """The longest time limit the site allows a job (the GPU partition's MaxTime, ``sinfo -o %l``): no job asks for
    more, and a training job without a predicted length (CPU jobs, a GPU without a peak) asks for it; None: no cap,
    and the profile's runtime where a job has no predicted length."""
    evaluation_hours: Positive | None = None
    """The longest time limit of an evaluation job, at most ``max_runtime_hours``; ``graft plan`` prints each job's
    estimated length beside it (``workflow.eval_checkpoints_per_job`` shortens checkpoint evaluations). None: the
    profile's."""
    runtime_factor: Annotated[float, Bounds(ge=1)] = 2.0
    """Each GPU job asks Slurm for its predicted length (``graft plan``) times this, a training job plus the lead of
    Slurm's warning before its limit, within ``max_runtime_hours`` and ``evaluation_hours``
    (graft.planning.site.runtime_hours). 2: the step time's predictions run up to 1.8 times short of the paper's
    measured steps (a co-trained pair's are a floor, docs/paper-on-slurm.md); a job that reaches its limit all the
    same saves and resumes in its retry, so a short ask costs a requeue, not work, and a long one a later start."""
    site_check: bool = True
    """Check the site before a job is submitted to Slurm, a dry run included (graft.planning.preflight
    .pre_submission_check): sbatch, sacct and sinfo on the PATH, this section against ``sinfo``, ``sacctmgr`` and
    ``scontrol show config``, each rule's estimated longest job against its time limit. False: no check, for a site
    that keeps ``sinfo`` from its users (the jobs then ask for what this section says, unchecked)."""
    save_gb_per_s: Positive = 0.5
    """Write bandwidth of the results file system per job, for the time a training job needs to save when Slurm
    warns it (the warning's lead, graft.planning.site.stop_lead_seconds)."""

    def __post_init__(self) -> None:
        # a GRES type as Slurm names it (AutoDetect=nvml writes nvidia_a100-sxm4-80gb); the Slurm executor plugin
        # passes the ones without "-" to sbatch (graft.planning.site.gres_type)
        plain = None if self.gpu_type is None else re.sub(r"[_.-]", "", self.gpu_type)
        if plain is not None and not (plain.isascii() and plain.isalnum()):
            raise FieldError("gpu_type", f"{self.gpu_type!r} is not allowed; expected letters, digits, _, . and - only")
