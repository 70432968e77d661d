"""Every training step's deadline (graft/train/deadline.py): how long it is, and that a process past it dumps its
stacks and exits, whether it waits in a collective that a peer never reaches, sleeps, or blocks holding the GIL."""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys

import pytest

from graft.config import load_config
from graft.methods import get_method
from graft.planning.plan import deadline_line, step_lines, training_cells
from graft.planning.step_time import DEADLINE_FLOOR_S, FIRST_STEP_ALLOWANCE, longest_step_seconds, step_deadline_s
from graft.train.deadline import EXIT_CODE, StepDeadline

LINE = "exceeded its deadline of 2 s (train.step_deadline_factor, train.step_deadline_minutes)"
RESUMES = "the job's retry (graft train --resume) resumes from the last checkpoint"


def test_a_deadline_is_the_factor_times_the_reference_above_a_floor_and_the_first_step_gets_more():
    assert step_deadline_s(factor=5, minutes=None, reference_s=1000, first=False) == 5000
    assert step_deadline_s(factor=5, minutes=None, reference_s=1000, first=True) == FIRST_STEP_ALLOWANCE * 5000
    assert step_deadline_s(factor=5, minutes=None, reference_s=2, first=False) == DEADLINE_FLOOR_S
    # no reference yet (a CPU configuration's first step): the floor, with the first step's allowance
    first = step_deadline_s(factor=5, minutes=None, reference_s=None, first=True)
    assert first == FIRST_STEP_ALLOWANCE * DEADLINE_FLOOR_S


def test_minutes_set_are_every_steps_deadline_the_first_included_and_below_the_floor():
    for first in (True, False):
        assert step_deadline_s(factor=5, minutes=0.5, reference_s=1000, first=first) == 30


def test_the_reference_is_the_prediction_or_the_slowest_finished_step_whichever_is_longer():
    predicted = StepDeadline(factor=4, minutes=None, predicted_s=1000)
    assert predicted.seconds() == FIRST_STEP_ALLOWANCE * 4000
    with predicted.step(0):
        pass
    assert predicted.seconds() == 4000
    predicted.slowest_s = 1500  # a step slower than predicted raises the deadlines after it
    assert predicted.seconds() == 6000

    measured = StepDeadline(factor=4, minutes=None, predicted_s=None)
    assert measured.seconds() == FIRST_STEP_ALLOWANCE * DEADLINE_FLOOR_S
    with measured.step(0):
        pass
    assert 0 < measured.slowest_s < 60 and measured.seconds() == DEADLINE_FLOOR_S


def test_a_step_that_raises_is_not_a_finished_step():
    deadline = StepDeadline(factor=4, minutes=None, predicted_s=None)
    with pytest.raises(KeyError), deadline.step(0):
        raise KeyError
    assert deadline.slowest_s is None


def test_the_prediction_is_the_cells_longest_step_under_its_methods_switches():
    cfg = load_config("config/paper.yaml")
    grpo = get_method("grpo_n8")
    step = longest_step_seconds(cfg, grpo, ("smollm3",))
    assert step > 0
    assert longest_step_seconds(cfg, dataclasses.replace(grpo, n=16), ("smollm3",)) > step  # --set method.n=16
    assert longest_step_seconds(cfg, get_method("grpo_n8_ds"), ("smollm3",)) > step  # every extra draw made
    assert longest_step_seconds(load_config("config/smoke.yaml"), grpo, ("smol",)) is None  # a CPU configuration


def rows(cfg) -> dict[tuple[str, str], list[str]]:
    """The rows of ``graft plan``'s step table of one-model cells, by method and model: colocated, split, deadline."""
    table = (line.split() for line in step_lines(cfg, training_cells(cfg)))
    return {(row[0], row[1]): row[2:5] for row in table if row[2] != "+"}


def test_graft_plan_prints_each_kind_of_cells_deadline():
    cfg = load_config("config/paper.yaml")
    colocated, _, deadline = rows(cfg)[("grpo_n32", "smollm3")]
    assert float(deadline) == pytest.approx(5 * float(colocated), abs=5)  # the factor times the step
    assert float(rows(cfg)[("grpo_n8", "smollm3")][2]) == DEADLINE_FLOOR_S  # a shorter step: the floor
    assert "train.step_deadline_factor 5 x the longer of" in deadline_line(cfg)
    fixed = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, step_deadline_minutes=20))
    assert deadline_line(fixed) == "step deadline: 20 minutes, every step (train.step_deadline_minutes)"
    assert float(rows(fixed)[("grpo_n32", "smollm3")][2]) == 1200


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Two processes of a gloo group: process 0 waits in an all_reduce that process 1 never reaches.
COLLECTIVE = """
import time

import torch
import torch.distributed as dist

from graft.engine.distributed import init_world
from graft.train.deadline import StepDeadline


def reach_the_all_reduce():
    dist.all_reduce(torch.zeros(1))


def never_reach_the_all_reduce():
    time.sleep(600)


world = init_world()
with StepDeadline(factor=4, minutes=2 / 60, predicted_s=None, rank=world.rank) as deadline, deadline.step(7):
    (reach_the_all_reduce if world.rank == 0 else never_reach_the_all_reduce)()
"""


def test_every_process_of_a_group_hung_in_a_collective_dumps_its_stacks_and_exits():
    env = {**os.environ, "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", COLLECTIVE],
            env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)},
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in (0, 1)
    ]
    errs = [proc.communicate(timeout=120)[1] for proc in procs]
    for rank, (proc, err) in enumerate(zip(procs, errs, strict=True)):
        assert proc.returncode == EXIT_CODE, err
        last = err.strip().splitlines()[-1]
        assert last.startswith(f"graft train: process {rank}: step 7 {LINE}") and last.endswith(RESUMES), err
    assert "in all_reduce" in errs[0] and "in reach_the_all_reduce" in errs[0], errs[0]
    assert "in never_reach_the_all_reduce" in errs[1], errs[1]


# A call that blocks holding the GIL (ctypes.PyDLL keeps it): only faulthandler's C thread can end the process.
GIL_HELD = """
import ctypes

from graft.train import deadline as watchdog

watchdog.BACKSTOP_S = 1.0


def hold_the_gil():
    ctypes.PyDLL(None).sleep(600)


with watchdog.StepDeadline(factor=4, minutes=2 / 60, predicted_s=None) as deadline, deadline.step(3):
    hold_the_gil()
"""


def test_a_step_that_blocks_holding_the_gil_is_ended_by_faulthandlers_thread():
    result = subprocess.run([sys.executable, "-c", GIL_HELD], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("Timeout (0:00:03)!") and "in hold_the_gil" in result.stderr, result.stderr
    assert LINE not in result.stderr  # the Python watcher never got the GIL
