"""A training step that hangs ends its job at the step's deadline (graft/train/deadline.py), and the retry resumes."""

from __future__ import annotations

import json
import subprocess
import sys

from graft.cli import main
from graft.train.deadline import EXIT_CODE

# graft train whose rollouts never return, as a wedged engine's would not
HUNG_ROLLOUT = """
import sys
import time

import graft.train.trainer


def hung_rollout(*args, **kwargs):
    time.sleep(600)


graft.train.trainer.rollout_step = hung_rollout
from graft.cli import main

sys.exit(main(sys.argv[1:]))
"""


def test_a_hung_rollout_ends_the_job_at_its_deadline_with_its_stack_and_the_retry_finishes(forced_world, tmp_path):
    out = tmp_path / "run"
    argv = ["train", "--config", str(forced_world["config"]), "--method", "graft", "--models", "A,B", "--seed", "0"]
    argv += ["--out", str(out), "--steps", "2", "--threads", "1"]
    hung = subprocess.run(
        [sys.executable, "-c", HUNG_ROLLOUT, *argv, "--set", "train.step_deadline_minutes=0.05"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert hung.returncode == EXIT_CODE, hung.stderr
    assert "in hung_rollout" in hung.stderr and "in step\n" in hung.stderr, hung.stderr
    last = hung.stderr.strip().splitlines()[-1]
    assert last.startswith("graft train: process 0: step 0 exceeded its deadline of 3 s"), hung.stderr
    # Snakemake's retry: the dead trainer's lock is taken over and the run trains to its end
    assert main([*argv, "--resume"]) == 0
    assert json.loads((out / "done.json").read_text())["steps"] == 2
