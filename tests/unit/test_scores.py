"""The unbiased pass@k estimator against hand-worked cases and its defining probability."""

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graft.scores import mean_pass_at_k, pass_at_k


def test_hand_worked_cases():
    assert pass_at_k(8, 0, 4) == 0.0
    assert pass_at_k(8, 8, 1) == 1.0
    assert pass_at_k(8, 2, 1) == pytest.approx(2 / 8)
    # 1 - C(6, 2) / C(8, 2) = 1 - 15 / 28
    assert pass_at_k(8, 2, 2) == pytest.approx(13 / 28)
    assert pass_at_k(8, 5, 4) == 1.0  # fewer than 4 wrong samples: any 4 hold a correct one


@given(st.integers(1, 8).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_equals_the_chance_that_k_of_n_drawn_without_replacement_hold_a_correct_one(case):
    n, c, k = case
    samples = [1] * c + [0] * (n - c)
    draws = list(itertools.combinations(range(n), k))
    chance = sum(any(samples[i] for i in d) for d in draws) / len(draws)
    assert pass_at_k(n, c, k) == pytest.approx(chance)


def test_mean_over_problems_and_the_ks_the_sample_count_allows():
    grades = [[1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]]
    got = mean_pass_at_k(grades)
    assert set(got) == {"1", "2", "4"}
    assert got["1"] == pytest.approx((0.25 + 0 + 1) / 3)
    assert got["4"] == pytest.approx((1 + 0 + 1) / 3)


def test_refuses_k_above_n():
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(2, 1, 4)
