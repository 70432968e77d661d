"""graft.workflow.live: one config per results tree while a workflow runs jobs on it. Records are written by hand
for each kind of holder; Slurm's answers come from stand-in queries."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from graft.errors import ConfigError
from graft.train.lock import machine
from graft.workflow.live import CONTROLLER_ENV, RECORDS, conflict, controller_job, start, stop

HOST = socket.gethostname()


def _record(tree, name: str, **fields) -> None:
    record = {"host": HOST, "pid": os.getpid(), "slurm_job": None, "started": "2026-12-07T10:00:00+00:00"}
    record.update(fields)
    (tree / RECORDS).mkdir(parents=True, exist_ok=True)
    (tree / RECORDS / f"{name}.json").write_text(json.dumps(record) + "\n")


def _answers(state):
    """A Slurm query that gives ``state`` for every job (None: no answer, "": not listed)."""
    return lambda job, cluster: state


@pytest.fixture
def dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_live_workflow_with_another_config_refuses_the_start_in_one_line_and_leaves_its_record(tmp_path):
    _record(tmp_path, "other", config="aaaa.yaml")
    with pytest.raises(ConfigError) as err:
        start(tmp_path, tmp_path / "configs" / "bbbb.yaml", queries=())
    line = str(err.value)
    assert "\n" not in line and "configs/aaaa.yaml, this one configs/bbbb.yaml" in line
    assert f"pid {os.getpid()} on {HOST}" in line and str(tmp_path / RECORDS / "other.json") in line
    assert [p.name for p in (tmp_path / RECORDS).iterdir()] == ["other.json"]  # this one's record is gone


def test_the_same_config_is_let_through_and_its_record_removed_at_the_end(tmp_path):
    _record(tmp_path, "other", config="aaaa.yaml")
    mine = start(tmp_path, tmp_path / "configs" / "aaaa.yaml", queries=())
    assert json.loads(mine.read_text())["config"] == "aaaa.yaml" and mine.parent == tmp_path / RECORDS
    stop(mine)
    assert [p.name for p in (tmp_path / RECORDS).iterdir()] == ["other.json"]


def test_a_record_whose_process_is_gone_from_this_host_is_removed_and_the_last_stop_leaves_no_directory(
    tmp_path, dead_pid
):
    _record(tmp_path, "gone", config="aaaa.yaml", pid=dead_pid)
    assert conflict(tmp_path, tmp_path / "configs" / "bbbb.yaml", queries=()) is None
    assert (tmp_path / RECORDS / "gone.json").exists()  # a dry run's question removes nothing
    mine = start(tmp_path, tmp_path / "configs" / "bbbb.yaml", queries=())
    assert [p.name for p in (tmp_path / RECORDS).iterdir()] == [mine.name]
    stop(mine)
    assert not (tmp_path / RECORDS).exists()


@pytest.mark.parametrize(
    ("state", "refused"),
    [
        ("COMPLETED", False),
        ("CANCELLED", False),
        ("NODE_FAIL", False),
        ("RUNNING", True),
        ("COMPLETING", True),
        ("", True),
        (None, True),
    ],
)
def test_a_workflow_on_another_host_counts_as_ended_only_when_slurm_says_its_job_ended(tmp_path, state, refused):
    _record(tmp_path, "far", config="aaaa.yaml", host="login-other", pid=1, slurm_job="4242")
    problem = conflict(tmp_path, tmp_path / "configs" / "bbbb.yaml", queries=(_answers(state),))
    assert (problem is not None) == refused
    if refused:
        assert "Slurm job 4242" in problem


def test_a_workflow_on_another_host_without_a_slurm_job_is_never_taken_for_ended(tmp_path, dead_pid):
    # its pid means nothing here, even one that no process of this host has
    _record(tmp_path, "far", config="aaaa.yaml", host="login-other", pid=dead_pid)
    assert "if it is gone, remove" in conflict(tmp_path, tmp_path / "c" / "bbbb.yaml", queries=(_answers("COMPLETED"),))


@pytest.mark.parametrize("field", ["boot_id", "pid_namespace"])
def test_a_workflow_recorded_in_another_boot_or_pid_namespace_is_not_judged_by_its_pid(tmp_path, dead_pid, field):
    me = machine()
    if me[field] is None:
        pytest.skip(f"this machine reports no {field}")
    _record(tmp_path, "twin", config="aaaa.yaml", pid=dead_pid, **{field: "another"})
    assert "if it is gone, remove" in conflict(tmp_path, tmp_path / "c" / "bbbb.yaml", queries=())
    _record(tmp_path, "twin", config="aaaa.yaml", pid=dead_pid, **{field: me[field]})
    assert conflict(tmp_path, tmp_path / "c" / "bbbb.yaml", queries=()) is None


def test_two_workflows_of_one_host_name_and_pid_keep_two_records(tmp_path, monkeypatch):
    """Another cluster's node of the same name, or a container, may run the same pid: neither record replaces the
    other, and the first to end removes only its own."""
    first = start(tmp_path, tmp_path / "configs" / "aaaa.yaml", queries=())
    second = start(tmp_path, tmp_path / "configs" / "aaaa.yaml", queries=())
    assert first != second and first.is_file() and second.is_file()
    stop(first)
    assert [p.name for p in (tmp_path / RECORDS).iterdir()] == [second.name]
    stop(second)


@pytest.mark.parametrize("text", ["", "{", "[]", '{"host": "h"}'])
def test_an_unreadable_record_is_one_line_naming_it(tmp_path, text):
    (tmp_path / RECORDS).mkdir()
    (tmp_path / RECORDS / "odd.json").write_text(text)
    with pytest.raises(ConfigError, match=r"odd\.json' is not a workflow's record .*remove it if no workflow runs"):
        start(tmp_path, tmp_path / "configs" / "bbbb.yaml", queries=())
    assert [p.name for p in (tmp_path / RECORDS).iterdir()] == ["odd.json"]


def test_a_workflow_through_slurm_counts_as_ended_only_once_none_of_its_jobs_is_queued_or_running(tmp_path, dead_pid):
    """Its controller died (a dead pid on this host), but the jobs it submitted, all named by its run id, may still
    wait in the queue: ended only when squeue answers with none of them."""
    _record(tmp_path, "slurm", config="aaaa.yaml", pid=dead_pid, slurm_run="run-1234")
    asked = []

    def queue(jobs):
        def queued(name):
            asked.append(name)
            return jobs

        return queued

    for jobs, refused in ((["77", "78"], True), (None, True), ([], False)):
        problem = conflict(tmp_path, tmp_path / "configs" / "bbbb.yaml", queries=(), queued=queue(jobs))
        assert (problem is not None) == refused
        if refused:
            assert "its jobs: squeue --name=run-1234" in problem
    assert asked == ["run-1234"] * 3
    mine = start(tmp_path, tmp_path / "configs" / "bbbb.yaml", "run-5678", queries=(), queued=queue([]))
    assert json.loads(mine.read_text())["slurm_run"] == "run-5678"
    assert [p.name for p in (tmp_path / RECORDS).iterdir()] == [mine.name]


def test_a_live_workflows_jobs_are_not_asked_for(tmp_path):
    _record(tmp_path, "slurm", config="aaaa.yaml", slurm_run="run-1234")

    def queued(name):
        raise AssertionError("a live controller's queue was asked")

    assert conflict(tmp_path, tmp_path / "configs" / "bbbb.yaml", queries=(), queued=queued) is not None


def test_the_same_config_waits_for_the_jobs_a_dead_controller_left_in_the_queue(tmp_path, dead_pid):
    """A resubmitted controller with the same config would train beside its predecessor's queued jobs (each
    waiting on the other's run lock): refused until squeue lists none of them, which the line names."""
    _record(tmp_path, "old", config="aaaa.yaml", pid=dead_pid, slurm_run="run-1234")
    problem = conflict(tmp_path, tmp_path / "configs" / "aaaa.yaml", queries=(), queued=lambda name: ["77"])
    assert "may still queue or run" in problem and "scancel --name=run-1234" in problem
    assert conflict(tmp_path, tmp_path / "configs" / "aaaa.yaml", queries=(), queued=lambda name: []) is None


def test_a_record_being_written_is_not_read(tmp_path):
    (tmp_path / RECORDS).mkdir()
    (tmp_path / RECORDS / ".other-12.json.tmp.json").write_text("{")  # graft.results.write_text's temporary
    assert conflict(tmp_path, tmp_path / "configs" / "bbbb.yaml", queries=()) is None


def test_the_controllers_slurm_job_outlives_the_executor_dropping_slurms_variables(monkeypatch):
    """The Slurm executor removes SLURM_* from the environment before the jobs start; the job read while the
    workflow is parsed is kept for the record and for the invocation's next rounds."""
    monkeypatch.setenv("SLURM_JOB_ID", "555")
    monkeypatch.setenv("SLURM_CLUSTER_NAME", "hpc")
    monkeypatch.delenv(CONTROLLER_ENV, raising=False)
    assert controller_job() == ("555", "hpc")
    monkeypatch.delenv("SLURM_JOB_ID")
    monkeypatch.delenv("SLURM_CLUSTER_NAME")
    assert controller_job() == ("555", "hpc")  # a next round, started after the variables were dropped
    monkeypatch.delenv(CONTROLLER_ENV)
    assert controller_job() == (None, None)


def test_jobs_being_killed_are_not_queued_jobs(monkeypatch):
    """squeue's answer for a controller's jobs a moment after scancel: those still COMPLETING are ending."""
    import graft.workflow.live as live

    answers = {"ok": ["41 RUNNING", "42 PENDING", "43 COMPLETING", "44 CANCELLED"], "none": [], "down": None}
    monkeypatch.setattr(live.time, "sleep", lambda seconds: None)
    for key, lines in answers.items():
        monkeypatch.setattr(live, "slurm_lines", lambda command, lines=lines: lines)
        assert live.queued_jobs(key) == {"ok": ["41", "42"], "none": [], "down": None}[key]
