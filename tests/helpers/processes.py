"""Killing a torchrun job the way a lost node kills it: every process at once."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path


def kill_torchrun(pid: int) -> None:
    """SIGKILL to torchrun's process group and to each of its workers' groups: torchrun starts every worker in a
    session of its own (torch.distributed.elastic's subprocess handler), which also holds that worker's helper
    processes (the grading pool, vLLM's engine cores), so a signal to torchrun's group alone leaves the workers
    running as orphans, still holding the run's lock."""
    groups = {os.getpgid(pid)}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, ppid, pgrp = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):  # the process ended while it was read
            continue
        if int(ppid) == pid and state != "Z":
            groups.add(int(pgrp))
    for group in groups:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
