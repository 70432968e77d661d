"""The record of a training job that failed for good: ``failed.json`` in its run directory, written by the job's last
attempt and read when the workflow plans the disk budget's lanes (graft.planning.turns.failed_cells).

Snakemake removes a failed job's outputs; this file is none, so it stays. ``python -m graft.workflow.failures --run
DIR --attempt N --exit CODE`` is what the training rule's shell runs when the trainer fails.
"""

from __future__ import annotations

import argparse
import json
import os
from datetime import UTC, datetime
from pathlib import Path

from graft.results import RunDir, write_text
from graft.train.stop import EXIT_CODE

ATTEMPTS_ENV = "GRAFT_TRAIN_ATTEMPTS"
"""How many attempts a training job has (Snakemake's retries and one), which the workflow's main process sets in the
environment: Snakemake starts each job with its attempt but no retries, and Slurm's jobs inherit the environment
that submits them (sbatch --export=ALL)."""


def record_failure(run: RunDir, attempt: int, attempts: int | None, code: int, now: datetime | None = None) -> bool:
    """Record in ``run.failed`` that its training job failed for good: on its last of ``attempts`` (None: unknown,
    so never) with a ``code`` other than a stop's (graft.train.stop.EXIT_CODE: a job that ran out of time or was
    preempted saved, and resumes where it stands). The first failure is kept, so that a cell's place in the lanes
    does not move when a retry of it fails again. Returns whether it wrote the record."""
    if code in (0, EXIT_CODE) or attempts is None or attempt < attempts or run.failed.exists():
        return False
    at = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    write_text(run.failed, json.dumps({"failed_at": at, "attempt": attempt, "exit": code}) + "\n")
    return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Record a training job's failure on its last attempt.")
    parser.add_argument("--run", required=True, help="the cell's run directory")
    parser.add_argument("--attempt", type=int, required=True, help="Snakemake's attempt of the job")
    parser.add_argument("--exit", type=int, required=True, help="the trainer's exit status")
    ns = parser.parse_args(argv)
    attempts = os.environ.get(ATTEMPTS_ENV)
    record_failure(RunDir(Path(ns.run)), ns.attempt, int(attempts) if attempts else None, ns.exit)


if __name__ == "__main__":
    main()
