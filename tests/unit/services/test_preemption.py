"""A preempted Slurm job is retried (graft.services.preemption), against the pinned executor plugin."""

from __future__ import annotations

import asyncio
import subprocess
import types

import snakemake_executor_plugin_slurm as plugin

from graft.services.preemption import preempt_mode, retry_preempted_jobs, slurm_requeues


def _scontrol(text: str, code: int = 0):
    return lambda cmd, **kw: subprocess.CompletedProcess(cmd, code, stdout=text, stderr="")


def test_the_preempt_mode_is_read_from_scontrol():
    config = "PreemptExemptTime       = 00:00:00\nPreemptMode             = GANG,REQUEUE\nPreemptType = x\n"
    assert preempt_mode(_scontrol(config)) == "GANG,REQUEUE"
    assert slurm_requeues("GANG,REQUEUE") and not slurm_requeues("CANCEL") and not slurm_requeues(None)
    assert preempt_mode(_scontrol("", code=1)) is None


def test_the_pinned_plugin_reads_job_states_through_the_wrapped_query():
    """The wrap rests on the plugin's module attribute that its Executor calls: it must exist at the pin."""
    assert "query_job_status" in plugin.Executor.check_active_jobs.__code__.co_names
    assert asyncio.iscoroutinefunction(plugin.query_job_status)


def test_a_preempted_job_is_reported_failed_unless_slurm_requeues_it():
    async def query(command, logger):
        return {"11": "PREEMPTED", "12": "RUNNING", "13": "COMPLETED"}, 0.1

    module = types.SimpleNamespace(query_job_status=query)
    assert retry_preempted_jobs(module, "CANCEL")
    assert asyncio.run(module.query_job_status("sacct", None)) == (
        {"11": "FAILED", "12": "RUNNING", "13": "COMPLETED"},
        0.1,
    )
    assert not retry_preempted_jobs(module, "CANCEL")  # wrapped once only
    requeued = types.SimpleNamespace(query_job_status=query)
    assert not retry_preempted_jobs(requeued, "REQUEUE") and requeued.query_job_status is query


def test_a_failed_query_stays_a_failed_query():
    async def query(command, logger):
        return None, None

    module = types.SimpleNamespace(query_job_status=query)
    retry_preempted_jobs(module, None)
    assert asyncio.run(module.query_job_status("sacct", None)) == (None, None)
