"""The memory plan's terms (graft.planning.memory) on hand-worked sizes, DeepSpeed's own estimators beside its ZeRO
term, the plan's refusal of an engine share that no GPU holds, and its monotonicity in the budgets."""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from graft.cli import main
from graft.config import ModelSizes, config_from_dict, read_yaml
from graft.errors import ConfigError
from graft.planning.memory import (
    CUDA_CONTEXT_BYTES,
    CUDA_GRAPH_BYTES,
    ENGINE_NON_TORCH_BYTES,
    NCCL_COMMUNICATOR_BYTES,
    PASS_SLACK_BYTES,
    SCORE_LOGIT_COPIES,
    UPDATE_LOGIT_COPIES,
    cell_held,
    cell_phases,
    engine_profile_bytes,
    forward_bytes,
    kept_activation_bytes,
    kv_bytes_per_token,
    kv_cache_tokens,
    layer_working_bytes,
    logprob_bytes,
    nccl_communicators,
    parameters,
    pass_bytes,
    read_sizes,
    rollout_kv_tokens,
    zero_state_bytes,
)
from graft.planning.plan import describe, training_cells

# hidden 4, intermediate 8, 2 heads and 1 KV head of 2 dims, vocabulary 10, 3 layers
TINY = ModelSizes(layers=3, hidden=4, intermediate=8, heads=2, kv_heads=1, head_dim=2, vocab=10)
SMOLLM3 = ModelSizes(layers=36, hidden=2048, intermediate=11008, heads=16, kv_heads=4, head_dim=128, vocab=128256)
QWEN3 = ModelSizes(layers=28, hidden=2048, intermediate=6144, heads=16, kv_heads=8, head_dim=128, vocab=151936)
OCTOTHINKER = ModelSizes(layers=28, hidden=3072, intermediate=8192, heads=24, kv_heads=8, head_dim=128, vocab=128256)


def paper(**scale):
    """config/paper.yaml with some of its scale settings changed."""
    data = read_yaml("config/paper.yaml")
    return config_from_dict({**data, "scale": {**data["scale"], **scale}})


def test_parameters_by_hand():
    # per layer: q 4x4, k and v 4x2 each, o 4x4, gate, up, down 4x8 each, two norms of 4 -> 16+16+16+96+8 = 152
    assert parameters(TINY) == 10 * 4 + 3 * 152 + 4
    untied = ModelSizes(**{**TINY.__dict__, "tied": False})
    assert parameters(untied) == parameters(TINY) + 10 * 4


def test_the_papers_models_have_their_published_sizes():
    assert round(parameters(QWEN3) / 1e9, 2) == 1.72  # Qwen3-1.7B: 1.7B with its 0.31B embedding
    assert round(parameters(SMOLLM3) / 1e9, 2) == 3.08  # SmolLM3-3B


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
    # a pass adds the gathered embedding (10 x 4) and two layers (152 each) in bf16, with gradient the embedding's
    # float32 gradient, and the slack the CPU measurements show above the formula
    for grad, gradient in ((False, 0), (True, 10 * 4 * 4)):
        expected = (40 + 2 * 152) * 2 + gradient + forward_bytes(TINY, tokens, response, 1, grad, 2) + PASS_SLACK_BYTES
        assert pass_bytes(TINY, tokens, response, 1, grad, compute) == expected


@settings(max_examples=50, deadline=None)
@given(
    tokens=st.integers(1, 100_000),
    more=st.integers(0, 100_000),
    chunk=st.floats(0.01, 4096),
    grad=st.booleans(),
)
def test_memory_grows_with_the_budgets_and_the_chunk_bounds_the_logits(tokens, more, chunk, grad):
    response = tokens * 2 // 3
    base = forward_bytes(QWEN3, tokens, response, chunk, grad, 2)
    assert forward_bytes(QWEN3, tokens + more, response + more, chunk, grad, 2) >= base
    assert forward_bytes(QWEN3, tokens, response, chunk * 2, grad, 2) >= base
    # never more logits than one chunk's worth, however many response tokens
    copies = UPDATE_LOGIT_COPIES if grad else SCORE_LOGIT_COPIES
    logits = logprob_bytes(QWEN3, response, chunk, grad) - response * 2048 * 4 * (2 if grad else 1)
    assert logits <= copies * max(chunk * 2**20, 151936 * 4)


def test_zero_model_states_are_what_deepspeeds_own_estimators_give(capsys):
    from deepspeed.runtime.zero.stage3 import (
        estimate_zero3_model_states_mem_needs,
        estimate_zero3_model_states_mem_needs_all_cold,
    )
    from deepspeed.runtime.zero.stage_1_and_2 import (
        estimate_zero2_model_states_mem_needs,
        estimate_zero2_model_states_mem_needs_all_cold,
    )

    # the paper's models over 4 GPUs, in GB: ZeRO-3 and ZeRO-2 (FSDP2's 16 bytes a parameter give 12.3 / 6.9 / 12.9)
    expected = {"smollm3": (SMOLLM3, 14.9, 20.0), "qwen3": (QWEN3, 9.0, 11.2), "octothinker": (OCTOTHINKER, 16.0, 20.9)}
    for sizes, zero3, zero2 in expected.values():
        total, largest = parameters(sizes), sizes.vocab * sizes.hidden  # the largest layer: the embedding
        _, gpu3, _ = estimate_zero3_model_states_mem_needs(total, largest, 4, 1, False, False)
        _, gpu2 = estimate_zero2_model_states_mem_needs(total, 4, 1, False)
        assert zero_state_bytes(sizes, 3, 4) == pytest.approx(gpu3, abs=1)
        assert zero_state_bytes(sizes, 2, 4) == pytest.approx(gpu2, abs=1)
        assert (round(gpu3 / 1e9, 1), round(gpu2 / 1e9, 1)) == (zero3, zero2)
        # the printing estimators' rows without offload say the same, in GiB
        estimate_zero3_model_states_mem_needs_all_cold(total, largest, num_gpus_per_node=4)
        assert printed_without_offload(capsys) == {round(zero_state_bytes(sizes, 3, 4) / 2**30, 2)}
        estimate_zero2_model_states_mem_needs_all_cold(total, num_gpus_per_node=4)
        assert printed_without_offload(capsys) == {round(zero_state_bytes(sizes, 2, 4) / 2**30, 2)}


def printed_without_offload(capsys) -> set[float]:
    """The GiB per GPU of the rows a DeepSpeed ``..._all_cold`` estimator printed for no optimizer offload."""
    rows = [line for line in capsys.readouterr().out.splitlines() if "offload_optimizer=none" in line]
    return {float(row.split("|")[1].strip().removesuffix("GB")) for row in rows}


def test_kv_cache_tokens_by_hand():
    # SmolLM3: a key and a value of 4 KV heads x 128 in each of 36 layers, bf16; Qwen3 and OctoThinker: 8 x 128, 28
    assert kv_bytes_per_token(SMOLLM3, 2) == 2 * 36 * 4 * 128 * 2 == 73_728
    assert kv_bytes_per_token(QWEN3, 2) == kv_bytes_per_token(OCTOTHINKER, 2) == 2 * 28 * 8 * 128 * 2 == 114_688
    # TINY's profiling peak: 16,384 tokens' final hidden states (x 4 widths) and one layer's working set (3 x 4 +
    # 4 x 2 + 3 x 8 = 44 widths), 2 bytes each; its sampler over 1,024 sequences x 10 logits x 24 bytes is smaller
    assert engine_profile_bytes(TINY, 2, 1024) == 16384 * (4 + 44) * 2
    assert engine_profile_bytes(TINY, 2, 10**6) == 10**6 * 10 * 24
    # a share of 1 MB above its weights (500 parameters x 2 bytes), that peak, CUDA graphs and the rest: whole
    # blocks of 16 tokens x 24 bytes (3 layers x 1 KV head x 2 dims x key and value x 2 bytes)
    share = 1_000_000 + 500 * 2 + 16384 * 48 * 2 + CUDA_GRAPH_BYTES + ENGINE_NON_TORCH_BYTES
    assert kv_cache_tokens(share, TINY, 2, 1024) == 1_000_000 // (24 * 16) * 16 == 41_664
    assert kv_cache_tokens(1e6, TINY, 2, 1024) == 0  # less than the weights and graphs: no cache at all


def test_a_rollouts_kv_tokens_by_hand():
    # 32 prompts x 8 samples at once: each prompt's 2,048 tokens once (prefix caching), each sample's response and
    # two partial blocks
    assert rollout_kv_tokens(32, 256, 2048, 2048) == 32 * 2048 + 256 * (2048 + 32) == 598_016
    # 16 sequences at once from 32 prompts: at most one prompt per sequence
    assert rollout_kv_tokens(32, 16, 100, 10) == 16 * 100 + 16 * (10 + 32)


def test_what_a_gpu_holds_throughout_for_the_paper_pair_p3():
    cfg = paper()
    pair = ("smollm3", "octothinker")
    held = cell_held(cfg, pair)
    states = parameters(SMOLLM3) + parameters(OCTOTHINKER)
    assert held.model_states == 16 * states / 4 and held.gradients == 4 * states / 4
    assert round(held.gradients / 1e9, 1) == 6.3
    assert held.reference == 0 and cell_held(cfg, pair, reference=True).reference == 4 * states / 4
    # one training process and two engine processes; one NCCL communicator; two sleeping engines' CUDA graphs
    assert held.contexts == 3 * CUDA_CONTEXT_BYTES and held.nccl == NCCL_COMMUNICATOR_BYTES
    assert held.engines_asleep == 2 * CUDA_GRAPH_BYTES
    # the rollout: all of it and one engine awake at its share of the 150.75 GB CUDA reports, its graphs within it
    rollout = cell_phases(cfg, pair)[0]
    assert rollout.gb * 1e9 == pytest.approx(held.total + 0.6 * 150.75e9 - CUDA_GRAPH_BYTES)
    # DeepSpeed's model states in place of FSDP2's, and its own communicator
    zero2 = cell_held(paper(engine="deepspeed", zero_stage=2), pair)
    assert zero2.model_states == zero_state_bytes(SMOLLM3, 2, 4) + zero_state_bytes(OCTOTHINKER, 2, 4)
    assert zero2.nccl == 2 * NCCL_COMMUNICATOR_BYTES


def test_the_weight_sync_gathers_the_largest_tensor_in_the_engines_dtype_beside_the_woken_engine():
    """The sync's peak (graft.engine.weight_sync): the [vocabulary, hidden] embedding, each process's shard cast to
    the engine's bf16 before the gather (1/4 of it on 4 processes) and gathered whole in bf16, not float32, then the
    engine's weights woken in bf16; the larger model of the pair decides."""
    cfg = paper()
    pair = ("smollm3", "octothinker")
    held = cell_held(cfg, pair).total
    sync = cell_phases(cfg, pair)[3]
    assert sync.name == "weight sync"
    expected = max(s.vocab * s.hidden * 2 * (1 + 1 / 4) + parameters(s) * 2 for s in (SMOLLM3, OCTOTHINKER))
    assert sync.gb * 1e9 == pytest.approx(held + expected)


def test_nccl_communicators_of_each_placement():
    pair = ("smollm3", "qwen3")
    assert nccl_communicators(paper(processes=1), pair) == 0
    assert nccl_communicators(paper(), pair) == 1  # FSDP2's mesh over the whole job is the job's group
    assert nccl_communicators(paper(placement="split"), pair) == 3  # and the model's group and its mesh
    assert nccl_communicators(paper(nodes=2, sharding="hybrid"), pair) == 3  # and the mesh's two dimensions
    assert nccl_communicators(paper(nodes=2, sharding="hybrid", placement="split"), pair) == 3  # one node a model


def test_the_paper_config_refuses_an_engine_share_the_gpu_cannot_hold(capsys, tmp_path):
    with pytest.raises(ConfigError, match=r"^memory: the rollout phase of smollm3 \+ octothinker needs 1\d\d\.\d GB"):
        training_cells(paper(vllm_memory=0.8))
    path = tmp_path / "paper.yaml"
    data = read_yaml("config/paper.yaml")
    path.write_text(yaml.safe_dump({**data, "scale": {**data["scale"], "vllm_memory": 0.8}}))
    assert main(["plan", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "more than scale.gpu_memory_gb = 150.75 GB; lower scale.vllm_memory" in err


def test_the_plan_warns_where_a_kv_cache_holds_less_than_a_rollout_needs():
    lines = describe(paper(vllm_memory=0.3), "paper").splitlines()
    warnings = [line for line in lines if "KV-cache tokens, fewer than" in line]
    assert [w.split("'")[0] for w in warnings] == ["warning: smollm3", "warning: qwen3", "warning: octothinker"]
    # the paper config's own share and sequences at once hold a rollout at the mean response
    lines = describe(paper(), "paper").splitlines()
    assert not [line for line in lines if "KV-cache tokens, fewer than" in line]
    row = next(line for line in lines if line.startswith("  octothinker ") and "of 1,024" in line).split()
    # 256 of GRPO n=32's 1,024 sequences at once; 32 prompts x 2,048 + 256 x (2,048 + 32) at the mean
    assert row[3:] == ["256", "of", "1,024", "598,016", f"{32 * 2048 + 256 * (4096 + 32):,}"]
    assert int(row[2].replace(",", "")) > 598_016


def test_a_packed_pass_plans_every_token_of_its_budget_as_a_response_position():
    """Padded, a 36,864-token pass holds 6 whole rows (6 x 4,096 response positions); packed, shorter rows fill it,
    so the plan takes every token as one: with a chunk that holds every position, that many more positions'
    logits (3 float32 copies of Qwen3's vocabulary) and hidden states in the scoring pass."""
    from graft.config import config_from_dict, read_yaml
    from graft.planning.memory import cell_phases

    data = read_yaml("config/paper.yaml")
    scoring = {}
    for packing in (False, True):
        train = {**data["train"], "packing": packing, "logits_chunk_mib": 65536}
        scoring[packing] = cell_phases(config_from_dict({**data, "train": train}), ("qwen3",))[1]
    more = 36_864 - 6 * 4096
    expected = more * (SCORE_LOGIT_COPIES * 151_936 * 4 + 2048 * 4)
    assert round(scoring[True].gb * 1e9 - scoring[False].gb * 1e9) == expected
