"""Which Slurm job run this process belongs to: the run lock records it, and the weight-sync files are named by it."""

from __future__ import annotations

import os


def this_job_run() -> tuple[str | None, int]:
    """This process's Slurm job id and restart count (``SLURM_RESTART_COUNT``: how often Slurm requeued the job,
    unset before the first requeue); None and 0 outside Slurm."""
    return os.environ.get("SLURM_JOB_ID") or None, int(os.environ.get("SLURM_RESTART_COUNT") or 0)
