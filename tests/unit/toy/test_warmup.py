"""The warm-up's micro-batches change how a batch is computed, not what: the same loss and gradient."""

from __future__ import annotations

import random

import pytest
import torch

from graft.toy.models import ToyArch, build_model, build_tokenizer
from graft.toy.warmup import length_parts, nll_backward


def _batch(tokenizer, size: int, seed: int) -> list[tuple[list[int], list[int]]]:
    """Examples of different lengths, so that sorting by length reorders them and each part pads differently."""
    rng = random.Random(seed)
    batch = []
    for _ in range(size):
        a, b = rng.randrange(10 ** rng.randrange(1, 6)), rng.randrange(100)
        prompt = tokenizer(f"What is {a}+{b}?")["input_ids"]
        batch.append((prompt, tokenizer(f" {a} plus {b} is {a + b}.")["input_ids"] + [tokenizer.eos_token_id]))
    return batch


def _grads(model, batch, parts: int, pad: int) -> tuple[float, list[torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    loss = nll_backward(model, length_parts(batch, parts), pad)
    return loss, [p.grad.clone() for p in model.parameters()]


def test_length_parts_are_as_many_as_asked_near_equal_and_sorted():
    batch = [([0] * (i % 5), [1] * (i % 3)) for i in range(13)]
    assert length_parts(batch, 1) == [batch]
    for parts in (2, 3, 7, 13):
        cut = length_parts(batch, parts)
        assert len(cut) == parts and {len(c) for c in cut} <= {13 // parts, -(-13 // parts)}
        flat = [e for c in cut for e in c]
        assert sorted(flat) == sorted(batch)
        assert [len(p) + len(r) for p, r in flat] == sorted(len(p) + len(r) for p, r in batch)


@pytest.mark.parametrize("parts", [2, 3, 7])
def test_micro_batches_give_the_whole_batch_loss_and_gradient(parts):
    tokenizer = build_tokenizer([f"What is {i}+{i}? {i} plus {i} is {2 * i}." for i in range(200)], "gpt2_regex", 300)
    model = build_model(ToyArch("qwen3", "gpt2_regex", 300, hidden=16, layers=1, heads=2), tokenizer)
    batch = _batch(tokenizer, 13, seed=parts)
    whole_loss, whole = _grads(model, batch, 1, tokenizer.pad_token_id)
    split_loss, split = _grads(model, batch, parts, tokenizer.pad_token_id)
    assert split_loss == pytest.approx(whole_loss, rel=1e-5)
    for a, b in zip(whole, split, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)
    # and not trivially: the response tokens carry a real loss and gradient
    assert whole_loss > 1.0 and max(float(g.abs().max()) for g in whole) > 0
