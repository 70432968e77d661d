"""A deadline on every training step, so that a hung step ends its job instead of holding its GPUs until the job's
time limit (docs/operations.md, "When things break"): a wedged vLLM engine, a file system that stops answering, a
process that never reaches a collective its peers wait in.

Each process watches its own steps, so every process of a hung job reaches its deadline within moments of the
others, whichever one hung, and each leaves its stacks in the log. Two watchers, because a hang may hold the GIL:

- a Python thread, woken at the deadline, writes every thread's stack (faulthandler) and one line naming the step
  and its deadline, then exits with ``EXIT_CODE``. It needs the GIL, which the calls a hung step waits in release:
  torch's collectives and ``wait`` (its bindings drop the GIL while they block), sleeps, socket polls (vLLM's
  engine client) and file reads;
- faulthandler's own watchdog, a C thread armed ``BACKSTOP_S`` later, dumps the stacks and exits with code 1
  without taking the GIL: for a C extension that blocks while it holds the GIL, where the first never runs. Its
  dump starts with faulthandler's ``Timeout (h:mm:ss)!`` in place of the line.

Either way the process ends without the interpreter's teardown, which would wait on the hung thread, and a non-zero
exit makes Snakemake retry the job, which resumes (``graft train --resume``). Checkpoint saves and evaluations
between the steps have no deadline.
"""

from __future__ import annotations

import faulthandler
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from graft.planning.step_time import step_deadline_s

BACKSTOP_S = 60.0
"""How long after the deadline faulthandler's C thread ends a process whose GIL the hung call holds."""

EXIT_CODE = 124
"""The exit code of a step past its deadline (the ``timeout`` command's): non-zero, so that Snakemake retries the
job, and not ``graft.train.stop``'s, so that a log's reader can tell a hang from a stop."""

STDERR = 2
"""The log's file descriptor. The watchdog writes to it directly: the hung thread may hold ``sys.stderr``'s lock."""


class StepDeadline:
    """One process's step deadlines (``step_deadline_s``), and, while entered (a context manager), the watchdog
    that ends the process when a step outlives its deadline. ``predicted_s``: the step time's prediction for the
    run's cell (None on a CPU configuration); each step finished in time becomes the reference once it is the
    slowest. ``rank``: the process's, named in its line."""

    def __init__(self, factor: float, minutes: float | None, predicted_s: float | None, rank: int = 0):
        self.factor, self.minutes, self.predicted_s, self.rank = factor, minutes, predicted_s, rank
        self.slowest_s: float | None = None
        """The slowest step this process has finished; None before its first."""
        self._armed: tuple[int, float, float] | None = None
        """The step under way, its deadline in seconds and the monotonic time it is due; None between steps."""
        self._closed = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._watch, name="graft-step-deadline", daemon=True)

    def seconds(self) -> float:
        """The deadline of the next step."""
        known = [s for s in (self.predicted_s, self.slowest_s) if s is not None]
        reference = max(known) if known else None
        return step_deadline_s(
            factor=self.factor, minutes=self.minutes, reference_s=reference, first=self.slowest_s is None
        )

    @contextmanager
    def step(self, step: int) -> Iterator[None]:
        """Watch ``step`` while the block runs; a block that ends in time (without an exception) counts as a
        finished step."""
        seconds = self.seconds()
        start = time.monotonic()
        faulthandler.dump_traceback_later(seconds + BACKSTOP_S, exit=True, file=STDERR)
        with self._changed:
            self._armed = (step, seconds, start + seconds)
            self._changed.notify()
        try:
            yield
        finally:
            faulthandler.cancel_dump_traceback_later()
            with self._changed:
                self._armed = None
        elapsed = time.monotonic() - start
        self.slowest_s = max(self.slowest_s or 0.0, elapsed)

    def __enter__(self) -> StepDeadline:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify()
        self._thread.join()

    def _watch(self) -> None:
        with self._changed:
            while not self._closed:
                if self._armed is None:
                    self._changed.wait()
                    continue
                step, seconds, due = self._armed
                left = due - time.monotonic()
                if left > 0:
                    self._changed.wait(left)
                else:
                    self._expire(step, seconds)

    def _expire(self, step: int, seconds: float) -> None:
        """Every thread's stack, then the line, last in the log where a reader looks first; then the exit."""
        faulthandler.dump_traceback(file=STDERR, all_threads=True)
        line = (
            f"graft train: process {self.rank}: step {step} exceeded its deadline of {seconds:,.0f} s "
            "(train.step_deadline_factor, train.step_deadline_minutes); every thread's stack is above. Exiting with "
            f"code {EXIT_CODE}: the job's retry (graft train --resume) resumes from the last checkpoint\n"
        )
        os.write(STDERR, line.encode())
        os._exit(EXIT_CODE)
