"""Slipped solutions of the toy task: the procedure a half-trained model writes, ending in that procedure's
answer, and the warm-up that draws them."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graft.engine.reward import last_boxed
from graft.toy.task import FAMILIES, _operands, make_problem, slip_points, slipped_solution, solver_slip_points

HAND = [
    ("add", (47, 38), "47+38: 7+8 = 15, 4+3 = 7, so \\boxed{75}"),
    ("sub", (42, 17), "42-17: 12-7 = 5, 4-1 = 3, so \\boxed{35}"),
    ("mul", (7, 86), "7*86: 7*6 = 42, 7*8 = 56, so \\boxed{562}"),
    ("div", (602, 7), "602/7: 60/7 = 8 r 4, 2/7 = 0 r 2, so \\boxed{80}"),
    ("mul2", (23, 47), "23*47: 20*40 = 800, 20*7 = 140, 3*40 = 120, 3*7 = 21, 800+140+120 = 1060, so \\boxed{1060}"),
    ("add3", (47, 38, 29), "47+38+29: 7+8+9 = 24, 4+3+2 = 9, so \\boxed{94}"),
    ("sub3", (402, 39, 38), "402-39-38: 22-9-8 = 5, 10-3-3 = 4, so \\boxed{445}"),
]


@pytest.mark.parametrize(("family", "operands", "expected"), HAND)
def test_every_slip_taken_by_hand(family, operands, expected):
    assert slipped_solution(make_problem(family, 1, operands), 1.0, random.Random(0)) == expected


problems = st.sampled_from(FAMILIES).flatmap(
    lambda f: st.sampled_from(list(_operands(f, 1))[::37]).map(lambda ops: make_problem(f, 1, ops))
)


@settings(max_examples=200, deadline=None)
@given(problems, st.integers(0, 1000))
def test_no_slip_is_the_solution_and_any_slip_is_wrong(problem, seed):
    assert slipped_solution(problem, 0.0, random.Random(seed)) == problem.solution
    points = slip_points(problem.family, problem.operands)
    slipped = slipped_solution(problem, 1.0, random.Random(seed))
    assert (last_boxed(slipped) == problem.answer) == (points == 0)


def test_at_rate_one_every_carry_slips_and_at_one_half_some():
    problem = make_problem("add", 2, (478, 59))  # carries out of both lower columns
    assert slipped_solution(problem, 1.0, random.Random(0)) == "478+59: 8+9 = 17, 7+5 = 12, 4 = 4, so \\boxed{427}"
    careless = {slipped_solution(problem, 0.5, random.Random(s)) for s in range(40)}
    assert "478+59: 8+9 = 17, 7+5+1 = 13, 4 = 4, so \\boxed{437}" in careless  # first carry kept, second slipped


def test_every_problem_of_the_task_has_a_slip_point():
    from graft.toy.task import make_splits

    splits = make_splits(0, test_per_family=5, validation_per_family=2)
    for problem in [*splits.validation, *(p for ps in splits.test.values() for p in ps), *splits.train[::500]]:
        assert slip_points(problem.family, problem.operands) >= 1


column_operands = st.one_of(
    st.tuples(st.just("add"), st.lists(st.integers(0, 99_999), min_size=2, max_size=3)),
    st.tuples(st.just("sub"), st.lists(st.integers(0, 9_999), min_size=1, max_size=2)),
)


@settings(max_examples=300, deadline=None)
@given(column_operands, st.integers(0, 99_999))
def test_counted_carries_match_the_solver(case, top):
    """slip_points counts carries and borrows arithmetically; the solver's own count is the definition."""
    kind, rest = case
    if kind == "add":
        family, operands = ("add" if len(rest) == 2 else "add3"), tuple(rest)
    else:
        family, operands = ("sub" if len(rest) == 1 else "sub3"), (top + sum(rest), *rest)
    assert slip_points(family, operands) == solver_slip_points(family, operands)
