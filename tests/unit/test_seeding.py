"""Every seed comes from graft.seeding.derive; these golden values are the ones the code used before the
derivations moved there, so no result of the project changed (and none may change silently)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from graft.data.problems import batch_indices
from graft.engine.vllm import prompt_seed
from graft.seeding import PURPOSES, derive, generator

GOLDEN = [
    ("epoch", (7, 3), 700024),
    ("rollout", (5, 11, "smol", 1), 330884922447),
    ("select", (5, 11), 505002627),
    ("admit", (5, 11, "qwen"), 806580249),
    ("order", (5, 11, "qwen"), 806580259),
    ("eval", (3, "math500"), 2640156262),
    ("complementarity", (3, "math500"), 2640156262),
    ("vllm_prompt", (9, 4), 1415512338),
    ("hf_prompt", (9, 4), 9000032),
    ("warmup_slips", (3, "math500"), 2640156263),
    ("warmup_dialect", (3, "math500"), 2640156264),
    ("selection_run", (2, 3), 9777786),
    ("resample", (5, 11, 2), 505002658),
    ("resample_rollout", (5, 11, 2, "smol", 1), 330885131905),
]


@pytest.mark.parametrize(("purpose", "args", "value"), GOLDEN)
def test_golden_values(purpose, args, value):
    assert derive(args[0], purpose, *args[1:]) == value


def test_every_purpose_is_pinned():
    assert {purpose for purpose, _, _ in GOLDEN} == set(PURPOSES)


def test_unknown_purpose_is_refused():
    with pytest.raises(ValueError, match="unknown seed purpose 'nope'"):
        derive(0, "nope")


def test_prompt_order_is_pinned():
    # the first step's prompts of seed 0 over 10 problems: torch.randperm under the "epoch" seed
    expected = torch.randperm(10, generator=torch.Generator().manual_seed(0)).tolist()[:4]
    assert batch_indices(0, 4, 10, seed=0) == expected
    assert prompt_seed(9, 4) == 1415512338


@given(st.integers(0, 2**40), st.integers(1, 600), st.integers(1, 64))
def test_no_two_vllm_samples_share_a_seed(seed, prompts, n):
    """vLLM seeds a prompt's k-th sample with its prompt's seed + k (vllm/v1/engine/parallel_sampling.py): over a
    call's prompts and samples every such seed is different, so no two samples draw the same random stream."""
    seeds = {prompt_seed(seed, i) + k for i in range(prompts) for k in range(n)}
    assert len(seeds) == prompts * n


@given(st.integers(0, 2**20), st.integers(0, 10_000), st.sampled_from(["smol", "qwen", "octo"]))
def test_generators_depend_only_on_their_inputs(seed, step, model):
    a = torch.rand(3, generator=generator(seed, "order", step, model))
    b = torch.rand(3, generator=generator(seed, "order", step, model))
    assert torch.equal(a, b)
    assert 0 <= derive(seed, "rollout", step, model, 0) < 2**63
