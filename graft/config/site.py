"""The Slurm site, set once: partitions, account, GPU type, limits (docs/paper-on-slurm.md)."""

from __future__ import annotations

from dataclasses import dataclass

from graft.typed_config import (
    FieldError,
    Positive,
)


@dataclass(frozen=True)
class SlurmSpec:
    """The Slurm site: the one place a cluster's names and limits are set (docs/paper-on-slurm.md). Every rule's
    Slurm resources follow them (graft.planning.site), and Snakemake checks them against ``sinfo`` before it
    submits a job. Read only by the Slurm executor; a local run ignores them."""

    gpus: bool = False
    """Training and evaluation jobs ask for GPUs: ``scale.processes`` on each node of a training job, one for an
    evaluation. False: CPU jobs (the miniature, the rehearsal)."""
    gpu_type: str | None = None
    """The site's GRES type of the GPUs to ask for (``sinfo -o %G`` shows ``gpu:<type>:<count>``), e.g. ``h200``,
    ``nvidia_h200`` or ``h200_141gb``; None: any GPU of the partition."""
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
    max_runtime_hours: Positive | None = None
    """The longest time limit the site allows a job (the GPU partition's MaxTime, ``sinfo -o %l``): training jobs
    ask for it; None: the profile's runtime."""
    evaluation_hours: Positive | None = None
    """The time limit of an evaluation job, at most ``max_runtime_hours``; ``graft plan`` prints each job's estimated
    length beside it (``workflow.eval_checkpoints_per_job`` shortens checkpoint evaluations). None: the profile's."""
    save_gb_per_s: Positive = 0.5
    """Write bandwidth of the results file system per job, for the time a training job needs to save when Slurm
    warns it (the warning's lead, graft.planning.site.stop_lead_seconds)."""

    def __post_init__(self) -> None:
        # the Slurm executor plugin's own check of a GRES type
        plain = None if self.gpu_type is None else self.gpu_type.replace("_", "").replace(".", "")
        if plain is not None and not (plain.isascii() and plain.isalnum()):
            raise FieldError("gpu_type", f"{self.gpu_type!r} is not allowed; expected letters, digits, _ and . only")
