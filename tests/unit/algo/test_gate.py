import math

import torch
from hypothesis import given
from hypothesis import strategies as st

from graft.algo import compatibility, mean_token_logprob, random_admission

F64 = torch.float64


def test_mean_token_logprob_hand_worked_and_masking():
    logp = torch.tensor([[-1.0, -2.0, float("-inf")], [-0.5, 0.0, 0.0], [0.0, 0.0, 0.0]], dtype=F64)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 0, 0]], dtype=torch.bool)
    torch.testing.assert_close(mean_token_logprob(logp, mask), torch.tensor([-1.5, -0.5, 0.0], dtype=F64))


def test_compatibility_hand_worked():
    recv = torch.tensor([math.log(0.5), math.log(0.9), math.log(2.0), math.log(0.1)], dtype=F64)
    src = torch.zeros(4, dtype=F64)
    s, w = compatibility(recv, src, delta=0.8, cap=1.0)
    torch.testing.assert_close(s, torch.tensor([0.5, 0.9, 2.0, 0.1], dtype=F64))
    torch.testing.assert_close(w, torch.tensor([0.0, 0.9, 1.0, 0.0], dtype=F64))


def test_s_exactly_at_delta_is_dropped():
    recv = torch.tensor([-0.3, -0.2], dtype=F64)
    src = torch.tensor([0.1, 0.0], dtype=F64)
    s, _ = compatibility(recv, src, delta=0.8, cap=1.0)
    # use the computed s as the floor itself, so the comparison is exact
    _, w = compatibility(recv, src, delta=float(s[0]), cap=1.0)
    assert w[0] == 0.0 and w[1] == s[1]


def test_no_floor_admits_everything_with_bounded_weight():
    recv = torch.tensor([-5.0, -0.1, 3.0], dtype=F64)
    s, w = compatibility(recv, torch.zeros(3, dtype=F64), delta=0.0, cap=1.0)
    torch.testing.assert_close(w, torch.clamp(s, max=1.0))
    assert (w > 0).all()


@given(st.lists(st.floats(-8, 8), min_size=1, max_size=20), st.floats(0.0, 0.99), st.floats(0.1, 3.0))
def test_weight_properties(diffs, delta, cap):
    recv = torch.tensor(diffs, dtype=F64)
    s, w = compatibility(recv, torch.zeros_like(recv), delta=delta, cap=cap)
    assert ((w >= 0) & (w <= cap)).all()
    assert torch.equal(w == 0, s <= delta)
    assert (w <= s).all()


def test_random_admission_count_matches_floor():
    s = torch.tensor([[0.9, 0.5, 1.3, 0.2], [0.85, 0.1, 0.95, 0.7]], dtype=F64)
    valid = torch.tensor([[True, True, True, True], [False, False, True, True]])
    weights = random_admission(s, valid, delta=0.8, generator=torch.Generator().manual_seed(0), cap=1.0)
    # among valid entries, 0.9, 1.3 and 0.95 pass the floor: exactly three are admitted
    assert int((weights > 0).sum()) == 3
    assert (weights[~valid] == 0).all()
    admitted = weights > 0
    torch.testing.assert_close(weights[admitted], torch.clamp(s[admitted], max=1.0))


def test_random_admission_can_admit_below_floor_and_is_seeded():
    s = torch.tensor([0.9] + [0.1] * 9, dtype=F64)
    valid = torch.ones(10, dtype=torch.bool)
    draws = [random_admission(s, valid, 0.8, torch.Generator().manual_seed(i), cap=1.0) for i in range(50)]
    assert all(int((d > 0).sum()) == 1 for d in draws)
    assert any(d[0] == 0 for d in draws)  # a response below the floor was admitted instead
    again = random_admission(s, valid, 0.8, torch.Generator().manual_seed(7), cap=1.0)
    assert torch.equal(again, draws[7])
