"""Wrong digit facts: a toy model's idiosyncratic errors (toy.models.<m>.wrong_facts), drawn per model, written
into its warm-up at each use of the fact, and nowhere else."""

from __future__ import annotations

import random
import re
from itertools import islice

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graft.engine.reward import last_boxed
from graft.toy.task import (
    FACT_OPS,
    MAX_WRONG_FACTS,
    _space,
    draw_wrong_facts,
    exact,
    fact_candidates,
    facts_used,
    format_facts,
    make_problem,
    slipped_solution,
    wrong_recall,
)


def _always(wrong):
    return wrong_recall(wrong, 1.0, random.Random(0))


HAND = [
    # 8+6 held as 15: the units column is one more, its carry unchanged
    ("add", (578, 96), {("+", 6, 8): 15}, "578+96: 8+6 = 15, 7+9+1 = 17, 5+1 = 6, so \\boxed{675}"),
    # 7+9 held as 15 (both orders are one fact): the tens column loses its carry out
    ("add", (578, 96), {("+", 7, 9): 15}, "578+96: 8+6 = 14, 7+9+1 = 16, 5+1 = 6, so \\boxed{664}"),
    # the first two digits of a three-term column are the fact; the third digit and the carry are added to it
    ("add3", (578, 26, 15), {("+", 6, 8): 15}, "578+26+15: 8+6+5 = 20, 7+2+1+2 = 12, 5+1 = 6, so \\boxed{620}"),
    # 14-7 held as 6: the borrow is still decided on the true difference
    ("sub", (534, 87), {("-", 14, 7): 6}, "534-87: 14-7 = 6, 13-1-8 = 4, 5-1-0 = 4, so \\boxed{446}"),
    # 7*8 held as 57 (written as 8*7 too): the wrong product's carry is passed on
    ("mul", (7, 386), {("*", 7, 8): 57}, "7*386: 7*6 = 42, 7*8 = 57, 57+4 = 61, 7*3 = 21, 21+6 = 27, so \\boxed{2712}"),
]


@pytest.mark.parametrize(("family", "operands", "wrong", "expected"), HAND)
def test_a_wrong_fact_by_hand(family, operands, wrong, expected):
    problem = make_problem(family, 2, operands)
    assert slipped_solution(problem, 0.0, random.Random(0), recall=_always(wrong)) == expected
    assert slipped_solution(problem, 0.0, random.Random(0), recall=exact) == problem.solution


def test_a_wrong_difference_that_would_leave_the_column_is_not_used():
    """10-9 held as 0 is written in the units column; in the tens column the pending borrow would take it to -1,
    so that column keeps the true value."""
    problem = make_problem("sub", 2, (300, 99))
    assert problem.solution == "300-99: 10-9 = 1, 10-1-9 = 0, 3-1-0 = 2, so \\boxed{201}"
    written = slipped_solution(problem, 0.0, random.Random(0), recall=_always({("-", 10, 9): 0}))
    assert written == "300-99: 10-9 = 0, 10-1-9 = 0, 3-1-0 = 2, so \\boxed{200}"


@settings(max_examples=100, deadline=None)
@given(st.integers(0, MAX_WRONG_FACTS), st.integers(0, 2**32))
def test_drawn_facts_are_candidates_off_by_one(count, seed):
    wrong = draw_wrong_facts(count, random.Random(seed))
    for op in FACT_OPS:
        mine = [(x, y) for o, x, y in wrong if o == op]
        assert len(mine) == count and set(mine) <= set(fact_candidates(op))
    for (op, x, y), value in wrong.items():
        assert abs(value - exact(op, x, y)) == 1
        assert op != "-" or 0 <= value <= 9
    assert wrong == draw_wrong_facts(count, random.Random(seed))  # a pure function of the generator


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["add", "sub", "mul", "add3", "sub3"]), st.integers(0, 400), st.integers(0, 2**16))
def test_a_solution_is_wrong_exactly_when_it_uses_a_wrong_fact(family, index, seed):
    """At rate 1 a solution ends in a wrong answer if and only if its text differs from the correct one: a column
    uses at most one fact, so the answer moves by a sum of +-1 times distinct powers of ten, never 0. At rate 0
    recall is exact."""
    problem = make_problem(family, 2, next(islice(_space(family, 2, 2), index, None)))
    wrong = draw_wrong_facts(6, random.Random(seed))
    written = slipped_solution(problem, 0.0, random.Random(0), recall=_always(wrong))
    assert (written != problem.solution) == (last_boxed(written) != problem.answer)
    never = wrong_recall(wrong, 0.0, random.Random(seed))
    assert slipped_solution(problem, 0.0, random.Random(0), recall=never) == problem.solution


def test_the_facts_a_problem_uses():
    """578+96 adds 8+6 and 7+9 (with its carry), never 5+5; 10-9 held as 0 is used by 300-99's units column,
    though the range rule keeps it out of the tens column."""
    wrong = {("+", 6, 8): 15, ("+", 5, 5): 11, ("+", 7, 9): 15}
    assert facts_used(make_problem("add", 2, (578, 96)), wrong) == ["6+8=15", "7+9=15"]
    assert facts_used(make_problem("add", 2, (578, 96)), {}) == []
    assert facts_used(make_problem("sub", 2, (300, 99)), {("-", 10, 9): 0}) == ["10-9=0"]


def test_formatted_facts_read_as_the_model_writes_them():
    assert format_facts({("+", 7, 8): 16, ("-", 13, 7): 5, ("*", 7, 8): 57}) == ["7+8=16", "13-7=5", "7*8=57"]


def _warmup(wrong_facts, rate):
    from graft.toy.build import warmup_examples
    from graft.toy.spec import ToyModelSpec, ToySpec

    pool = [make_problem("add", 2, ops) for ops in islice(_space("add", 2, min_slip_points=2), 400)]
    spec = ToyModelSpec(
        "qwen3", "gpt2_regex", 300, 32, 2, 2, mix={"add": 1.0}, steps=1, examples=300,
        wrong_facts=wrong_facts, wrong_fact_rate=rate,
    )  # fmt: skip
    answers = {p.problem: p.answer for p in pool}
    world = ToySpec(models={"m": spec}, families=["add"], seed=0)
    return [(text, last_boxed(text) == answers[problem]) for problem, text in warmup_examples("m", pool, world)]


def test_the_warm_up_writes_a_models_wrong_facts_at_their_rate():
    """Rate 1: every use of a wrong addition fact is written wrong, and a solution is right exactly when it uses
    none; rate 0.5: about half of the uses; without wrong facts the warm-up is the correct solutions, once each."""
    from graft.toy.build import model_wrong_facts
    from graft.toy.spec import ToyModelSpec, ToySpec

    spec = ToyModelSpec("qwen3", "gpt2_regex", 300, 32, 2, 2, mix={"add": 1.0}, steps=1, wrong_facts=6)
    wrong = model_wrong_facts("m", ToySpec(models={"m": spec}))
    facts = {(x, y): value for (op, x, y), value in wrong.items() if op == "+"}
    step = re.compile(r"(\d)\+(\d)((?:\+\d)*) = (\d+)")

    def uses(text):
        """Whether each use of a wrong fact in the text is written with its wrong value."""
        written = []
        for m in step.finditer(text):
            x, y = sorted((int(m[1]), int(m[2])))
            if (x, y) in facts:
                carry = sum(int(d) for d in m[3].split("+")[1:])
                written.append(int(m[4]) - carry == facts[(x, y)])
        return written

    always = _warmup(6, 1.0)
    assert len(always) == 300 * 8
    used = [(uses(text), right) for text, right in always]
    assert sum(1 for u, _ in used if u) > 100
    assert all(all(u) and not right if u else right for u, right in used)
    half = [w for text, _ in _warmup(6, 0.5) for w in uses(text)]
    assert 0.4 < sum(half) / len(half) < 0.6
    plain = _warmup(0, 1.0)
    assert len(plain) == 300 and all(right for _, right in plain)


def test_models_of_one_world_hold_different_facts():
    from graft.toy.build import model_wrong_facts
    from graft.toy.spec import ToyModelSpec, ToySpec

    spec = ToyModelSpec("qwen3", "gpt2_regex", 300, 32, 2, 2, mix={"add": 1.0}, steps=1, wrong_facts=6)
    world = ToySpec(models={"smol": spec, "qwen": spec})
    assert model_wrong_facts("smol", world) != model_wrong_facts("qwen", world)
    assert model_wrong_facts("smol", world) == model_wrong_facts("smol", world)
    assert model_wrong_facts("smol", ToySpec(models={"smol": spec}, seed=1)) != model_wrong_facts("smol", world)
