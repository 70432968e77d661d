"""The workflow invocations that run jobs on a results tree, and the config each one's jobs read.

Each invocation's jobs read the config snapshot it planned them with (``configs/<digest>.yaml``, never rewritten),
so a later invocation cannot change what a pending job or its retry trains. A later invocation with another config
on the same tree while jobs run would still mix two configs in one tree (its evaluations and report beside the
other's training), so it is refused, before any job, in one line naming the running one. Each invocation records
itself in ``<tree>/.workflows/<host>-<pid>.json`` when its jobs start and removes the record when it ends.

A record is taken for a running invocation unless there is evidence that it ended, as for a run lock
(graft.train.lock): its pid no longer exists on this host, or Slurm reports the job it ran in (a controller job,
slurm/controller.sbatch) in a terminal state; and, for an invocation through Slurm, none of the jobs it submitted
is still queued or running (they all bear one name, the executor's run id, which ``squeue --name`` lists), since a
controller that died leaves its jobs behind. Anything else (another host with no job, a query with no answer)
keeps the refusal, whose line names the record to remove once that invocation is known to be gone. An invocation
with the same config is let through: a resubmitted controller picks up where the tree stands, and its training jobs
wait for their run locks.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from graft.engine.slurm_job import this_job_run
from graft.errors import ConfigError
from graft.results import write_text
from graft.train.lock import TERMINAL_JOB_STATES, JobQuery, pid_exists, sacct_state, slurm_lines, squeue_state

RECORDS = ".workflows"


def _records(tree: Path) -> list[tuple[Path, dict | None]]:
    directory = tree / RECORDS
    if not directory.is_dir():
        return []
    found = []
    for path in sorted(directory.glob("*.json")):
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
    """The ids of the Slurm jobs named ``name`` that are queued or running (squeue's default states), None when
    Slurm gives no answer."""
    return slurm_lines(["squeue", "--noheader", f"--name={name}", "--format=%i"])


def ended(
    record: dict, host: str, queries: tuple[JobQuery, ...], queued: Callable[[str], list[str] | None] = queued_jobs
) -> bool:
    """Whether there is evidence that the invocation of ``record`` ended, its Slurm jobs included."""
    if not _process_ended(record, host, queries):
        return False
    run = record.get("slurm_run")
    return not run or queued(run) == []


def _process_ended(record: dict, host: str, queries: tuple[JobQuery, ...]) -> bool:
    if record["host"] == host and not pid_exists(int(record["pid"])):
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
    host = socket.gethostname()
    for path, other in _records(tree):
        if path == mine:
            continue
        if other is None:
            return (
                f"{str(path)!r} is not a workflow's record (expected JSON with host, pid and config); remove it if no "
                "workflow runs on this tree"
            )
        if ended(other, host, queries, queued):
            if tidy:
                path.unlink(missing_ok=True)
            continue
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
    queries: tuple[JobQuery, ...] = (sacct_state, squeue_state),
    queued: Callable[[str], list[str] | None] = queued_jobs,
) -> Path:
    """Record this invocation as running jobs on ``tree`` with the snapshot ``config`` (returns the record), or
    raise ConfigError with ``conflict``'s line. ``slurm_run``: the name of every Slurm job it submits, None under
    another executor. Records of ended invocations are removed."""
    tree, config = Path(tree), Path(config)
    host = socket.gethostname()
    job, _ = this_job_run()
    mine = tree / RECORDS / f"{host}-{os.getpid()}.json"
    record = {
        "host": host,
        "pid": os.getpid(),
        "slurm_job": job,
        "slurm_cluster": os.environ.get("SLURM_CLUSTER_NAME") if job else None,
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
    return mine


def stop(record: Path) -> None:
    """Remove this invocation's ``record`` (and the records' directory once empty)."""
    record.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # another invocation's record is in it
        record.parent.rmdir()
