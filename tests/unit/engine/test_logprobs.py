"""Chunked log-probs (graft.engine.logprobs) against the plain formula: log_softmax of the model's whole logits.

The plain formula is what the package computed before chunking; it is kept here as the reference. A single chunk
must give it bit for bit (the toy world's digits), several chunks within float32 rounding, for log-probs, a loss
and its gradient, on small and on large (Qwen3-sized) vocabularies and at a temperature other than 1.
"""

from __future__ import annotations

import pytest
import torch
from helpers.tiny_qwen3 import tiny_qwen3
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import GPT2Config, GPT2LMHeadModel

from graft.config import TrainSpec
from graft.engine.chunks import chunk_positions
from graft.engine.logprobs import chunked_token_logprobs
from graft.engine.policy import pad_right, response_logprobs

QWEN3_VOCAB = 151_936
GPT2_VOCAB = 50_257


def qwen3(vocab: int, seed: int = 0) -> torch.nn.Module:
    return tiny_qwen3(vocab, heads=4, kv_heads=2, head_dim=8, tied=True, seed=seed)


def gpt2(vocab: int, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=vocab, n_embd=32, n_layer=1, n_head=4, n_positions=64)
    config.resid_pdrop = config.embd_pdrop = config.attn_pdrop = 0.0
    return GPT2LMHeadModel(config).eval()


def reference_logprobs(model, prompts, responses, pad_id, temperature=1.0):
    """The plain formula: log_softmax over the whole [B, L, V] logits, then each response token's entry."""
    ids, attn = pad_right([p + r for p, r in zip(prompts, responses, strict=True)], pad_id)
    logits = model(input_ids=ids, attention_mask=attn.long()).logits[:, :-1].float()
    token_logp = torch.log_softmax(logits / temperature, dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    width = max(len(r) for r in responses)
    out = torch.zeros(len(prompts), width)
    mask = torch.zeros(len(prompts), width, dtype=torch.bool)
    for i, (p, r) in enumerate(zip(prompts, responses, strict=True)):
        out[i, : len(r)] = token_logp[i, len(p) - 1 : len(p) - 1 + len(r)]
        mask[i, : len(r)] = True
    return out, mask


def batch(vocab: int, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    lengths = [(3, 5), (6, 2), (2, 7), (4, 1)]
    prompts = [torch.randint(1, vocab, (p,), generator=g).tolist() for p, _ in lengths]
    responses = [torch.randint(1, vocab, (r,), generator=g).tolist() for _, r in lengths]
    return prompts, responses


def loss_and_grads(model, logp, mask):
    """A token-weighted loss (so positions carry different gradients) and its gradient on every parameter."""
    weights = torch.linspace(-1.0, 2.0, logp.numel()).reshape(logp.shape)
    loss = (logp * weights * mask).sum() / mask.sum()
    grads = torch.autograd.grad(loss, [p for p in model.parameters()])
    return loss, grads


@pytest.mark.parametrize("make", [qwen3, gpt2])
@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_one_chunk_is_the_plain_formula_bit_for_bit(make, temperature):
    model = make(300)
    prompts, responses = batch(300)
    ref, ref_mask = reference_logprobs(model, prompts, responses, 0, temperature)
    ref_loss, ref_grads = loss_and_grads(model, ref, ref_mask)
    logp, mask = response_logprobs(model, prompts, responses, 0, temperature)
    loss, grads = loss_and_grads(model, logp, mask)
    assert torch.equal(mask, ref_mask)
    assert torch.equal(logp, ref)
    assert torch.equal(loss, ref_loss)
    assert all(torch.equal(a, b) for a, b in zip(grads, ref_grads, strict=True))


@pytest.mark.parametrize(("make", "vocab"), [(gpt2, GPT2_VOCAB), (qwen3, QWEN3_VOCAB)])
@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_many_chunks_equal_the_plain_formula(make, vocab, temperature):
    model = make(vocab)
    prompts, responses = batch(vocab)
    # 1 MiB chunks: 5 positions of GPT-2's vocabulary, 1 of Qwen3's; the batch has 52
    ref, ref_mask = reference_logprobs(model, prompts, responses, 0, temperature)
    ref_loss, ref_grads = loss_and_grads(model, ref, ref_mask)
    logp, mask = response_logprobs(model, prompts, responses, 0, temperature, logits_chunk_mib=1)
    loss, grads = loss_and_grads(model, logp, mask)
    assert torch.equal(mask, ref_mask)
    torch.testing.assert_close(logp, ref, rtol=0, atol=2e-5)
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-6)
    for a, b in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_chunk_positions():
    assert chunk_positions(QWEN3_VOCAB, 512) == 883  # 512 MiB / (151,936 x 4 bytes)
    assert chunk_positions(128_256, 512) == 1046
    assert chunk_positions(QWEN3_VOCAB, 0) == 1


class _LargestTensor(TorchDispatchMode):
    """Records the largest number of elements of any tensor an operation returns."""

    largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, tuple | list) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


def test_no_tensor_spans_the_batch_times_the_vocabulary():
    """Item of the design: no [rows, tokens, vocabulary] tensor is ever whole, forward or backward."""
    model = qwen3(QWEN3_VOCAB)
    prompts, responses = batch(QWEN3_VOCAB)
    rows, width = len(prompts), max(len(p) + len(r) for p, r in zip(prompts, responses, strict=True))
    with _LargestTensor() as seen:
        logp, mask = response_logprobs(model, prompts, responses, 0, logits_chunk_mib=1)
        (logp * mask).sum().backward()
    chunk = chunk_positions(QWEN3_VOCAB, 1)
    # the largest tensors are the embedding's weight and gradient [V, H] and one chunk's logits [chunk, V]
    assert seen.largest <= max(QWEN3_VOCAB * 32, chunk * QWEN3_VOCAB)
    assert seen.largest < rows * width * QWEN3_VOCAB


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(0, 12),
    vocab=st.integers(2, 40),
    chunk=st.integers(1, 14),
    temperature=st.sampled_from([1.0, 0.5, 1.7]),
    seed=st.integers(0, 2**16),
)
def test_chunked_token_logprobs_is_log_softmax_at_the_targets(n, vocab, chunk, temperature, seed):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(n, 6, generator=g, dtype=torch.float64).float().requires_grad_()
    weight = torch.randn(vocab, 6, generator=g).requires_grad_()
    bias = torch.randn(vocab, generator=g).requires_grad_()
    targets = torch.randint(0, vocab, (n,), generator=g)
    upstream = torch.randn(n, generator=g)

    got = chunked_token_logprobs(hidden, weight, bias, targets, temperature, chunk)
    want = torch.log_softmax((hidden @ weight.T + bias) / temperature, -1)[torch.arange(n), targets]
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    if n:
        got_grads = torch.autograd.grad((got * upstream).sum(), (hidden, weight, bias))
        want_grads = torch.autograd.grad((want * upstream).sum(), (hidden, weight, bias))
        for a, b in zip(got_grads, want_grads, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_log_probs_without_gradients_keep_no_graph():
    model = qwen3(QWEN3_VOCAB)
    prompts, responses = batch(QWEN3_VOCAB)
    with torch.no_grad():
        logp, _ = response_logprobs(model, prompts, responses, 0, logits_chunk_mib=1)
    assert not logp.requires_grad


def test_scoring_passes_are_cut_by_the_token_budget_and_score_the_same():
    from types import SimpleNamespace

    from graft.engine.policy import Policy
    from graft.engine.prompts import PromptFormat
    from graft.engine.scoring import ScoringSettings, score_responses

    model = qwen3(300)
    policy = Policy("case", model, SimpleNamespace(pad_token_id=0, eos_token_id=1), PromptFormat())
    prompts, responses = batch(300)
    widths = []
    hook = model.register_forward_pre_hook(
        lambda _, args, kwargs: widths.append(kwargs["input_ids"].shape), with_kwargs=True
    )
    try:
        whole, whole_mean = score_responses(policy, prompts, responses, ScoringSettings())
        assert len(widths) == 1  # one pass of all four rows
        widths.clear()
        cut, cut_mean = score_responses(policy, prompts, responses, ScoringSettings(micro_batch_tokens=18))
    finally:
        hook.remove()
    # rows of 8, 8, 9 and 5 tokens in order, at most 18 padded tokens a pass: 2 x 8, then 2 x 9 (3 x 9 is over)
    assert [tuple(w) for w in widths] == [(2, 8), (2, 9)]
    for a, b in zip(cut, whole, strict=True):
        assert a == pytest.approx(b, abs=1e-6)
    torch.testing.assert_close(cut_mean, whole_mean, rtol=0, atol=1e-6)


def decoder(arch: str, vocab: int, layers: int = 2, seed: int = 0) -> torch.nn.Module:
    """A 1-2 layer model of the paper's three architectures (OctoThinker is a Llama) or the toy's GPT-2."""
    import transformers

    if arch == "gpt2":
        return gpt2(vocab, seed)
    torch.manual_seed(seed)
    config_cls, model_cls = {
        "qwen3": ("Qwen3Config", "Qwen3ForCausalLM"),
        "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM"),
        "llama": ("LlamaConfig", "LlamaForCausalLM"),
    }[arch]
    config = getattr(transformers, config_cls)(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        tie_word_embeddings=True,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=1,
    )
    return getattr(transformers, model_cls)(config).eval()


REAL_VOCAB = {"qwen3": QWEN3_VOCAB, "smollm3": 128_256, "llama": 128_256, "gpt2": GPT2_VOCAB}


@pytest.mark.parametrize("arch", ["qwen3", "smollm3", "llama", "gpt2"])
@pytest.mark.parametrize("real", [False, True], ids=["toy-vocabulary", "real-vocabulary"])
def test_packed_rows_equal_padded_rows(arch, real):
    """One packed sequence gives the padded batch's log-probs, loss and gradients: at a toy vocabulary in one
    chunk, and at the model's real vocabulary with the chunked head and gradient checkpointing (the backward
    recomputes each layer, which must attend within the rows as its forward did). A padded pass after a packed
    one is the padded pass of before, bit for bit."""
    from graft.engine.distributed import enable_gradient_checkpointing

    vocab = REAL_VOCAB[arch] if real else 300
    model = decoder(arch, vocab)
    prompts, responses = batch(vocab)
    chunk_mib = 4 if real else TrainSpec.logits_chunk_mib  # 4 MiB: 6-20 positions a chunk of 52
    if real:
        enable_gradient_checkpointing(model)
    padded, padded_mask = response_logprobs(model, prompts, responses, 0, 0.6, chunk_mib)
    padded_loss, padded_grads = loss_and_grads(model, padded, padded_mask)
    packed, mask = response_logprobs(model, prompts, responses, 0, 0.6, chunk_mib, packed=True)
    loss, grads = loss_and_grads(model, packed, mask)
    assert torch.equal(mask, padded_mask)
    torch.testing.assert_close(packed, padded, rtol=0, atol=2e-5)
    torch.testing.assert_close(loss, padded_loss, rtol=1e-5, atol=1e-6)
    for a, b in zip(grads, padded_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    again, _ = response_logprobs(model, prompts, responses, 0, 0.6, chunk_mib)
    assert torch.equal(again, padded)


def test_a_packed_pass_attends_within_rows_at_the_cost_of_its_rows():
    """No [packed length, packed length] tensor is made: attention runs row by row."""
    model = decoder("qwen3", 300, layers=1)
    prompts, responses = [[5] * 40] * 6, [[7] * 60] * 6  # six rows of 100 tokens: 600 packed
    with torch.no_grad(), _LargestTensor() as seen:
        response_logprobs(model, prompts, responses, 0, packed=True)
    # transformers' own SDPA over packed rows makes a [600, 600] block-diagonal mask, and scores of that size
    assert seen.largest < 600 * 600
