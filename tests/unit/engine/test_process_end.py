"""How a training process ends (graft.engine.distributed.end_process): a single process returns its code; a process
of a distributed job exits with it at once, its output flushed, with no interpreter teardown left to abort it."""

from __future__ import annotations

import subprocess
import sys

from graft.engine.distributed import SINGLE, end_process

# Output still in the buffers (stdout to a pipe is block-buffered), then an atexit hook that teardown would run.
DISTRIBUTED_END = """
import atexit, sys
from graft.engine.distributed import World, end_process
atexit.register(lambda: print("teardown ran", file=sys.stderr))
print("result written", end="")
print("last line", file=sys.stderr, end="")
end_process(World(rank=1, size=2), {code})
print("after the end")
"""


def test_a_single_process_gets_its_code_back():
    assert end_process(SINGLE, 3) == 3
    assert end_process(SINGLE, 0) == 0


def test_a_distributed_process_exits_with_its_code_and_its_output_flushed_without_teardown():
    for code in (0, 3):
        result = subprocess.run(
            [sys.executable, "-c", DISTRIBUTED_END.format(code=code)], capture_output=True, text=True, timeout=120
        )
        assert result.returncode == code
        assert result.stdout == "result written"  # flushed, and nothing after the end ran
        assert result.stderr == "last line"  # no atexit hook: the interpreter was not torn down
