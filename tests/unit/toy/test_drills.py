"""Fact drills of the toy warm-up: every family's correct steps, out of their procedures."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from graft.seeding import derive
from graft.toy.build import SLIP_VARIANTS, warmup_examples
from graft.toy.spec import ToyModelSpec
from graft.toy.task import DRILL_PROBLEM, FAMILIES, fact_drill, make_problem, make_splits, solution_steps


def test_steps_of_a_worked_solution_by_hand():
    assert solution_steps(make_problem("mul", 1, (7, 86)).solution) == ["7*6 = 42", "7*8 = 56", "56+4 = 60"]
    assert solution_steps(make_problem("div", 1, (602, 7)).solution) == ["60/7 = 8 r 4", "42/7 = 6 r 0"]
    assert solution_steps(make_problem("add", 1, (47, 38)).solution) == ["7+8 = 15", "4+3+1 = 8"]


PROBLEMS = [make_problem(f, 1, ops) for f, ops in [("add", (47, 38)), ("mul", (7, 86)), ("div", (602, 7))]]


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 12), st.integers(0, 10_000))
def test_a_drill_holds_only_correct_steps_of_the_given_problems(facts, seed):
    allowed = {step for p in PROBLEMS for step in solution_steps(p.solution)}
    drill = fact_drill(PROBLEMS, facts, random.Random(seed)).split(", ")
    assert len(drill) == facts
    assert set(drill) <= allowed


def _spec(drill: float) -> ToyModelSpec:
    return ToyModelSpec(
        arch="gpt2", pre_tokenizer="space_words", vocab_size=100, hidden=8, layers=1, heads=1,
        mix={f: 1.0 for f in FAMILIES}, steps=1, examples=50, slip={"mul": 0.9}, drill=drill,
    )  # fmt: skip


def test_drills_make_up_their_share_and_leave_the_problems_as_they_were():
    warmup = make_splits(0, test_per_family=2, validation_per_family=2).train[::50]
    plain = warmup_examples("smol", warmup, _spec(0.0), seed=3)
    drilled = warmup_examples("smol", warmup, _spec(0.2), seed=3)
    drills = [s for p, s in drilled if p == DRILL_PROBLEM]
    assert len(plain) == 50 * SLIP_VARIANTS and not any(p == DRILL_PROBLEM for p, _ in plain)
    assert len(drills) == round(len(plain) * 0.2 / 0.8)
    assert sorted(e for e in drilled if e[0] != DRILL_PROBLEM) == sorted(plain)
    steps = {s for p in warmup for s in solution_steps(p.solution)}
    assert all(set(d.split(", ")) <= steps for d in drills)
    assert derive(3, "warmup_drills", "smol") != derive(3, "warmup_slips", "smol")
