"""``graft train`` whose whole process tree is sent SIGTERM as a step's rollout starts, as Slurm signals the
processes of a preempted job's step: the trainer, which notes it, and its helpers, vLLM's engine cores among them,
which exit on it. The rollout then runs against dead engines. vLLM's client learns of a core's death only after its
engine manager has shut the other processes down; here that takes a few seconds more, so that the rollout's requests
always go out before the client knows (the case in which vLLM alone would wait for their outputs forever, and
graft.engine.vllm.forward_engine_death must end the wait). Usage: python stop_in_rollout.py STEP <train args>."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for helpers

import graft.train.trainer as trainer
from graft.cli import main
from helpers.processes import children


def descendants(pid: int) -> list[int]:
    found = children(pid)
    return found + [d for child in found for d in descendants(child)]


def alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie, dead and not yet reaped by its parent, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def title(pid: int) -> str:
    """A process's title (vLLM names its engine processes), empty once it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def signal_the_tree_then_roll_out(real, stop_step: int):
    def rollout_step(learner, step, *args, **kwargs):
        if step == stop_step:
            helpers = descendants(os.getpid())
            os.kill(os.getpid(), signal.SIGTERM)
            for pid in helpers:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
            # the engine cores (process title VLLM::EngineCore) must be gone before the rollout starts; other helpers
            # may ignore SIGTERM (multiprocessing's resource tracker does)
            engines = [pid for pid in helpers if "EngineCore" in title(pid)]
            deadline = time.monotonic() + 120
            while any(alive(pid) for pid in engines) and time.monotonic() < deadline:
                time.sleep(0.1)
            ended = sum(not alive(pid) for pid in engines)
            print(f"stop_in_rollout: {ended} of {len(engines)} engine cores ended on SIGTERM", file=sys.stderr)
        return real(learner, step, *args, **kwargs)

    return rollout_step


LATE_NOTICE_SECONDS = 5.0
"""How much later than itself vLLM's client learns of a dead engine core."""


def notice_engine_death_late() -> None:
    from vllm.v1.engine.utils import CoreEngineProcManager

    monitor = CoreEngineProcManager.monitor_engine_liveness

    def late(manager):
        monitor(manager)
        time.sleep(LATE_NOTICE_SECONDS)

    CoreEngineProcManager.monitor_engine_liveness = late


if __name__ == "__main__":
    notice_engine_death_late()
    trainer.rollout_step = signal_the_tree_then_roll_out(trainer.rollout_step, int(sys.argv[1]))
    sys.exit(main(sys.argv[2:]))
