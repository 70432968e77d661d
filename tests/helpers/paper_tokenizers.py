"""Tokenizers that carry the paper models' real special tokens at their real ids, since the hub is unreachable here
and the published tokenizers cannot be loaded: a byte-level vocabulary plus the special tokens that each model's
``tokenizer_config.json`` lists, with the EOS its ``generation_config.json`` names; and each model's prompt format
as config/paper.yaml sets it."""

from __future__ import annotations

from dataclasses import dataclass

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

from graft.config import load_config
from graft.engine.prompts import PromptFormat, prompt_format

# Written for these tests: Qwen3's turns as its published template writes them for one user message and an
# assistant reply (ChatML, an empty think block before the reply's content, no system block unless one is given).
QWEN3_STYLE = (
    "{%- for m in messages -%}{{- '<|im_start|>' + m['role'] + '\\n' -}}"
    "{%- if m['role'] == 'assistant' -%}{{- '<think>\\n\\n</think>\\n\\n' -}}{%- endif -%}"
    "{{- m['content'] + '<|im_end|>\\n' -}}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


@dataclass(frozen=True)
class PaperModel:
    specials: dict[str, int]
    """The special tokens the prompt format and the stop use, at the model's ids."""
    bos: str | None
    eos: str
    """The tokenizer's EOS (tokenizer_config.json)."""
    generation_eos: int
    """generation_config.json's ``eos_token_id``."""
    own_template: str | None
    """The chat template the tokenizer ships."""


PAPER_MODELS = {
    "qwen3": PaperModel(  # Qwen/Qwen3-1.7B-Base
        {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645},
        None,
        "<|endoftext|>",
        151643,
        QWEN3_STYLE,
    ),
    "smollm3": PaperModel(  # HuggingFaceTB/SmolLM3-3B-Base: Llama 3's vocabulary with ChatML markers
        {"<|begin_of_text|>": 128000, "<|end_of_text|>": 128001, "<|im_start|>": 128011, "<|im_end|>": 128012},
        "<|begin_of_text|>",
        "<|end_of_text|>",
        128001,
        None,
    ),
    "octothinker": PaperModel(  # OctoThinker/OctoThinker-3B-Hybrid-Base: Llama 3.2's vocabulary
        {
            "<|begin_of_text|>": 128000,
            "<|end_of_text|>": 128001,
            "<|start_header_id|>": 128006,
            "<|end_header_id|>": 128007,
            "<|eot_id|>": 128009,
        },
        "<|begin_of_text|>",
        "<|end_of_text|>",
        128001,
        None,
    ),
}


def paper_tokenizer(name: str):
    """Model ``name``'s special tokens at their ids over a byte-level vocabulary, with its EOS and own template."""
    from transformers import PreTrainedTokenizerFast

    model = PAPER_MODELS[name]
    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))} | model.specials
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in model.specials])
    out = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=model.bos, eos_token=model.eos, pad_token=model.eos)
    out.chat_template = model.own_template
    return out


def paper_format(name: str) -> PromptFormat:
    """config/paper.yaml's prompt format of model ``name``: the paper's prompt as one user message of a chat."""
    return prompt_format(load_config("config/paper.yaml").models[name])
