"""One owner per run directory: ``graft train`` holds ``<out>/.lock`` while it runs.

Two trainers on one directory (a resubmitted Slurm job, a manual rerun beside Snakemake) would both append to
``metrics.jsonl`` and both write checkpoints. The lock file is created with O_CREAT | O_EXCL, so exactly one
process gets it; it names its holder (host, pid, start time and, under Slurm, the job id). It is taken before any
model or engine loads, so a refusal costs nothing.

A holder that died without releasing it (a node failure, an OOM kill, a job past its time limit, ``scancel``)
leaves the lock behind, and Snakemake's retry usually runs on another node. A lock is taken over when its holder
is known to be gone: on this host its pid no longer exists; from any host its Slurm job is no longer running (asked
of Slurm with ``squeue``), or is this very job (a requeued job keeps its id and runs once at a time). A holder on
another host whose state cannot be known (no Slurm job id, or Slurm does not answer) is respected unless the user
says otherwise (``--force-unlock``). On taking over a lock of this host, the dead holder's weight-sync files
(graft.engine.weight_sync, in this node's memory) are removed; another node's memory cannot be reached from here.

Readers (``graft evaluate``, archive replay, the report) take no lock: they read only files that writers put in
place atomically.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from graft.errors import ConfigError

LOCK_NAME = ".lock"

ACTIVE_JOB_STATES = frozenset(
    {"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT", "RESIZING"}
)
"""Slurm job states in which the job's processes may still run (``squeue --format=%T``); every other state, and a
job Slurm no longer lists, has no process left to hold a lock."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def slurm_job_state(job_id: str) -> str | None:
    """The Slurm job's state as ``squeue`` prints it, ``""`` for a job Slurm no longer lists, or None when Slurm
    cannot be asked (no ``squeue`` here, or no answer in 30 s)."""
    try:
        done = subprocess.run(
            ["squeue", "--noheader", f"--jobs={job_id}", "--format=%T"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        # squeue refuses the id of a job that left its memory ("Invalid job id specified"): the job is over
        return "" if "invalid job id" in done.stderr.lower() else None
    return done.stdout.strip().splitlines()[0].strip() if done.stdout.strip() else ""


def this_job() -> str | None:
    """This process's Slurm job id, None outside Slurm."""
    return os.environ.get("SLURM_JOB_ID") or None


class RunLock:
    """The exclusive lock on a run directory, as a context manager; released on exit, also on error.

    ``job_state`` asks Slurm for a job's state (``slurm_job_state``; tests pass a stand-in); ``sync_dir`` is where
    this host's weight-sync files go (graft.engine.weight_sync.sync_directory), whose files of a dead holder of this
    host are removed on taking over."""

    def __init__(
        self,
        root: str | Path,
        force: bool = False,
        job_state: Callable[[str], str | None] = slurm_job_state,
        sync_dir: Path | None = None,
    ):
        self.path = Path(root) / LOCK_NAME
        self.force = force
        self.job_state = job_state
        self.sync_dir = sync_dir
        self.me = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "slurm_job": this_job(),
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
            "token": uuid.uuid4().hex,  # tells two locks of one process apart
        }

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(20):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = self._holder()
                if holder is None:  # being written this instant, or removed meanwhile: look again
                    time.sleep(0.05)
                    continue
                self._take_over_or_refuse(holder)
                continue
            with os.fdopen(fd, "w") as handle:
                handle.write(json.dumps(self.me) + "\n")
            return
        raise ConfigError(f"--out: could not take the run lock {str(self.path)!r}; remove it if no run is active")

    def release(self) -> None:
        if self._holder() == self.me:
            self.path.unlink(missing_ok=True)

    def _holder(self) -> dict | None:
        try:
            holder = json.loads(self.path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None
        return holder if isinstance(holder, dict) and {"host", "pid", "started"} <= holder.keys() else None

    def _gone(self, holder: dict) -> str | None:
        """Why the holder is known to be gone, or None when it may still run."""
        job = holder.get("slurm_job")
        if holder["host"] == self.me["host"] and not _alive(int(holder["pid"])):
            return "that process no longer exists"
        if job and job == self.me["slurm_job"] and holder["host"] != self.me["host"]:
            return f"it was this Slurm job {job}, requeued to another node"
        if job:
            state = self.job_state(str(job))
            if state is not None and state not in ACTIVE_JOB_STATES:
                return f"its Slurm job {job} is {state.lower() or 'no longer listed by Slurm'}"
        return None

    def _take_over_or_refuse(self, holder: dict) -> None:
        job = f", Slurm job {holder['slurm_job']}" if holder.get("slurm_job") else ""
        who = f"{holder['host']} pid {holder['pid']}{job} (started {holder['started']})"
        reason = self._gone(holder)
        if reason is None and self.force and holder["host"] != self.me["host"]:
            reason = "--force-unlock given"
        if reason is None:
            here = holder["host"] == self.me["host"]
            hint = "" if here else "; if that process is gone, rerun with --force-unlock"
            raise ConfigError(f"--out: {str(self.path.parent)!r} is in use by a run on {who}{hint}")
        print(f"warning: taking over the run lock of {who}: {reason}", file=sys.stderr)
        # rename first: of two processes taking over at once, only one succeeds, the other looks again
        stale = self.path.with_name(f"{LOCK_NAME}.stale.{self.me['pid']}")
        try:
            self.path.rename(stale)
        except FileNotFoundError:
            return
        try:
            if json.loads(stale.read_text()) != holder:  # another process took over first: its lock goes back
                os.link(stale, self.path)
            elif holder["host"] == self.me["host"]:
                self._remove_sync_files(int(holder["pid"]))
        except (OSError, json.JSONDecodeError):
            pass
        stale.unlink(missing_ok=True)

    def _remove_sync_files(self, pid: int) -> None:
        """The weight-sync files a dead holder of this host left in this node's memory (several GB each)."""
        from graft.engine.weight_sync import sync_file_pattern

        if self.sync_dir is None or not self.sync_dir.is_dir():
            return
        for path in self.sync_dir.glob(sync_file_pattern(pid)):
            path.unlink(missing_ok=True)
            print(f"warning: removed {path}, the dead holder's weight-sync file", file=sys.stderr)
