import math

import torch
from hypothesis import given
from hypothesis import strategies as st

from graft.algo import group_advantages, pooled_advantages, success_counts
from graft.algo.advantages import unbiased_std


def test_hand_worked_group_of_four():
    # mean 0.25, unbiased std sqrt((0.75^2 + 3 * 0.25^2) / 3) = 0.5
    adv = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=torch.float64))
    expected = torch.tensor([[0.75, -0.25, -0.25, -0.25]], dtype=torch.float64) / (0.5 + 1e-6)
    torch.testing.assert_close(adv, expected)


def test_zero_variance_groups_get_zero():
    rewards = torch.tensor([[0, 0, 0, 0], [1, 1, 1, 1], [1, 0, 1, 0]])
    adv = group_advantages(rewards)
    assert adv.dtype.is_floating_point
    assert torch.equal(adv[:2], torch.zeros(2, 4))
    assert (adv[2] != 0).all()


def test_single_response_group_is_zero():
    assert torch.equal(group_advantages(torch.tensor([[1.0], [0.0]])), torch.zeros(2, 1))


def test_eps_is_used():
    adv = group_advantages(torch.tensor([[1.0, 0.0]], dtype=torch.float64), eps=0.5)
    std = math.sqrt(0.5)
    torch.testing.assert_close(adv, torch.tensor([[0.5 / (std + 0.5), -0.5 / (std + 0.5)]], dtype=torch.float64))


def test_success_counts():
    assert success_counts(torch.tensor([[1, 0, 1], [0, 0, 0]])).tolist() == [2, 0]


groups = st.lists(st.lists(st.sampled_from([0.0, 1.0]), min_size=2, max_size=16), min_size=1, max_size=8)


@given(
    st.integers(2, 32).flatmap(
        lambda n: st.lists(st.lists(st.sampled_from([0.0, 1.0]), min_size=n, max_size=n), min_size=1, max_size=8)
    )
)
def test_mixed_groups_sum_to_zero_and_have_unit_std(rows):
    rewards = torch.tensor(rows, dtype=torch.float64)
    adv = group_advantages(rewards)
    torch.testing.assert_close(adv.sum(-1), torch.zeros(len(rows), dtype=torch.float64), atol=1e-9, rtol=0)
    mixed = rewards.std(-1) > 0
    if mixed.any():
        torch.testing.assert_close(
            adv[mixed].std(-1), torch.ones(int(mixed.sum()), dtype=torch.float64), atol=1e-5, rtol=0
        )
    # correct responses get positive advantage, wrong ones negative, within mixed groups
    assert ((adv[mixed] > 0) == (rewards[mixed] > 0)).all()


@given(st.lists(st.sampled_from([0.0, 1.0]), min_size=2, max_size=16), st.randoms())
def test_permutation_equivariant(row, rnd):
    perm = list(range(len(row)))
    rnd.shuffle(perm)
    adv = group_advantages(torch.tensor([row], dtype=torch.float64))
    adv_perm = group_advantages(torch.tensor([[row[i] for i in perm]], dtype=torch.float64))
    torch.testing.assert_close(adv[0, perm], adv_perm[0])


def test_pooled_hand_worked():
    own = torch.zeros(1, 4, dtype=torch.float64)
    peer = torch.tensor([[1.0, 1.0, 0.0, 0.0]], dtype=torch.float64)
    own_adv, peer_adv = pooled_advantages(own, peer)
    # pooled mean 2/8; unbiased std sqrt((2 * 0.75^2 + 6 * 0.25^2) / 7)
    std = math.sqrt(1.5 / 7)
    torch.testing.assert_close(own_adv, torch.full((1, 4), -0.25 / (std + 1e-6), dtype=torch.float64))
    torch.testing.assert_close(peer_adv[0, :2], torch.full((2,), 0.75 / (std + 1e-6), dtype=torch.float64))
    assert (own_adv < 0).all()


@given(
    st.lists(st.lists(st.floats(-5, 5), min_size=2, max_size=10), min_size=1, max_size=5).filter(
        lambda rows: len({len(r) for r in rows}) == 1
    )
)
def test_unbiased_std_matches_torch_std(rows):
    x = torch.tensor(rows, dtype=torch.float64)
    torch.testing.assert_close(unbiased_std(x), x.std(dim=-1, keepdim=True))
