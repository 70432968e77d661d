"""A preempted Slurm job is retried, whatever the site's PreemptMode.

snakemake-executor-plugin-slurm 2.8.0 (the pinned version) keeps a job whose state is PREEMPTED among the active
ones (``Executor.check_active_jobs``, snakemake_executor_plugin_slurm/__init__.py: "We leave it to SLURM to resume
your job(s)"; PREEMPTED is not in its ``fail_stati``). That is right under ``PreemptMode=REQUEUE``, where Slurm
requeues the job under its id, but under ``CANCEL`` the job never runs again and Snakemake waits for it forever.
Where the cluster's PreemptMode does not requeue, the workflow has the plugin read PREEMPTED as FAILED: the plugin
reports the job failed, Snakemake's retry submits it again, and the training job resumes from its last save
(graft.train.run_state). The plugin reads every job's state through its module's ``query_job_status``, which is
wrapped here.
"""

from __future__ import annotations

import functools
import re
import subprocess
from types import ModuleType


def preempt_mode(run=subprocess.run) -> str | None:
    """The cluster's ``PreemptMode`` (``scontrol show config``), None when it cannot be read."""
    try:
        done = run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"^PreemptMode\s*=\s*(\S+)", done.stdout or "", re.M) if done.returncode == 0 else None
    return found.group(1).upper() if found else None


def slurm_requeues(mode: str | None) -> bool:
    """Whether a preempted job comes back by itself (``REQUEUE`` among the modes, e.g. ``GANG,REQUEUE``)."""
    return mode is not None and "REQUEUE" in mode.split(",")


def preempted_as_failed(statuses: dict[str, str] | None) -> dict[str, str] | None:
    """A status query's answer with every PREEMPTED job read as FAILED."""
    if statuses is None:
        return None
    return {job: "FAILED" if state == "PREEMPTED" else state for job, state in statuses.items()}


def retry_preempted_jobs(plugin: ModuleType, mode: str | None) -> bool:
    """Have the Slurm executor ``plugin`` (its module) report preempted jobs as failed, unless Slurm requeues
    them (``mode``); returns whether it does. Wrapping twice changes nothing."""
    query = plugin.query_job_status
    if slurm_requeues(mode) or getattr(query, "preempted_as_failed", False):
        return False

    @functools.wraps(query)
    async def query_job_status(command, logger):
        statuses, seconds = await query(command, logger)
        return preempted_as_failed(statuses), seconds

    query_job_status.preempted_as_failed = True
    plugin.query_job_status = query_job_status
    return True
