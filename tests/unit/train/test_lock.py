"""The run lock's take-over rules with Slurm's answers given by stand-ins for ``sacct`` and ``squeue`` and the waits
recorded instead of slept: a holder is taken over only on evidence that it is gone (its pid dead on this host, its
Slurm job ended, its job requeued since); anything else waits, then is refused in one line; a holder whose lock
was taken over stops before it saves."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys

import pytest

from graft.engine.distributed import SINGLE
from graft.engine.weight_sync import sync_file_pattern, sync_file_prefix
from graft.errors import ConfigError
from graft.results import RunDir
from graft.train import checkpoint, lock
from graft.train.lock import LOCK_NAME, WAIT_S, LockLost, RunLock, sacct_state, squeue_state


@pytest.fixture(autouse=True)
def outside_slurm(monkeypatch):
    for name in ("SLURM_JOB_ID", "SLURM_RESTART_COUNT", "SLURM_CLUSTER_NAME"):
        monkeypatch.delenv(name, raising=False)


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=60)
    return child.pid


def write_lock(root, host, pid, job=None, restart=None, cluster=None) -> dict:
    root.mkdir(parents=True, exist_ok=True)
    holder = {"host": host, "pid": pid, "slurm_job": job, "started": "2026-01-01T00:00:00+00:00"}
    if restart is not None:
        holder["restart"] = restart
    if cluster is not None:
        holder["slurm_cluster"] = cluster
    (root / LOCK_NAME).write_text(json.dumps(holder))
    return holder


def holder_of(root) -> dict:
    return json.loads((root / LOCK_NAME).read_text())


def answers(*states):
    """A stand-in for sacct or squeue: the given states in turn (the last one again once they run out), recording
    each question (job id, cluster)."""
    calls = []

    def query(job, cluster):
        calls.append((job, cluster))
        return states[min(len(calls), len(states)) - 1]

    query.calls = calls
    return query


class Clock:
    """A stand-in for time.sleep that records the waits, optionally doing something at one of them."""

    def __init__(self, at=None, then=None):
        self.waits, self.at, self.then = [], at, then

    def __call__(self, seconds):
        self.waits.append(seconds)
        if len(self.waits) == self.at:
            self.then()


def is_mine(root) -> bool:
    holder = holder_of(root)
    return holder["host"] == socket.gethostname() and holder["pid"] == os.getpid()


@pytest.mark.parametrize(
    "state",
    ["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"],
)
def test_a_holder_whose_slurm_job_ended_is_taken_over_at_once(tmp_path, capsys, state):
    write_lock(tmp_path, "node-that-failed", 4242, job="1001", cluster="alpha")
    sacct, squeue, clock = answers(state), answers("RUNNING"), Clock()
    with RunLock(tmp_path, sacct=sacct, squeue=squeue, sleep=clock):
        assert is_mine(tmp_path)
    assert sacct.calls == [("1001", "alpha")] and squeue.calls == [] and clock.waits == []
    assert not (tmp_path / LOCK_NAME).exists()
    assert f"Slurm reports its job {state}" in capsys.readouterr().err


def test_squeue_answers_for_a_job_sacct_does_not_list(tmp_path):
    write_lock(tmp_path, "node-that-failed", 4242, job="1001")
    sacct, squeue = answers(""), answers("COMPLETED")
    with RunLock(tmp_path, sacct=sacct, squeue=squeue, sleep=Clock()):
        assert is_mine(tmp_path)
    assert sacct.calls == squeue.calls == [("1001", None)]


@pytest.mark.parametrize(
    ("sacct", "squeue", "seen"),
    [
        ("", "", "Slurm does not report its job (sacct: not listed, squeue: not listed)"),
        (None, None, "Slurm does not report its job (sacct: no answer, squeue: no answer)"),
        ("COMPLETING", "COMPLETED", "Slurm reports its job COMPLETING (sacct)"),
        (None, "RUNNING", "Slurm reports its job RUNNING (squeue)"),
    ],
)
def test_no_evidence_waits_with_backoff_then_refuses_in_one_line(tmp_path, capsys, sacct, squeue, seen):
    holder = write_lock(tmp_path, "busy-node", 4242, job="1002")
    sacct, squeue, clock = answers(sacct), answers(squeue), Clock()
    with pytest.raises(ConfigError) as refused:
        RunLock(tmp_path, sacct=sacct, squeue=squeue, sleep=clock).acquire()
    # 5, 10, 20, 40, 80 s, then what is left of the 300 s: asked at 0, 5, 15, 35, 75, 155 and 300 s
    assert clock.waits == [5, 10, 20, 40, 80, 145] and sum(clock.waits) == WAIT_S == 300
    assert len(sacct.calls) == 7
    message = str(refused.value)
    assert "\n" not in message
    assert f"{str(tmp_path / LOCK_NAME)!r}: in use by a run on busy-node pid 4242, Slurm job 1002" in message
    assert f"{seen} after 300 s of waiting" in message and message.endswith("rerun with --force-unlock")
    assert holder_of(tmp_path) == holder  # left as it was
    assert capsys.readouterr().err.count("asking again in") == 6


def test_the_wait_is_bounded_by_its_argument(tmp_path):
    write_lock(tmp_path, "busy-node", 4242, job="1002")
    clock = Clock()
    with pytest.raises(ConfigError, match=r"RUNNING \(sacct\) after 12 s of waiting"):
        RunLock(tmp_path, sacct=answers("RUNNING"), squeue=answers(None), sleep=clock, wait_s=12).acquire()
    assert clock.waits == [5, 7]


def test_a_job_that_completes_during_the_wait_is_taken_over(tmp_path, capsys):
    write_lock(tmp_path, "node-that-failed", 4242, job="1003")
    sacct, clock = answers("COMPLETING", "COMPLETED"), Clock()
    with RunLock(tmp_path, sacct=sacct, squeue=answers(None), sleep=clock):
        assert is_mine(tmp_path)
    assert clock.waits == [5] and len(sacct.calls) == 2
    err = capsys.readouterr().err
    assert "COMPLETING (sacct); asking again in 5 s" in err and "Slurm reports its job COMPLETED" in err


def test_a_lock_released_during_the_wait_is_taken_without_a_take_over(tmp_path, capsys):
    write_lock(tmp_path, "busy-node", 4242, job="1003")
    clock = Clock(at=2, then=(tmp_path / LOCK_NAME).unlink)
    with RunLock(tmp_path, sacct=answers("RUNNING"), squeue=answers(None), sleep=clock):
        assert is_mine(tmp_path)
    assert clock.waits == [5, 10] and "taking over" not in capsys.readouterr().err


def test_a_requeued_job_takes_over_its_earlier_runs_lock_only(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SLURM_JOB_ID", "1004")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "2")
    sacct, clock = answers("RUNNING"), Clock()  # Slurm sees this very job run: no evidence either way
    write_lock(tmp_path, "first-node", 4242, job="1004", restart=1)
    with RunLock(tmp_path, sacct=sacct, squeue=answers(None), sleep=clock):
        assert holder_of(tmp_path)["slurm_job"] == "1004" and holder_of(tmp_path)["restart"] == 2
    assert "Slurm requeued this job since (its restart count 1, now 2)" in capsys.readouterr().err
    for restart in (2, 3):  # the same run of the job, or a later one: another process of it may hold the lock
        holder = write_lock(tmp_path, "first-node", 4242, job="1004", restart=restart)
        with pytest.raises(ConfigError, match="a process of this very run of this Slurm job") as refused:
            RunLock(tmp_path, sacct=sacct, squeue=answers(None), sleep=clock).acquire()
        assert "\n" not in str(refused.value) and holder_of(tmp_path) == holder
    assert sacct.calls == [] and clock.waits == []


def test_the_same_job_id_of_another_cluster_is_asked_about_on_its_cluster(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "1004")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "2")
    monkeypatch.setenv("SLURM_CLUSTER_NAME", "alpha")
    write_lock(tmp_path, "beta-node", 4242, job="1004", restart=0, cluster="beta")
    sacct = answers("CANCELLED")
    with RunLock(tmp_path, sacct=sacct, squeue=answers(None), sleep=Clock()):
        assert holder_of(tmp_path)["slurm_cluster"] == "alpha"
    assert sacct.calls == [("1004", "beta")]


def test_a_holder_nothing_can_be_learnt_about_is_refused_at_once_unless_forced(tmp_path):
    write_lock(tmp_path, "unknown-node", 4242)  # not started under Slurm, on another host
    sacct, clock = answers("COMPLETED"), Clock()
    with pytest.raises(ConfigError, match=r"no Slurm job is recorded.*; if that process is gone, rerun with --force"):
        RunLock(tmp_path, sacct=sacct, squeue=answers(None), sleep=clock).acquire()
    with RunLock(tmp_path, force=True, sacct=sacct, squeue=answers(None), sleep=clock):
        assert is_mine(tmp_path)
    assert sacct.calls == [] and clock.waits == []


def test_a_live_holder_on_this_host_is_refused_without_asking_slurm(tmp_path):
    write_lock(tmp_path, socket.gethostname(), os.getpid())
    sacct = answers("COMPLETED")
    with pytest.raises(ConfigError, match=f"pid {os.getpid()} .*that process still runs on this host$"):
        RunLock(tmp_path, force=True, sacct=sacct, squeue=answers(None), sleep=Clock()).acquire()
    assert sacct.calls == []


@pytest.mark.parametrize("field", ["boot_id", "pid_namespace"])
def test_a_holder_on_another_machine_of_the_same_host_name_is_not_judged_by_its_pid(tmp_path, field):
    """Short host names repeat across clusters that share a file system, a rebooted node reuses pids, containers on
    one host share its boot but not its pids: a holder recorded in another boot or pid namespace is not this
    machine's process, so its pid, dead here, proves nothing; the line names the lock to remove."""
    me = lock.machine()
    if me[field] is None:
        pytest.skip(f"this machine reports no {field}")
    holder = write_lock(tmp_path, socket.gethostname(), dead_pid())
    holder[field] = "another"
    (tmp_path / LOCK_NAME).write_text(json.dumps(holder))
    sacct = answers("RUNNING")
    with pytest.raises(ConfigError, match=r"no Slurm job is recorded.*; if that process is gone, .* or remove '"):
        RunLock(tmp_path, sacct=sacct, squeue=answers(None), sleep=Clock()).acquire()
    assert holder_of(tmp_path) == holder
    holder[field] = me[field]  # this boot and namespace: the dead pid decides
    (tmp_path / LOCK_NAME).write_text(json.dumps(holder))
    with RunLock(tmp_path, sacct=sacct, squeue=answers(None), sleep=Clock()):
        assert is_mine(tmp_path) and holder_of(tmp_path)[field] == me[field]


def sync_files(directory, *owners) -> list:
    """One weight-sync file for each (job, restart, pid), named as that process's node_files names them."""
    directory.mkdir(exist_ok=True)
    paths = []
    for job, restart, pid in owners:
        env = {"SLURM_JOB_ID": job or "", "SLURM_RESTART_COUNT": str(restart)}
        with pytest.MonkeyPatch.context() as patch:
            for name, value in env.items():
                patch.setenv(name, value)
            path = directory / f"{sync_file_prefix(pid)}abc123.safetensors"
        path.write_bytes(b"weights")
        paths.append(path)
    return paths


def test_sync_files_are_named_by_job_run_under_slurm_and_by_pid_outside(tmp_path):
    mine, requeued, sibling, outside = sync_files(
        tmp_path, ("77", 0, 100), ("77", 1, 100), ("77", 0, 101), (None, 0, 100)
    )
    assert mine.name == "graft-weights-job77.0-pid100-abc123.safetensors"
    assert outside.name == "graft-weights-pid100-abc123.safetensors"
    assert sorted(tmp_path.glob(sync_file_pattern("77", 0, None))) == sorted([mine, sibling])
    assert list(tmp_path.glob(sync_file_pattern("77", 0, 100))) == [mine]
    assert list(tmp_path.glob(sync_file_pattern(None, 0, 100))) == [outside]
    assert requeued.name.startswith("graft-weights-job77.1-pid100-")


def test_a_dead_holder_on_this_host_leaves_only_its_own_sync_files_removed(tmp_path):
    pid = dead_pid()
    shm = tmp_path / "shm"
    theirs, sibling, outside = sync_files(shm, ("1005", 0, pid), ("1005", 0, pid + 1), (None, 0, pid))
    run = tmp_path / "run"
    write_lock(run, socket.gethostname(), pid, job="1005", restart=0)
    sacct = answers("RUNNING")
    with RunLock(run, sacct=sacct, squeue=answers(None), sleep=Clock(), sync_dir=shm):  # the pid decides here
        pass
    assert not theirs.exists() and sibling.exists() and outside.exists() and sacct.calls == []


def test_a_holder_whose_job_ended_leaves_every_sync_file_of_that_job_run_on_this_node_removed(tmp_path):
    shm = tmp_path / "shm"
    other_node, rank0, later_run, other_job = sync_files(
        shm, ("1006", 0, 11), ("1006", 0, 12), ("1006", 1, 11), ("1007", 0, 11)
    )
    run = tmp_path / "run"
    write_lock(run, "first-node", 12, job="1006", restart=0)
    with RunLock(run, sacct=answers("NODE_FAIL"), squeue=answers(None), sleep=Clock(), sync_dir=shm):
        pass
    assert not other_node.exists() and not rank0.exists() and later_run.exists() and other_job.exists()


def test_a_holder_whose_lock_was_taken_over_stops_before_it_saves(tmp_path, monkeypatch):
    run = RunDir(tmp_path / "run")
    first = RunLock(run.root)
    first.acquire()
    first.check_held()  # its own lock: nothing to say
    # a trainer on another node judged it gone and took the run over
    monkeypatch.setattr(lock.socket, "gethostname", lambda: "successor-node")
    successor = RunLock(run.root, force=True, sleep=Clock())
    successor.acquire()
    with pytest.raises(LockLost) as lost:
        first.check_held()
    message = str(lost.value)
    assert "\n" not in message and isinstance(lost.value, ConfigError)
    assert "is no longer this run's" in message and "it is held by successor-node pid" in message
    with pytest.raises(LockLost):
        checkpoint.save(run, 1, [], SINGLE, {}, {}, {}, check_held=first.check_held)
    assert not run.root.joinpath("checkpoints").exists()  # nothing written
    first.release()  # not the holder any more: the successor's lock stays
    assert holder_of(run.root)["host"] == "successor-node"
    (run.root / LOCK_NAME).unlink()
    with pytest.raises(LockLost, match="it is gone"):
        successor.check_held()


def fake_slurm_command(directory, name, script):
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_text(f'#!/bin/sh\necho "$@" >> {directory / (name + ".args")}\n{script}\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_the_slurm_queries_ask_for_one_job_and_normalise_its_state(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    fake_slurm_command(bin_dir, "sacct", 'echo "CANCELLED by 123"')
    fake_slurm_command(bin_dir, "squeue", 'echo "CLUSTER: beta"; echo RUNNING')
    monkeypatch.setenv("PATH", str(bin_dir))
    assert sacct_state("1008", "beta") == "CANCELLED"
    assert squeue_state("1008", "beta") == "RUNNING"
    assert (bin_dir / "sacct.args").read_text() == "-j 1008 -X --noheader --parsable2 --format=State --clusters=beta\n"
    assert (bin_dir / "squeue.args").read_text() == "--noheader --states=all --jobs=1008 --format=%T --clusters=beta\n"
    # a heterogeneous job: a component that may still run decides
    fake_slurm_command(bin_dir, "sacct", "echo COMPLETED; echo RUNNING")
    assert sacct_state("1008", None) == "RUNNING"
    fake_slurm_command(bin_dir, "sacct", "true")  # accounting does not list it
    assert sacct_state("1008", None) == ""
    fake_slurm_command(bin_dir, "squeue", "echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1")
    assert squeue_state("1008", None) is None
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert sacct_state("1008", None) is None and squeue_state("1008", None) is None


def test_a_lock_taken_over_during_a_save_leaves_the_checkpoint_out_of_place(tmp_path):
    """A save of a large model takes minutes: the lock is asked about again before the checkpoint is put in place."""
    run = RunDir(tmp_path / "run")
    asked = []

    def check_held():
        asked.append(len(asked))
        if len(asked) == 2:
            raise LockLost("taken over")

    with pytest.raises(LockLost):
        checkpoint.save(run, 1, [], SINGLE, {}, {}, {}, check_held=check_held)
    assert asked == [0, 1] and not run.checkpoint(1).exists() and run.checkpoints() == []


def test_a_live_pid_on_this_host_with_a_slurm_job_is_judged_by_slurm(tmp_path):
    """A pid that exists here may be another process's after a reboot: Slurm's terminal state decides, and a
    running job is waited for, then refused with no --force-unlock (it does not reach a holder on this host)."""
    write_lock(tmp_path, socket.gethostname(), os.getpid(), job="1009")
    with RunLock(tmp_path, sacct=answers("NODE_FAIL"), squeue=answers(None), sleep=Clock()):
        assert holder_of(tmp_path)["slurm_job"] is None
    write_lock(tmp_path, socket.gethostname(), os.getpid(), job="1009")
    clock = Clock()
    with pytest.raises(
        ConfigError, match=r"RUNNING \(sacct\) after 20 s of waiting for it to end; stop that run first$"
    ):
        RunLock(tmp_path, force=True, sacct=answers("RUNNING"), squeue=answers(None), sleep=clock, wait_s=20).acquire()
    assert clock.waits == [5, 10, 5]


def test_force_takes_over_a_process_of_this_very_job_run_on_another_host(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "1010")
    write_lock(tmp_path, "sibling-node", 4242, job="1010")
    sacct = answers("RUNNING")
    with RunLock(tmp_path, force=True, sacct=sacct, squeue=answers(None), sleep=Clock()):
        assert is_mine(tmp_path)
    assert sacct.calls == []
