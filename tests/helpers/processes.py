"""A torchrun job's processes, as tests find and kill them."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc); one that ends while it is read is left out."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        if parent == pid:
            found.append(int(stat.parent.name))
    return found


def kill_torchrun(pid: int) -> None:
    """SIGKILL to torchrun's process group and to each of its workers' groups, as a lost node kills them all at
    once: torchrun starts every worker in a session of its own (torch.distributed.elastic's subprocess handler),
    which also holds that worker's helper processes (the grading pool, vLLM's engine cores), so a signal to
    torchrun's group alone leaves the workers running as orphans, still holding the run's lock."""
    groups = {os.getpgid(pid)}
    for child in children(pid):
        with contextlib.suppress(ProcessLookupError):
            groups.add(os.getpgid(child))
    for group in groups:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
