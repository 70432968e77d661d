"""The prompt sampler: per-epoch permutations, the last partial batch dropped (as verl does)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from graft.data.problems import batch_indices
from graft.seeding import generator


def test_paper_schedule_is_three_epochs_of_58_batches():
    steps = [batch_indices(s, 128, 7500, seed=0) for s in range(174)]
    for epoch in range(3):
        seen = [i for step in steps[58 * epoch : 58 * (epoch + 1)] for i in step]
        assert len(seen) == len(set(seen)) == 58 * 128  # 76 prompts of each permutation are left out
    fresh = torch.randperm(7500, generator=generator(0, "epoch", 1)).tolist()
    assert steps[58] == fresh[:128]  # the second epoch starts a fresh permutation at its beginning


@given(st.integers(1, 64), st.integers(1, 300), st.integers(0, 200), st.integers(0, 5))
def test_no_batch_repeats_a_prompt_or_mixes_epochs(batch, problems, step, seed):
    if batch > problems:
        with pytest.raises(ValueError, match="needs at least as many problems"):
            batch_indices(step, batch, problems, seed)
        return
    indices = batch_indices(step, batch, problems, seed)
    assert len(indices) == batch == len(set(indices)) and all(0 <= i < problems for i in indices)
