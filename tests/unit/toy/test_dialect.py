"""Dialects of the toy solutions (graft.toy.dialect): the surface changes, the numbers and the answer do not, and
mismatch 0 is the world without it."""

from __future__ import annotations

import random
import re
from itertools import islice

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graft.engine.reward import last_boxed
from graft.toy.dialect import DIALECTS, FEATURES, rewrite
from graft.toy.task import FAMILIES, _operands, _space, make_problem, slipped_solution

HAND = [
    (1, "358 + 67 by columns: 8 + 7 is 15; 5 + 6 + 1 is 12; 3 + 1 is 4. The answer is \\boxed{425}"),
    (2, "We work out 358+67. 8+7 -> 15 and 5+6+1 -> 12 and 3+1 -> 4, giving \\boxed{425}"),
]


@pytest.mark.parametrize(("dialect", "expected"), HAND)
def test_a_whole_dialect_by_hand(dialect, expected):
    solution = make_problem("add", 2, (358, 67)).solution
    assert rewrite(solution, dialect, 1.0, random.Random(0), exposure=0.0) == expected


def test_no_mismatch_or_the_common_dialect_leave_the_text_and_the_random_stream_alone():
    solution = make_problem("sub3", 2, (912, 78, 199)).solution
    for dialect, mismatch in ((1, 0.0), (0, 1.0), (0, 0.5)):
        rng = random.Random(3)
        assert rewrite(solution, dialect, mismatch, rng) == solution
        assert rng.random() == random.Random(3).random()


def problems():
    """A family and one of the first 200 operand tuples of its level 2."""
    return st.tuples(st.sampled_from(FAMILIES), st.integers(0, 199)).map(
        lambda fi: (fi[0], next(islice(_operands(fi[0], 2), fi[1], None)))
    )


@settings(max_examples=150, deadline=None)
@given(problems(), st.integers(1, DIALECTS - 1), st.floats(0, 1), st.integers(0, 2**16), st.floats(0, 1))
def test_a_rewrite_keeps_every_number_and_the_graded_answer(problem, dialect, mismatch, seed, slip):
    family, operands = problem
    solution = slipped_solution(make_problem(family, 2, operands), slip, random.Random(seed))
    written = rewrite(solution, dialect, mismatch, random.Random(seed))
    assert last_boxed(written) == last_boxed(solution)
    assert re.findall(r"\d+", written) == re.findall(r"\d+", solution)


def test_mismatch_is_the_share_of_features_in_the_dialect():
    solution = make_problem("add", 2, (358, 67)).solution
    rng = random.Random(0)
    written = [rewrite(solution, 1, 0.3, rng, exposure=0.0) for _ in range(2000)]
    share = sum(bool(re.search(r" is \d", w)) for w in written) / len(written)  # the equals feature
    assert 0.26 < share < 0.34
    assert len(set(written)) == 2 ** len(FEATURES)  # every combination of features occurs


def test_exposure_is_the_share_of_non_common_features_in_another_dialect():
    solution = make_problem("add", 2, (358, 67)).solution
    rng = random.Random(1)
    written = [rewrite(solution, 1, 0.8, rng, exposure=0.1) for _ in range(4000)]
    own = sum(bool(re.search(r" is \d", w)) for w in written) / len(written)
    other = sum(bool(re.search(r" -> \d", w)) for w in written) / len(written)  # dialect 2's equals
    assert abs(own - 0.8 * 0.9) < 0.03 and abs(other - 0.8 * 0.1) < 0.015


def _add_pool() -> list:
    """300 level-2 addition problems, each with a carry to slip."""
    return [make_problem("add", 2, ops) for ops in islice(_space("add", 2, min_slip_points=1), 300)]


def _warmup(slip=0.0):
    from graft.config import ToyModelSpec, ToySpec
    from graft.toy.build import warmup_examples

    pool = _add_pool()
    spec = ToyModelSpec(
        "qwen3", "gpt2_regex", 300, 32, 2, 2, mix={"add": 1.0}, steps=1, examples=300, slip={"add": slip}, dialect=1
    )
    world = ToySpec(models={"m": spec}, seed=0, mismatch=0.8)
    return list(warmup_examples("m", pool, world))


def test_the_warm_up_draws_slips_and_writing_from_two_streams():
    """A warm-up example is a problem's solution slipped from one stream and then rewritten in the model's dialect
    from another: reproduced here step by step, the same examples in the same order."""
    from graft.seeding import derive
    from graft.toy.build import SLIP_VARIANTS
    from graft.toy.dialect import rewrite

    rng = random.Random(0)
    slips = random.Random(derive(0, "warmup_slips", "m"))
    style = random.Random(derive(0, "warmup_dialect", "m"))
    before = []
    for p in rng.sample(_add_pool(), 300):
        solutions = [slipped_solution(p, 0.3, slips) for _ in range(SLIP_VARIANTS)]
        before += [(p.problem, rewrite(s, 1, 0.8, style)) for s in solutions]
    rng.shuffle(before)
    assert [text for _, text in _warmup(slip=0.3)] == [text for _, text in before]
