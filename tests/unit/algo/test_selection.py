import torch
from hypothesis import given
from hypothesis import strategies as st

from graft.algo import (
    balanced_selection,
    exchange_candidates,
    group_selection,
    random_prompt_selection,
    sample_one_success,
    select_with_ties,
    success_candidates,
)


def t(*values, dtype=torch.long):
    return torch.tensor(values, dtype=dtype)


def test_candidates_hand_worked():
    k_recv = t(0, 0, 0, 0, 1)
    k_src = t(0, 1, 7, 8, 4)
    # all-fail source, mixed, mixed, all-correct source (not a candidate), receiver already has a success
    assert exchange_candidates(k_recv, k_src, n=8).tolist() == [False, True, True, False, False]
    # SGT's rule admits the all-correct source
    assert success_candidates(k_recv, k_src).tolist() == [False, True, True, True, False]


def test_balanced_ties_at_boundary_exceed_m():
    cand_ab = t(1, 1, 1, 1, 1, 0, 0, dtype=torch.bool)
    k_a = t(5, 3, 3, 1, 2, 7, 0)
    cand_ba = t(0, 0, 0, 0, 0, 1, 1, dtype=torch.bool)
    k_b = t(0, 0, 0, 0, 0, 2, 6)
    sel_ab, sel_ba = balanced_selection(cand_ab, k_a, cand_ba, k_b)
    # m = 2; A->B ranked 5, 3, 3, 2, 1: the 2nd is a 3, tied with another 3, so three are kept
    assert sel_ab.tolist() == [True, True, True, False, False, False, False]
    assert sel_ba.tolist() == cand_ba.tolist()


def test_balanced_m_zero_selects_nothing():
    cand_ab = t(1, 1, 0, dtype=torch.bool)
    cand_ba = t(0, 0, 0, dtype=torch.bool)
    k = t(3, 4, 0)
    sel_ab, sel_ba = balanced_selection(cand_ab, k, cand_ba, k)
    assert not sel_ab.any() and not sel_ba.any()


def test_balanced_keeps_highest_source_counts():
    cand_ab = t(1, 1, 1, 1, 0, dtype=torch.bool)
    k_a = t(1, 6, 2, 4, 0)
    cand_ba = t(0, 0, 0, 0, 1, dtype=torch.bool)
    k_b = t(0, 0, 0, 0, 3)
    sel_ab, _ = balanced_selection(cand_ab, k_a, cand_ba, k_b)
    assert sel_ab.tolist() == [False, True, False, False, False]


@st.composite
def selection_case(draw):
    g = draw(st.integers(1, 40))
    n = draw(st.sampled_from([2, 4, 8]))
    k_a = torch.tensor(draw(st.lists(st.integers(0, n), min_size=g, max_size=g)))
    k_b = torch.tensor(draw(st.lists(st.integers(0, n), min_size=g, max_size=g)))
    return k_a, k_b, n


@given(selection_case())
def test_balanced_selection_properties(case):
    k_a, k_b, n = case
    cand_ab = exchange_candidates(k_b, k_a, n)  # B receives from A
    cand_ba = exchange_candidates(k_a, k_b, n)
    sel_ab, sel_ba = balanced_selection(cand_ab, k_a, cand_ba, k_b)
    m = min(int(cand_ab.sum()), int(cand_ba.sum()))
    for sel, cand, k in ((sel_ab, cand_ab, k_a), (sel_ba, cand_ba, k_b)):
        assert not (sel & ~cand).any()  # subset of the candidates
        count = int(sel.sum())
        if m == 0:
            assert count == 0
        else:
            assert count >= m
            # ranked by source success: every kept candidate is at least as good as every dropped one
            dropped = cand & ~sel
            if dropped.any():
                assert k[sel].min() > k[dropped].max()
            # exceeding m only through ties with the m-th
            if count > m:
                boundary = torch.sort(k[cand], descending=True).values[m - 1]
                assert (k[sel] >= boundary).all() and int((k[sel] > boundary).sum()) < m
    # symmetric: swapping the two models swaps the outputs
    swap_ba, swap_ab = balanced_selection(cand_ba, k_b, cand_ab, k_a)
    assert torch.equal(swap_ab, sel_ab) and torch.equal(swap_ba, sel_ba)


def test_select_with_ties_nonpositive_m():
    cand = t(1, 1, dtype=torch.bool)
    assert not select_with_ties(cand, t(1, 2), 0).any()


def test_random_prompt_selection_count_and_determinism():
    a = random_prompt_selection(5, 16, torch.Generator().manual_seed(3))
    b = random_prompt_selection(5, 16, torch.Generator().manual_seed(3))
    assert int(a.sum()) == 5 and torch.equal(a, b)
    assert int(random_prompt_selection(0, 16, torch.Generator()).sum()) == 0


def test_sample_one_success_hand_worked():
    rewards = torch.tensor([[0, 1, 0, 0], [1, 1, 0, 0], [0, 0, 0, 0], [1, 0, 1, 1]])
    select = torch.tensor([True, True, True, False])
    idx = sample_one_success(rewards, select, torch.Generator().manual_seed(0))
    assert idx[0] == 1
    assert idx[1] in (0, 1)
    assert idx[2] == -1 and idx[3] == -1


def test_sample_one_success_is_uniform_over_correct():
    rewards = torch.tensor([[0, 1, 0, 1, 0, 1, 0, 0]]).repeat(3000, 1)
    idx = sample_one_success(rewards, torch.ones(3000, dtype=torch.bool), torch.Generator().manual_seed(1))
    counts = torch.bincount(idx, minlength=8)
    assert counts[[0, 2, 4, 6, 7]].sum() == 0
    assert ((counts[[1, 3, 5]].float() / 3000 - 1 / 3).abs() < 0.04).all()


def test_group_selection_hand_worked():
    # three models, n = 4, four prompts (columns). Prompt 0: A fails, B and C mixed -> A takes C's (3 > 2
    # successes). Prompt 1: B fails, A and C tie at 2 -> B takes A's (first in the group's order). Prompt 2: C
    # fails, A mixed, B all-correct (not a candidate) -> C takes A's. Prompt 3: nobody fails.
    k = t(0, 2, 3, 1, 2, 0, 4, 1, 3, 2, 0, 1).reshape(3, 4)
    unbalanced = group_selection(k, 4, balanced=False)
    assert unbalanced.tolist() == [[2, -1, -1, -1], [-1, 0, -1, -1], [-1, -1, 0, -1]]
    # balanced per pair: A->B 1 vs B->A 0: dropped; A->C 1 vs C->A 1: both kept; B and C exchange nothing
    assert group_selection(k, 4).tolist() == [[2, -1, -1, -1], [-1, -1, -1, -1], [-1, -1, 0, -1]]


@st.composite
def group_case(draw):
    models = draw(st.integers(2, 4))
    g = draw(st.integers(1, 30))
    n = draw(st.sampled_from([2, 4, 8]))
    k = torch.tensor(draw(st.lists(st.integers(0, n), min_size=models * g, max_size=models * g)))
    return k.reshape(models, g), n


@given(selection_case())
def test_group_selection_of_two_models_is_the_papers_balanced_selection(case):
    k_a, k_b, n = case
    sel_ab, sel_ba = balanced_selection(exchange_candidates(k_b, k_a, n), k_a, exchange_candidates(k_a, k_b, n), k_b)
    source = group_selection(torch.stack([k_a, k_b]), n)
    assert torch.equal(source[1] == 0, sel_ab) and torch.equal(source[0] == 1, sel_ba)
    assert set(source[0].tolist()) <= {-1, 1} and set(source[1].tolist()) <= {-1, 0}


@given(group_case(), st.booleans(), st.sampled_from(["most_successes", "random"]), st.integers(0, 2**31 - 1))
def test_group_selection_properties(case, balanced, choice, seed):
    k, n = case
    generator = torch.Generator().manual_seed(seed)
    source = group_selection(k, n, balanced=balanced, choice=choice, generator=generator)
    unbalanced = group_selection(k, n, balanced=False, choice=choice, generator=torch.Generator().manual_seed(seed))
    models = k.shape[0]
    for r in range(models):
        for g in range(k.shape[1]):
            s = int(source[r, g])
            if s < 0:
                continue
            # a candidate of Eq. 4: the receiver failed all, the chosen peer is mixed; never itself
            assert s != r and k[r, g] == 0 and 1 <= k[s, g] < n
            # balancing only removes: a kept choice is the unbalanced one
            assert int(unbalanced[r, g]) == s
            if choice == "most_successes":  # no candidate peer has more successes
                others = [int(k[p, g]) for p in range(models) if p != r and 1 <= k[p, g] < n]
                assert int(k[s, g]) == max(others)
    if balanced:  # per pair, each direction keeps at least the smaller count (more only through ties)
        for a in range(models):
            for b in range(a + 1, models):
                m = min(int((unbalanced[b] == a).sum()), int((unbalanced[a] == b).sum()))
                kept_ab, kept_ba = int((source[b] == a).sum()), int((source[a] == b).sum())
                assert (kept_ab >= m and kept_ba >= m) if m else kept_ab == kept_ba == 0
