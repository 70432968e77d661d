"""Stopping a training run on a signal with its work saved (docs/design.md section 8).

Slurm asks a job to stop in two ways: the warning the Slurm profiles request before a training job's time limit
(``--signal=URG@<lead>``, a lead covering the cell's longest step and a save, graft.planning.site: SIGURG to
every process of the job's steps) and SIGTERM, which preemption sends (and the
time limit, shortly before SIGKILL). SIGURG is chosen because every process that does not ask for it ignores it
by default: the shells, Snakemake, torchrun, the grading pool and vLLM's engine processes between Slurm and the
trainers keep running, whereas SIGUSR1 would kill them. While a run trains, both signals only set a flag; the
trainer asks at two points of each step, every process in one collective so that all stop at the same step:
before the step's first update (the step is abandoned, the state it started from is saved) and after the step
(it is saved). The process then exits with ``EXIT_CODE`` and a rerun with ``--resume`` continues.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

STOP_SIGNALS = (signal.SIGURG, signal.SIGTERM)
"""The warning before a Slurm time limit (the profiles' ``--signal=URG@...``) and preemption's SIGTERM."""

EXIT_CODE = os.EX_TEMPFAIL
"""``graft train``'s exit code after a stop: non-zero, so that Snakemake retries the job, which resumes."""


class StopRequests:
    """While entered (a context manager, on the main thread), records the first stop signal this process
    receives instead of ending it; ``received`` names it. Elsewhere the signals keep their previous handling."""

    def __init__(self) -> None:
        self.received: signal.Signals | None = None
        self._previous: dict[signal.Signals, object] = {}

    def _handle(self, signum: int, frame) -> None:
        if self.received is None:
            self.received = signal.Signals(signum)

    def __enter__(self) -> StopRequests:
        # Python may install handlers only on the main thread; a trainer run from another thread keeps the defaults
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
                # the system calls of other threads (gloo, vLLM's clients) restart instead of failing with EINTR
                signal.siginterrupt(sig, False)
        return self

    def __exit__(self, *exc) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, signal.SIG_DFL if previous is None else previous)  # None: a handler set outside Python
        self._previous.clear()


class TrainingStopped(Exception):
    """A run stopped on a signal once every process had agreed to, its work saved."""

    def __init__(self, received: signal.Signals | None, next_step: int, checkpoint: Path | None):
        self.received, self.next_step, self.checkpoint = received, next_step, checkpoint
        by = received.name if received is not None else "a signal to another process"
        saved = f"saved {checkpoint}" if checkpoint is not None else "its newest checkpoint was already there"
        super().__init__(f"stopped by {by} before step {next_step}, {saved}; --resume continues from there")
