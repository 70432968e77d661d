"""One owner per run directory: ``graft train`` holds ``<out>/.lock`` while it runs.

Two trainers on one directory (a resubmitted Slurm job, a manual rerun beside Snakemake) would both append to
``metrics.jsonl`` and both write checkpoints. The lock file is created with O_CREAT | O_EXCL, so exactly one
process gets it; it names its holder (host, pid, start time). A lock whose holder is gone is taken over: on this
host that is checked (the pid no longer exists), a lock from another host is respected unless the user says
otherwise (``--force-unlock``), because this host cannot see that process.

Readers (``graft evaluate``, archive replay, the report) take no lock: they read only files that writers put in
place atomically.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from graft.errors import ConfigError

LOCK_NAME = ".lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


class RunLock:
    """The exclusive lock on a run directory, as a context manager; released on exit, also on error."""

    def __init__(self, root: str | Path, force: bool = False):
        self.path = Path(root) / LOCK_NAME
        self.force = force
        self.me = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
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

    def _take_over_or_refuse(self, holder: dict) -> None:
        here = holder["host"] == self.me["host"]
        who = f"{holder['host']} pid {holder['pid']} (started {holder['started']})"
        if (here and _alive(int(holder["pid"]))) or (not here and not self.force):
            hint = "" if here else "; if that process is gone, rerun with --force-unlock"
            raise ConfigError(f"--out: {str(self.path.parent)!r} is in use by a run on {who}{hint}")
        reason = "no longer exists" if here else "is on another host; --force-unlock given"
        print(f"warning: taking over the run lock of {who}: that process {reason}", file=sys.stderr)
        # rename first: of two processes taking over at once, only one succeeds, the other looks again
        stale = self.path.with_name(f"{LOCK_NAME}.stale.{self.me['pid']}")
        try:
            self.path.rename(stale)
        except FileNotFoundError:
            return
        try:
            if json.loads(stale.read_text()) != holder:  # another process took over first: its lock goes back
                os.link(stale, self.path)
        except (OSError, json.JSONDecodeError):
            pass
        stale.unlink(missing_ok=True)
