"""One owner per run directory: ``graft train`` holds ``<out>/.lock`` while it runs.

Two trainers on one directory (a resubmitted Slurm job, a manual rerun beside Snakemake) would both append to
``metrics.jsonl`` and both write checkpoints. The lock file is created with O_CREAT | O_EXCL, so exactly one
process gets it; it names its holder (host, pid, start time and, under Slurm, the job id, cluster and restart
count). It is taken before any model or engine loads, so a refusal costs nothing.

A holder that died without releasing it (a node failure, an OOM kill, a job past its time limit, ``scancel``)
leaves the lock behind, and Snakemake's retry usually runs on another node. A lock is taken over only on evidence
that its holder is gone:

- on this host, its pid no longer exists;
- Slurm reports its job in a terminal state (``TERMINAL_JOB_STATES``: COMPLETED, FAILED, CANCELLED, TIMEOUT,
  ...), asked of ``sacct``, which keeps finished jobs, else of ``squeue``, which forgets them minutes after
  they end but lists a job that accounting has not recorded yet;
- it was this very Slurm job before Slurm requeued it: the same job id with a lower restart count
  (``SLURM_RESTART_COUNT``; a requeue ends every process of the job's earlier run).

Anything else is no evidence: a job Slurm does not list (with a federation or several clusters a live job may be
unknown to this cluster), a query that fails or times out, or a state in which the job's processes may still run
(RUNNING, COMPLETING, ...). Then the trainer waits, asking again after 5 s, 10 s, 20 s ... up to ``WAIT_S`` in
all, and refuses in one line naming the lock, its holder, the state seen and ``--force-unlock``. A holder nothing
can be learnt about (on another host with no job id recorded, or a process of this very run of this job) is
refused at once, and so is a live pid on this host with no job id; ``--force-unlock`` takes over a holder on
another host without evidence.

A holder judged gone may still run (Slurm's answer was wrong, or ``--force-unlock`` was): before each save
(checkpoint, resume state, ``done.json``) the trainer calls ``RunLock.check_held`` and stops with ``LockLost``
rather than write over its successor's files.

On taking over, the dead holder's weight-sync files in this node's sync directory are removed
(graft.engine.weight_sync names them by Slurm job run, or by pid outside Slurm): every process's of its run when
Slurm says the run is over, its own process's alone when only its pid is known dead. Other nodes' memory cannot be
reached from here; Slurm's cleanup of those nodes frees it.

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
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from graft.engine.slurm_job import this_job_run
from graft.errors import Busy, ConfigError

LOCK_NAME = ".lock"

TERMINAL_JOB_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "TIMEOUT",
    }
)
"""Slurm job states after which none of the job's processes runs. Left out on purpose: COMPLETING (processes are
still being killed and the epilog runs), REVOKED (a federation's sibling job, which runs on another cluster),
REQUEUED and SPECIAL_EXIT (the job runs again under the same id, which its own next run takes over by restart
count)."""

FIRST_WAIT_S = 5.0
"""The first wait for a holder's Slurm job to end; each next one is as long as all before it together."""
WAIT_S = 300.0
"""How long a trainer waits, by default, for Slurm to report a lock holder's job ended before it refuses. A job
stays COMPLETING while its processes are killed and its epilog runs (seconds, up to Slurm's
UnkillableStepTimeout), and a loaded accounting daemon records a job's end a minute or more late; a refusal
costs a Snakemake retry and another wait in the queue, five minutes of a waiting allocation cost less."""

JobQuery = Callable[[str, str | None], str | None]
"""Asks Slurm for a job's state by job id and cluster (None: this one): the state normalised (``CANCELLED``, not
``CANCELLED by 123``), ``""`` for a job it does not list, None when it cannot be asked."""


BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
PID_NAMESPACE = Path("/proc/self/ns/pid")


def machine() -> dict[str, str | None]:
    """Where this process's pids mean something, as a lock or a workflow's record names it: the host name and, on
    Linux, the boot's id and the pid namespace. Short host names repeat across clusters that share a file system, a
    rebooted node reuses pids, and containers on one host share its boot but not its pids; each id tells one apart."""
    try:
        boot = BOOT_ID.read_text().strip() or None
    except OSError:
        boot = None
    try:
        namespace = str(PID_NAMESPACE.stat().st_ino)
    except OSError:
        namespace = None
    return {"host": socket.gethostname(), "boot_id": boot, "pid_namespace": namespace}


def on_this_machine(record: dict, me: dict) -> bool:
    """Whether the process ``record`` names ran where ``me`` (``machine``) runs, so that its pid can be looked up:
    the same host name and, where both record them, the same boot and pid namespace. Anything else is another
    machine, whose process only Slurm can say has ended (a reboot here is no proof: another machine of the same
    name looks the same from here)."""
    if record.get("host") != me["host"]:
        return False
    return all(record.get(k) is None or me.get(k) is None or record[k] == me[k] for k in ("boot_id", "pid_namespace"))


def pid_exists(pid: int) -> bool:
    """Whether a process of this id exists on this host (under any user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def slurm_lines(command: list[str]) -> list[str] | None:
    """The output lines of a Slurm command, None when it cannot be run, fails or gives no answer in 30 s."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    # squeue --clusters heads its answer with a "CLUSTER: <name>" line, also under --noheader
    return [line.strip() for line in done.stdout.splitlines() if line.strip() and not line.startswith("CLUSTER:")]


def _state(lines: list[str] | None) -> str | None:
    """One job's state from Slurm's lines: the first state in which a process may run (a heterogeneous job lists
    each component), else the first; sacct writes who cancelled a job after its state."""
    if lines is None:
        return None
    states = [line.split()[0].rstrip("+").upper() for line in lines]
    return next((s for s in states if s not in TERMINAL_JOB_STATES), states[0] if states else "")


def _clusters(cluster: str | None) -> list[str]:
    return [f"--clusters={cluster}"] if cluster else []


def sacct_state(job: str, cluster: str | None) -> str | None:
    """A ``JobQuery`` of Slurm's accounting, which knows finished jobs."""
    command = ["sacct", "-j", job, "-X", "--noheader", "--parsable2", "--format=State", *_clusters(cluster)]
    return _state(slurm_lines(command))


def squeue_state(job: str, cluster: str | None) -> str | None:
    """A ``JobQuery`` of Slurm's controller, which lists a job before accounting records it and, with every state
    asked for (``--states=all``), still lists it in its final state for ``MinJobAge`` after it ends (a site without
    accounting has no other evidence). It refuses the id of a job it does not list ("Invalid job id specified"),
    which says nothing about the job: counted as no answer."""
    command = ["squeue", "--noheader", "--states=all", f"--jobs={job}", "--format=%T", *_clusters(cluster)]
    return _state(slurm_lines(command))


class LockLost(ConfigError):
    """The run's lock is no longer this process's: another trainer judged it gone and took the run over."""


@dataclass(frozen=True)
class _Verdict:
    """What to do about a lock another process holds."""

    action: str
    """``take`` (with evidence, or forced), ``wait`` (ask Slurm again) or ``refuse``."""
    why: str
    """The evidence, the state seen, or why nothing can be learnt, in words."""
    leftovers: tuple[str | None, int, int | None] | None = None
    """Whose weight-sync files are known to be dead with the holder: ``sync_file_pattern``'s job, restart count and
    pid (graft.engine.weight_sync)."""


class RunLock:
    """The exclusive lock on a run directory, as a context manager; released on exit, also on error.

    ``sacct`` and ``squeue`` ask Slurm for a job's state (``JobQuery``; tests pass stand-ins), ``sleep`` waits
    between the questions for at most ``wait_s`` seconds in all; ``sync_dir`` is where this host's weight-sync
    files go (graft.engine.weight_sync.sync_directory), whose files of a dead holder are removed on taking over."""

    def __init__(
        self,
        root: str | Path,
        force: bool = False,
        sacct: JobQuery = sacct_state,
        squeue: JobQuery = squeue_state,
        sleep: Callable[[float], None] = time.sleep,
        wait_s: float = WAIT_S,
        sync_dir: Path | None = None,
    ):
        self.path = Path(root) / LOCK_NAME
        self.force = force
        self.queries = {"sacct": sacct, "squeue": squeue}
        self.sleep = sleep
        self.wait_s = wait_s
        self.sync_dir = sync_dir
        job, restart = this_job_run()
        self.me = {
            **machine(),
            "pid": os.getpid(),
            "slurm_job": job,
            "slurm_cluster": os.environ.get("SLURM_CLUSTER_NAME") if job else None,
            "restart": restart,
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
        waited = 0.0
        for _ in range(20):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = self._holder()
                if holder is None:  # being written this instant, or removed meanwhile: look again
                    self.sleep(0.05)
                    continue
                waited = self._take_over_or_wait(holder, waited)
                continue
            with os.fdopen(fd, "w") as handle:
                handle.write(json.dumps(self.me) + "\n")
            return
        raise Busy(f"--out: could not take the run lock {str(self.path)!r}; remove it if no run is active")

    def release(self) -> None:
        if self._holder() == self.me:
            self.path.unlink(missing_ok=True)

    def check_held(self) -> None:
        """Raise ``LockLost`` unless the lock file is still this one's: called before each save, so that a holder
        that was judged gone stops instead of writing over its successor's files."""
        holder = self._holder()
        if holder is None or holder.get("token") != self.me["token"]:
            now = f"held by {_who(holder)}" if holder else "gone"
            raise LockLost(
                f"--out: the run lock {str(self.path)!r} is no longer this run's ({_who(self.me)}), it is {now}: "
                "another trainer took the run over; this one stops without saving"
            )

    def _holder(self) -> dict | None:
        try:
            holder = json.loads(self.path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None
        return holder if isinstance(holder, dict) and {"host", "pid", "started"} <= holder.keys() else None

    def _judge(self, holder: dict) -> _Verdict:
        here = on_this_machine(holder, self.me)
        pid, job, restart = int(holder["pid"]), holder.get("slurm_job"), int(holder.get("restart") or 0)
        if here and not pid_exists(pid):
            return _Verdict("take", "that process no longer exists", (job, restart, pid))
        cluster = holder.get("slurm_cluster")
        same_job = job is not None and job == self.me["slurm_job"]
        if same_job and None not in (cluster, self.me["slurm_cluster"]):
            same_job = cluster == self.me["slurm_cluster"]
        if same_job and self.me["restart"] > restart:
            why = f"Slurm requeued this job since (its restart count {restart}, now {self.me['restart']})"
            return _Verdict("take", why, (job, restart, None))
        if self.force and not here:
            return _Verdict("take", "--force-unlock given")
        if same_job:
            return _Verdict("refuse", "a process of this very run of this Slurm job, which Slurm cannot tell apart")
        if job is None and here:
            return _Verdict("refuse", "that process still runs on this host")
        if job is None:
            return _Verdict("refuse", "no Slurm job is recorded, so nothing tells from here whether it still runs")
        seen = []
        for name, query in self.queries.items():
            state = query(str(job), cluster)
            if state:
                if state in TERMINAL_JOB_STATES:
                    return _Verdict("take", f"Slurm reports its job {state}", (job, restart, None))
                return _Verdict("wait", f"Slurm reports its job {state} ({name})")
            seen.append(f"{name}: {'not listed' if state == '' else 'no answer'}")
        return _Verdict("wait", f"Slurm does not report its job ({', '.join(seen)})")

    def _take_over_or_wait(self, holder: dict, waited: float) -> float:
        """Take over the lock, wait (returns the seconds waited so far) or refuse in one line."""
        who, here = _who(holder), on_this_machine(holder, self.me)
        verdict = self._judge(holder)
        if verdict.action == "wait":
            left = self.wait_s - waited
            if left <= 0:
                hint = "stop that run first" if here else "if that run is gone, rerun with --force-unlock"
                raise Busy(
                    f"--out: {str(self.path)!r}: in use by a run on {who}; {verdict.why} after {waited:.0f} s of "
                    f"waiting for it to end; {hint}"
                )
            delay = min(waited + FIRST_WAIT_S, left)  # the waits double: 5 s, 10 s, 20 s ...
            print(f"warning: the run lock of {who}: {verdict.why}; asking again in {delay:.0f} s", file=sys.stderr)
            self.sleep(delay)
            return waited + delay
        if verdict.action == "refuse":
            hint = "" if here else f"; if that process is gone, rerun with --force-unlock or remove {str(self.path)!r}"
            raise Busy(f"--out: {str(self.path)!r}: in use by a run on {who}; {verdict.why}{hint}")
        print(f"warning: taking over the run lock of {who}: {verdict.why}", file=sys.stderr)
        # rename first: of two processes taking over at once, only one succeeds, the other looks again
        stale = self.path.with_name(f"{LOCK_NAME}.stale.{self.me['pid']}")
        try:
            self.path.rename(stale)
        except FileNotFoundError:
            return waited
        try:
            if json.loads(stale.read_text()) != holder:  # another process took over first: its lock goes back
                os.link(stale, self.path)
            elif verdict.leftovers is not None:
                self._remove_sync_files(verdict.leftovers)
        except (OSError, json.JSONDecodeError):
            pass
        stale.unlink(missing_ok=True)
        return waited

    def _remove_sync_files(self, owner: tuple[str | None, int, int | None]) -> None:
        """The weight-sync files a dead holder left in this node's memory (several GB each)."""
        from graft.engine.weight_sync import sync_file_pattern

        if self.sync_dir is None or not self.sync_dir.is_dir():
            return
        for path in self.sync_dir.glob(sync_file_pattern(*owner)):
            path.unlink(missing_ok=True)
            print(f"warning: removed {path}, the dead holder's weight-sync file", file=sys.stderr)


def _who(holder: dict) -> str:
    """A lock's holder in words."""
    job = ""
    if holder.get("slurm_job"):
        cluster = f" on cluster {holder['slurm_cluster']}" if holder.get("slurm_cluster") else ""
        job = f", Slurm job {holder['slurm_job']}{cluster} (restart count {int(holder.get('restart') or 0)})"
    return f"{holder['host']} pid {holder['pid']}{job} (started {holder['started']})"
