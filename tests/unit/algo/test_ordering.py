import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from graft.algo import minibatch_order


def as_lists(chunks):
    return [c.tolist() for c in chunks]


def test_peer_last_hand_worked():
    is_peer = torch.tensor([False, True, False, False, True, False, False, False])
    chunks = as_lists(minibatch_order(is_peer, 4, "peer_last"))
    assert chunks == [[0, 2], [3, 5], [6, 7], [1, 4]]


def test_peer_first_hand_worked():
    is_peer = torch.tensor([False, True, False, False, True, False, False, False])
    assert as_lists(minibatch_order(is_peer, 4, "peer_first")) == [[1, 4], [0, 2], [3, 5], [6, 7]]


def test_update_count_kept_when_gating_shrinks_groups_and_capped_by_group_count():
    assert len(minibatch_order(torch.zeros(10, dtype=torch.bool), 4)) == 4
    assert len(minibatch_order(torch.zeros(3, dtype=torch.bool), 4)) == 3
    assert minibatch_order(torch.zeros(0, dtype=torch.bool), 4) == []


def test_uniform_shuffles_the_same_minibatches_deterministically():
    is_peer = torch.tensor([i % 3 == 0 for i in range(12)])
    base = as_lists(minibatch_order(is_peer, 4, "peer_last"))
    orders = {
        tuple(map(tuple, as_lists(minibatch_order(is_peer, 4, "uniform", torch.Generator().manual_seed(s)))))
        for s in range(20)
    }
    assert len(orders) > 1
    for order in orders:
        assert sorted(order) == sorted(map(tuple, base))
    a = minibatch_order(is_peer, 4, "uniform", torch.Generator().manual_seed(5))
    b = minibatch_order(is_peer, 4, "uniform", torch.Generator().manual_seed(5))
    assert as_lists(a) == as_lists(b)


def test_bad_arguments():
    with pytest.raises(ValueError, match="generator"):
        minibatch_order(torch.zeros(4, dtype=torch.bool), 2, "uniform")
    with pytest.raises(ValueError, match="peer_last"):
        minibatch_order(torch.zeros(4, dtype=torch.bool), 2, "sideways")  # type: ignore[arg-type]


@given(
    st.lists(st.booleans(), min_size=1, max_size=40),
    st.integers(1, 8),
    st.sampled_from(["peer_last", "peer_first"]),
)
def test_groups_whole_and_peer_position(flags, m, order):
    is_peer = torch.tensor(flags)
    chunks = minibatch_order(is_peer, m, order)
    flat = torch.cat(chunks).tolist()
    assert sorted(flat) == list(range(len(flags)))  # every group exactly once
    assert len(chunks) == min(m, len(flags))
    has_peer = [bool(is_peer[c].any()) for c in chunks]
    own_only = [not flag for flag in has_peer]
    if order == "peer_last":
        # no own-only minibatch comes after one that holds a grafted group
        first_peer = has_peer.index(True) if any(has_peer) else len(chunks)
        assert not any(own_only[first_peer + 1 :])
    else:
        last_peer = len(has_peer) - 1 - has_peer[::-1].index(True) if any(has_peer) else -1
        assert all(has_peer[: last_peer + 1])


def test_prompt_order_ignores_where_the_peer_is():
    is_peer = torch.tensor([False, True, False, False, True, False])
    assert as_lists(minibatch_order(is_peer, 3, "prompt")) == [[0, 1], [2, 3], [4, 5]]


def test_self_first_hacpo_official_layout():
    """HACPO's trainer: 128 prompts x (8 own + 8 peer) responses, own first, 512-response minibatches -> two
    own-only updates, then two peer-only ones (here 4 prompts x (2 + 2))."""
    is_peer = torch.tensor([False, False, True, True] * 4)  # responses of each prompt: own, own, peer, peer
    chunks = as_lists(minibatch_order(is_peer, 4, "self_first"))
    assert chunks == [[0, 1, 4, 5], [8, 9, 12, 13], [2, 3, 6, 7], [10, 11, 14, 15]]
    assert [bool(is_peer[c].all()) for c in chunks] == [False, False, True, True]
    assert [bool(is_peer[c].any()) for c in chunks] == [False, False, True, True]
