"""Passes filled by tokens (graft.engine.batching): by hand, and properties of every plan."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from graft.engine.batching import pack_by_tokens, plan_passes


def test_pack_by_tokens_by_hand():
    lengths = [5, 9, 3, 7, 2]
    # longest first: 9 opens a pass; 7 does not fit beside it (16 > 12) and opens a second; 5 joins 7 (12);
    # 3 joins 9 (12); 2 fits nowhere and opens a third
    assert pack_by_tokens(range(5), lengths, max_rows=3, max_tokens=12) == [[1, 2], [3, 0], [4]]
    # two rows a pass at most: 9 + 7, then 5 + 3, then 2
    assert pack_by_tokens(range(5), lengths, max_rows=2, max_tokens=None) == [[1, 3], [0, 2], [4]]
    # a row over the budget goes alone
    assert pack_by_tokens([0, 1], [20, 4], max_rows=8, max_tokens=10) == [[0], [1]]


def test_plan_passes_by_hand():
    lengths = [10, 4, 4, 3, 9]
    # tokens balanced over two processes, longest first: 10 -> 0, 9 -> 1, 4 -> 1 (9 < 10), 4 -> 0 (10 < 13),
    # 3 -> 1 (13 < 14); then each process fills passes of at most 14 tokens, longest first, and process 0, with one
    # pass, gets an empty one to keep the collectives in step
    assert plan_passes(lengths, 2, max_rows=8, max_tokens=14, packed=True) == [[[0, 2], []], [[4, 1], [3]]]
    # the same split padded in arrival order: 0 and 2 are 2 x 10 = 20 tokens, over the budget; 1 and 3 are 2 x 4
    assert plan_passes(lengths, 2, max_rows=8, max_tokens=14, packed=False) == [[[0], [2]], [[1, 3], [4]]]


@settings(max_examples=80, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 30), min_size=1, max_size=40),
    world=st.integers(1, 4),
    max_rows=st.integers(1, 8),
    max_tokens=st.one_of(st.none(), st.integers(1, 80)),
)
def test_packed_plans_cover_every_row_once_within_budget_and_balanced(lengths, world, max_rows, max_tokens):
    plan = plan_passes(lengths, world, max_rows, max_tokens, packed=True)
    assert len(plan) == world
    assert len({len(per_rank) for per_rank in plan}) == 1  # the same number of passes on every process
    assert sorted(i for per_rank in plan for rows in per_rank for i in rows) == list(range(len(lengths)))
    for per_rank in plan:
        for rows in per_rank:
            assert len(rows) <= max_rows
            if max_tokens is not None and len(rows) > 1:
                assert sum(lengths[i] for i in rows) <= max_tokens
    # the processes' token totals differ by at most one row (the last one the busiest process took)
    loads = [sum(lengths[i] for rows in per_rank for i in rows) for per_rank in plan]
    assert max(loads) - min(loads) <= max(lengths)
