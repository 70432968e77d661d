"""The tiny Qwen3-architecture model the engine tests build in memory: the paper's Qwen3 layers (grouped KV heads,
per-head q/k norms) at sizes a CPU runs in milliseconds. Its weights depend only on the sizes and ``seed``."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM


def tiny_qwen3(
    vocab: int = 300,
    *,
    hidden: int = 32,
    intermediate: int = 64,
    layers: int = 1,
    heads: int = 2,
    kv_heads: int = 1,
    head_dim: int = 16,
    tied: bool = False,
    max_positions: int | None = None,
    seed: int = 0,
) -> Qwen3ForCausalLM:
    """In eval mode. ``max_positions`` None keeps Qwen3Config's own default."""
    torch.manual_seed(seed)
    positions = {} if max_positions is None else {"max_position_embeddings": max_positions}
    config = Qwen3Config(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        tie_word_embeddings=tied,
        **positions,
    )
    return Qwen3ForCausalLM(config).eval()


def tiny_model_dir(directory: Path, shard_bytes: int | None = None) -> Path:
    """A ``from_pretrained`` directory of ``tiny_qwen3`` and a byte-level tokenizer trained on a few sentences, as
    a Hugging Face download lays it out: config.json, tokenizer files and safetensors weights (shards and their
    index when ``shard_bytes`` is given)."""
    from graft.toy.models import build_tokenizer

    tokenizer = build_tokenizer(["What is 2+3? so \\boxed{5}"] * 4, "gpt2_regex", 300)
    shards = {} if shard_bytes is None else {"max_shard_size": shard_bytes}
    tiny_qwen3(vocab=300).save_pretrained(directory, safe_serialization=True, **shards)
    tokenizer.save_pretrained(directory)
    return directory
