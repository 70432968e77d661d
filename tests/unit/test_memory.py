"""The memory plan's terms (graft.memory) on hand-worked sizes, and its monotonicity in the budgets."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from graft.config import ModelSizes
from graft.memory import (
    SCORE_LOGIT_COPIES,
    UPDATE_LOGIT_COPIES,
    forward_bytes,
    kept_activation_bytes,
    layer_working_bytes,
    logprob_bytes,
    parameters,
    read_sizes,
)

# hidden 4, intermediate 8, 2 heads and 1 KV head of 2 dims, vocabulary 10, 3 layers
TINY = ModelSizes(layers=3, hidden=4, intermediate=8, heads=2, kv_heads=1, head_dim=2, vocab=10)


def test_parameters_by_hand():
    # per layer: q 4x4, k and v 4x2 each, o 4x4, gate, up, down 4x8 each, two norms of 4 -> 16+16+16+96+8 = 152
    assert parameters(TINY) == 10 * 4 + 3 * 152 + 4
    untied = ModelSizes(**{**TINY.__dict__, "tied": False})
    assert parameters(untied) == parameters(TINY) + 10 * 4


def test_the_papers_models_have_their_published_sizes():
    qwen3 = ModelSizes(layers=28, hidden=2048, intermediate=6144, heads=16, kv_heads=8, head_dim=128, vocab=151936)
    smollm3 = ModelSizes(layers=36, hidden=2048, intermediate=11008, heads=16, kv_heads=4, head_dim=128, vocab=128256)
    assert round(parameters(qwen3) / 1e9, 2) == 1.72  # Qwen3-1.7B: 1.7B with its 0.31B embedding
    assert round(parameters(smollm3) / 1e9, 2) == 3.08  # SmolLM3-3B


def test_sizes_from_a_gpt2_and_a_qwen3_config_json(tmp_path):
    gpt2 = tmp_path / "gpt2.json"
    gpt2.write_text(json.dumps({"n_embd": 8, "n_layer": 2, "n_head": 2, "vocab_size": 50, "n_inner": None}))
    assert read_sizes(gpt2) == ModelSizes(
        layers=2, hidden=8, intermediate=32, heads=2, kv_heads=2, head_dim=4, vocab=50
    )
    qwen = tmp_path / "qwen.json"
    fields = {"hidden_size": 4, "num_hidden_layers": 3, "num_attention_heads": 2, "num_key_value_heads": 1}
    qwen.write_text(
        json.dumps({**fields, "head_dim": 2, "intermediate_size": 8, "vocab_size": 10, "tie_word_embeddings": False})
    )
    assert read_sizes(qwen) == ModelSizes(**{**TINY.__dict__, "tied": False})


def test_forward_terms_by_hand():
    tokens, response, compute = 6, 4, 2
    # kept: the final hidden states (6 x 4), and with checkpointing every layer's input too (x 4 in all)
    assert kept_activation_bytes(TINY, tokens, False, compute) == 6 * 4 * 2
    assert kept_activation_bytes(TINY, tokens, True, compute) == 6 * 4 * 2 * 4
    q = (2 + 2 * 1) * 2  # q, k and v widths
    assert layer_working_bytes(TINY, tokens, False, compute) == 6 * (3 * 4 + q + 3 * 8) * 2
    # a chunk of 1 MiB holds every one of the 4 response positions: copies x 4 x 10 float32, plus the hidden states
    assert logprob_bytes(TINY, response, 1, False) == SCORE_LOGIT_COPIES * 4 * 10 * 4 + 4 * 4 * 4
    assert logprob_bytes(TINY, response, 1, True) == UPDATE_LOGIT_COPIES * 4 * 10 * 4 + 4 * 4 * 4 * 2
    # the layer's working set and the chunk are never alive together: the larger counts
    larger = max(layer_working_bytes(TINY, tokens, True, compute), logprob_bytes(TINY, response, 1, True))
    assert (
        forward_bytes(TINY, tokens, response, 1, True, compute) == kept_activation_bytes(TINY, tokens, True, 2) + larger
    )


@settings(max_examples=50, deadline=None)
@given(
    tokens=st.integers(1, 100_000),
    more=st.integers(0, 100_000),
    chunk=st.floats(0.01, 4096),
    grad=st.booleans(),
)
def test_memory_grows_with_the_budgets_and_the_chunk_bounds_the_logits(tokens, more, chunk, grad):
    qwen3 = ModelSizes(layers=28, hidden=2048, intermediate=6144, heads=16, kv_heads=8, head_dim=128, vocab=151936)
    response = tokens * 2 // 3
    base = forward_bytes(qwen3, tokens, response, chunk, grad, 2)
    assert forward_bytes(qwen3, tokens + more, response + more, chunk, grad, 2) >= base
    assert forward_bytes(qwen3, tokens, response, chunk * 2, grad, 2) >= base
    # never more logits than one chunk's worth, however many response tokens
    copies = UPDATE_LOGIT_COPIES if grad else SCORE_LOGIT_COPIES
    logits = logprob_bytes(qwen3, response, chunk, grad) - response * 2048 * 4 * (2 if grad else 1)
    assert logits <= copies * max(chunk * 2**20, 151936 * 4)


def test_a_packed_pass_plans_every_token_of_its_budget_as_a_response_position():
    """Padded, a 36,864-token pass holds 6 whole rows (6 x 4,096 response positions); packed, shorter rows fill it,
    so the plan takes every token as one: with a chunk that holds every position, that many more positions'
    logits (3 float32 copies of Qwen3's vocabulary) and hidden states in the scoring pass."""
    from graft.config import config_from_dict, read_yaml
    from graft.memory import cell_phases

    data = read_yaml("config/paper.yaml")
    scoring = {}
    for packing in (False, True):
        train = {**data["train"], "packing": packing, "logits_chunk_mib": 65536}
        scoring[packing] = cell_phases(config_from_dict({**data, "train": train}), ("qwen3",))[1]
    more = 36_864 - 6 * 4096
    expected = more * (SCORE_LOGIT_COPIES * 151_936 * 4 + 2048 * 4)
    assert round(scoring[True].gb * 1e9 - scoring[False].gb * 1e9) == expected
