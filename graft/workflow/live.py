"""The workflow invocations that run jobs on a results tree, and the config each one's jobs read.

Each invocation's jobs read the config snapshot it planned them with (``configs/<digest>.yaml``, never rewritten),
so a later invocation cannot change what a pending job or its retry trains. A later invocation with another config
on the same tree while jobs run would still mix two configs in one tree (its evaluations and report beside the
other's training), so it is refused, before any job, in one line naming the running one. Each invocation records
itself in ``<tree>/.workflows/<host>-<pid>-<token>.json`` when its jobs start and removes the record when it ends.

A record is taken for a running invocation unless there is evidence that it ended, as for a run lock
(graft.train.lock): its pid no longer exists where it ran (graft.train.lock.on_this_machine: host name, boot, pid
namespace), or Slurm reports the job it ran in (a controller job, slurm/controller.sbatch) in a terminal state; and,
for an invocation through Slurm, none of the jobs it submitted is still queued or running (they all bear one name,
the executor's run id, which ``squeue --name`` lists), since a controller that died leaves its jobs behind. Anything
else (another host with no job, a query with no answer) keeps the refusal, whose line names the record to remove
once that invocation is known to be gone. An invocation with the same config is let through while the recorded one
runs (its own next round, graft.workflow.rounds) or once it has ended; not while only its jobs are left in the
queue, which would train beside the new ones: their ids are named, to wait for or ``scancel --name``. The
controller's Slurm job is read while the workflow is parsed (``controller_job``): the Slurm executor drops the
SLURM_* variables from the environment before its jobs start.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from graft.engine.slurm_job import this_job_run
from graft.errors import ConfigError
from graft.results import write_text
from graft.train.lock import (
    TERMINAL_JOB_STATES,
    JobQuery,
    machine,
    on_this_machine,
    pid_exists,
    sacct_state,
    slurm_lines,
    squeue_state,
)

RECORDS = ".workflows"

CONTROLLER_ENV = "GRAFT_CONTROLLER_JOB"
"""Where ``controller_job`` keeps the controller's Slurm job for the invocation's next rounds, which start after the
Slurm executor has dropped the SLURM_* variables."""


def controller_job() -> tuple[str | None, str | None]:
    """The Slurm job (id, cluster) this invocation runs in, None outside Slurm; kept in ``CONTROLLER_ENV`` for the
    processes it starts."""
    job, _ = this_job_run()
    if job:
        found = (job, os.environ.get("SLURM_CLUSTER_NAME"))
    else:
        kept = os.environ.get(CONTROLLER_ENV, "")
        found = tuple(kept.split(",", 1)) if "," in kept else (None, None)
    if found[0]:
        os.environ[CONTROLLER_ENV] = f"{found[0]},{found[1] or ''}"
    return found[0], found[1] or None


def _records(tree: Path) -> list[tuple[Path, dict | None]]:
    directory = tree / RECORDS
    if not directory.is_dir():
        return []
    found = []
    for path in sorted(directory.glob("[!.]*.json")):  # not a record being written (graft.results.write_text)
        try:
            record = json.loads(path.read_text())
        except FileNotFoundError:  # its invocation ended meanwhile
            continue
        except (OSError, ValueError):
            record = None
        readable = isinstance(record, dict) and {"host", "pid", "config"} <= record.keys()
        found.append((path, record if readable else None))
    return found


def queued_jobs(name: str) -> list[str] | None:
    """The ids of the Slurm jobs named ``name`` that are queued or running, None when Slurm gives no answer. A job
    in COMPLETING is left out: its processes are being killed (a ``scancel`` a moment ago), and a training job's
    retry waits for them through its run lock (graft.train.lock)."""
    for wait in (0, 2, 4):  # a controller busy for a moment answers nothing: asked again before giving up
        time.sleep(wait)
        lines = slurm_lines(["squeue", "--noheader", f"--name={name}", "--format=%i %T"])
        if lines is not None:
            break
    else:
        return None
    return [line.split()[0] for line in lines if line.split()[-1].upper() not in {"COMPLETING", *TERMINAL_JOB_STATES}]


def _jobs_left(record: dict, queued: Callable[[str], list[str] | None]) -> bool:
    """Whether the Slurm jobs of ``record``'s invocation may still queue or run (no answer counts as yes)."""
    run = record.get("slurm_run")
    return bool(run) and queued(run) != []


def _process_ended(record: dict, me: dict, queries: tuple[JobQuery, ...]) -> bool:
    if on_this_machine(record, me) and not pid_exists(int(record["pid"])):
        return True
    job = record.get("slurm_job")
    if job is None:
        return False
    for query in queries:
        state = query(str(job), record.get("slurm_cluster"))
        if state:
            return state in TERMINAL_JOB_STATES
    return False


def _who(record: dict) -> str:
    job = f", Slurm job {record['slurm_job']}" if record.get("slurm_job") else ""
    jobs = f", its jobs: squeue --name={record['slurm_run']}" if record.get("slurm_run") else ""
    return f"pid {record['pid']} on {record['host']}{job}, started {record.get('started', '?')}{jobs}"


def conflict(
    tree: str | Path,
    config: str | Path,
    queries: tuple[JobQuery, ...] = (sacct_state, squeue_state),
    mine: Path | None = None,
    tidy: bool = False,
    queued: Callable[[str], list[str] | None] = queued_jobs,
) -> str | None:
    """Why an invocation with the snapshot ``config`` may not run jobs on ``tree`` now, in one line, or None: another
    invocation (not the record ``mine``) runs jobs on it with another config. With ``tidy``, records of ended
    invocations are removed (a dry run writes nothing)."""
    tree, config = Path(tree), Path(config)
    me = machine()
    for path, other in _records(tree):
        if path == mine:
            continue
        if other is None:
            return (
                f"{str(path)!r} is not a workflow's record (expected JSON with host, pid and config); remove it if no "
                "workflow runs on this tree"
            )
        if _process_ended(other, me, queries):
            if not _jobs_left(other, queued):
                if tidy:
                    path.unlink(missing_ok=True)
                continue
            return (
                f"results {str(tree)!r}: the jobs of a workflow that ended ({_who(other)}) may still queue or run, "
                f"and would train beside this one's: wait until squeue --name={other['slurm_run']} lists none, or "
                f"scancel --name={other['slurm_run']}"
            )
        if other["config"] != config.name:
            return (
                f"results {str(tree)!r}: another workflow runs jobs on this tree with another config "
                f"(configs/{other['config']}, this one configs/{config.name}; {_who(other)}): let it end or stop it "
                f"before changing the config, or point results elsewhere; if it is gone, remove {str(path)!r}"
            )
    return None


def start(
    tree: str | Path,
    config: str | Path,
    slurm_run: str | None = None,
    controller: tuple[str | None, str | None] = (None, None),
    queries: tuple[JobQuery, ...] = (sacct_state, squeue_state),
    queued: Callable[[str], list[str] | None] = queued_jobs,
) -> Path:
    """Record this invocation as running jobs on ``tree`` with the snapshot ``config`` (returns the record, removed
    when this process exits), or raise ConfigError with ``conflict``'s line. ``slurm_run``: the name of every Slurm
    job it submits, None under another executor; ``controller``: the Slurm job it runs in (``controller_job``).
    Records of ended invocations are removed."""
    tree, config = Path(tree), Path(config)
    me = machine()
    job, cluster = controller
    # a token too: two machines of one host name (another cluster's, a container's) may run the same pid
    mine = tree / RECORDS / f"{me['host']}-{os.getpid()}-{uuid.uuid4().hex[:8]}.json"
    record = {
        **me,
        "pid": os.getpid(),
        "slurm_job": job,
        "slurm_cluster": cluster,
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "config": config.name,
        "slurm_run": slurm_run,
    }
    write_text(mine, json.dumps(record) + "\n")
    # written first, then read: of two invocations starting at once, each sees the other
    problem = conflict(tree, config, queries, mine, tidy=True, queued=queued)
    if problem:
        stop(mine)
        raise ConfigError(problem)
    atexit.register(stop, mine)  # however the invocation ends, short of a SIGKILL
    return mine


def stop(record: Path) -> None:
    """Remove this invocation's ``record`` (and the records' directory once empty)."""
    record.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # another invocation's record is in it
        record.parent.rmdir()
