"""Three tiny causal LMs that differ like the paper's three: architecture, tokenizer and (after warm-up) skills.

| toy name | mirrors | architecture | tokenizer |
|---|---|---|---|
| smol | SmolLM3-3B-Base | SmolLM3 (Llama-style, NoPE layers) | byte-level BPE, GPT-2 regex pre-tokenization |
| qwen | Qwen3-1.7B-Base | Qwen3 (QK-norm) | byte-level BPE, digit runs split off, no regex |
| octo | OctoThinker-3B | GPT-2 (learned positions, LayerNorm) | byte-level BPE, space-prefixed words |

All three tokenizers are byte-level BPE with vocabularies of different sizes trained on differently skewed text,
so their granularity is comparable (the gate compares per-token averages) while they split many numbers
differently. Models are saved with ``save_pretrained`` and load through ``graft.engine.policy.load_policy``, the code
that loads SmolLM3 or Qwen3.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

PAD, EOS = "<|pad|>", "<|endoftext|>"


@dataclass(frozen=True)
class ToyArch:
    arch: str
    """smollm3, qwen3, gpt2 or llama."""
    pre_tokenizer: str
    """gpt2_regex, digit_runs or space_words."""
    vocab_size: int
    hidden: int
    layers: int
    heads: int


def build_tokenizer(texts: list[str], pre_tokenizer: str, vocab_size: int):
    """Train a byte-level BPE tokenizer from scratch and wrap it for ``save_pretrained``.

    ``pre_tokenizer="chars"`` with ``vocab_size`` 258 gives a byte-level character tokenizer (no merges).
    """
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    if pre_tokenizer == "gpt2_regex":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    elif pre_tokenizer == "digit_runs":
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=False), byte_level])
    elif pre_tokenizer == "space_words":
        split = pre_tokenizers.Split(Regex(" "), behavior="merged_with_next")
        tok.pre_tokenizer = pre_tokenizers.Sequence([split, byte_level])
    elif pre_tokenizer == "chars":
        tok.pre_tokenizer = byte_level
    else:
        raise ValueError(f"unknown pre_tokenizer {pre_tokenizer!r}")
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[PAD, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=PAD)


def build_model(spec: ToyArch, tokenizer, max_positions: int = 256, seed: int = 0):
    """A randomly initialised causal LM of the given architecture for ``tokenizer``; no dropout."""
    import torch
    from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig, Qwen3Config, SmolLM3Config

    common = dict(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
    )
    # the two Llama-family decoders share these; each adds what distinguishes it
    decoder = dict(
        hidden_size=spec.hidden,
        intermediate_size=3 * spec.hidden,
        num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads,
        num_key_value_heads=max(1, spec.heads // 2),
        max_position_embeddings=max_positions,
        attention_dropout=0.0,
        **common,
    )
    if spec.arch == "qwen3":
        config = Qwen3Config(head_dim=spec.hidden // spec.heads, **decoder)
    elif spec.arch == "smollm3":
        config = SmolLM3Config(no_rope_layers=[int((i + 1) % 4 != 0) for i in range(spec.layers)], **decoder)
    elif spec.arch == "llama":
        config = LlamaConfig(**decoder)
    elif spec.arch == "gpt2":
        config = GPT2Config(
            n_embd=spec.hidden,
            n_layer=spec.layers,
            n_head=spec.heads,
            n_positions=max_positions,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            **common,
        )
    else:
        raise ValueError(f"unknown toy architecture {spec.arch!r}")
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config)


def save(model, tokenizer, directory: str | Path) -> Path:
    directory = Path(directory)
    model.save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    return directory
