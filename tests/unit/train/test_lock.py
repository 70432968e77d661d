"""The run lock's take-over rules with Slurm's answer given by a stand-in: a dead holder's lock, on this host or
another, does not block its retry; a live or unknown one is refused in one line."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from graft.engine.weight_sync import sync_file_prefix
from graft.errors import ConfigError
from graft.train.lock import LOCK_NAME, RunLock


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=60)
    return child.pid


def write_lock(root, host, pid, job=None):
    root.mkdir(parents=True, exist_ok=True)
    holder = {"host": host, "pid": pid, "slurm_job": job, "started": "2026-01-01T00:00:00+00:00"}
    (root / LOCK_NAME).write_text(json.dumps(holder))


def asked(states):
    """A stand-in for squeue: the state of each job id, recording what was asked."""
    calls = []

    def job_state(job):
        calls.append(job)
        return states.get(job)

    job_state.calls = calls
    return job_state


@pytest.mark.parametrize(("state", "said"), [("", "is no longer listed by Slurm"), ("TIMEOUT", "is timeout")])
def test_another_hosts_lock_whose_slurm_job_ended_is_taken_over(tmp_path, monkeypatch, capsys, state, said):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    write_lock(tmp_path, "node-that-failed", 4242, job="1001")
    job_state = asked({"1001": state})
    with RunLock(tmp_path, job_state=job_state):
        holder = json.loads((tmp_path / LOCK_NAME).read_text())
        assert holder["host"] == socket.gethostname() and holder["pid"] == os.getpid()
    assert job_state.calls == ["1001"] and not (tmp_path / LOCK_NAME).exists()
    assert f"Slurm job 1001 {said}" in capsys.readouterr().err


@pytest.mark.parametrize("state", ["RUNNING", "COMPLETING", "SUSPENDED"])
def test_another_hosts_lock_whose_slurm_job_runs_is_refused_in_one_line(tmp_path, monkeypatch, state):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    write_lock(tmp_path, "busy-node", 4242, job="1002")
    with pytest.raises(ConfigError) as refused:
        RunLock(tmp_path, job_state=asked({"1002": state})).acquire()
    assert "\n" not in str(refused.value) and "in use by a run on busy-node pid 4242, Slurm job 1002" in str(
        refused.value
    )
    assert json.loads((tmp_path / LOCK_NAME).read_text())["host"] == "busy-node"  # left as it was


def test_a_holder_slurm_cannot_answer_for_is_respected_unless_forced(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    for job in ("1003", None):  # Slurm does not answer; no job id recorded
        write_lock(tmp_path, "unknown-node", 4242, job=job)
        with pytest.raises(ConfigError, match="if that process is gone, rerun with --force-unlock"):
            RunLock(tmp_path, job_state=asked({})).acquire()
        with RunLock(tmp_path, force=True, job_state=asked({})):
            pass
        assert not (tmp_path / LOCK_NAME).exists()


def test_a_requeued_job_takes_over_its_own_lock_from_another_node(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SLURM_JOB_ID", "1004")
    write_lock(tmp_path, "first-node", 4242, job="1004")
    job_state = asked({"1004": "RUNNING"})  # it is this very job, running again
    with RunLock(tmp_path, job_state=job_state):
        assert json.loads((tmp_path / LOCK_NAME).read_text())["slurm_job"] == "1004"
    assert "requeued to another node" in capsys.readouterr().err


def test_a_dead_holder_on_this_host_leaves_its_sync_files_removed(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    sync_dir = tmp_path / "shm"
    sync_dir.mkdir()
    pid = dead_pid()
    theirs = sync_dir / f"{sync_file_prefix(pid)}abc.safetensors"
    someone_elses = sync_dir / f"{sync_file_prefix(pid + 1)}abc.safetensors"
    for path in (theirs, someone_elses):
        path.write_bytes(b"weights")
    run = tmp_path / "run"
    write_lock(run, socket.gethostname(), pid, job="1005")
    with RunLock(run, job_state=asked({"1005": "RUNNING"}), sync_dir=sync_dir):  # the pid decides on this host
        pass
    assert not theirs.exists() and someone_elses.exists()


def test_a_live_holder_on_this_host_is_refused_without_asking_slurm(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    write_lock(tmp_path, socket.gethostname(), os.getpid())
    job_state = asked({})
    with pytest.raises(ConfigError, match=f"pid {os.getpid()}"):
        RunLock(tmp_path, job_state=job_state).acquire()
    assert job_state.calls == []
