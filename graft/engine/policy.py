"""A policy: a causal LM and its tokenizer from a local ``from_pretrained`` directory, with its prompt template,
and batched per-token log-probs of given responses."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import torch

from graft.config import ModelSpec, TrainSpec
from graft.engine.logprobs import response_token_logprobs
from graft.engine.packing import attend_within_rows, pack_rows
from graft.engine.prompts import PromptFormat
from graft.errors import ConfigError

os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclass
class Policy:
    name: str
    model: torch.nn.Module
    tokenizer: object
    prompt: PromptFormat
    """How a problem becomes this model's prompt (graft.engine.prompts)."""

    def prompt_text(self, problem: str) -> str:
        """The prompt string for a problem; the same text is used when re-tokenizing a peer's response."""
        return self.prompt.render(self.tokenizer, problem)

    @property
    def add_special_tokens(self) -> bool:
        """Whether encoding adds the tokenizer's special tokens: not for a chat prompt, whose template writes its
        own (BOS and turn markers)."""
        return not self.prompt.chat

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=self.add_special_tokens)["input_ids"]

    @cached_property
    def stop_token_ids(self) -> list[int]:
        """The tokens this model's responses end at, in both rollout backends: its prompt format's end of turn
        (chat), its generation config's ``eos_token_id`` (one id or a list) and its tokenizer's EOS
        (graft.engine.prompts.PromptFormat.stop_token_ids). Computed once: the tokenizer and the generation config
        do not change during a run."""
        config = getattr(self.model, "generation_config", None)
        return self.prompt.stop_token_ids(self.tokenizer, getattr(config, "eos_token_id", None))

    @property
    def eos_token_id(self) -> int:
        """The stop token this model writes: the first of ``stop_token_ids`` (a chat turn's end, else the EOS). A
        re-tokenized peer response that ended gets it appended, and the toy warm-up ends every answer with it."""
        return self.stop_token_ids[0]

    @property
    def pad_token_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return self.eos_token_id if pad is None else pad


TOKENIZER_VOCABULARIES = (("tokenizer.json",), ("tokenizer.model",), ("vocab.json", "merges.txt"), ("vocab.txt",))
"""The files any one of which (a pair for a slow BPE tokenizer) holds a tokenizer's vocabulary."""
SAFETENSORS_INDEX = "model.safetensors.index.json"
JSON_FILES = ("config.json", "tokenizer_config.json", "tokenizer.json", "special_tokens_map.json", "vocab.json")
"""The JSON files of a model directory that transformers parses, checked as JSON when present."""


def check_model_dir(path: str | Path, what: str) -> Path:
    """Refuse, before transformers reads it, a directory that is not a whole safetensors ``from_pretrained`` model
    (a download that stopped half-way): config.json, the tokenizer's files, and the weights, every shard that the
    index names and each shard as long as its header says."""
    path = Path(path)
    if not (path / "config.json").is_file():
        raise ConfigError(f"{what}: {str(path)!r} is not a model directory: it lacks config.json")

    def lacks(name: str, why: str) -> ConfigError:
        return ConfigError(f"{what}: {str(path)!r} is not a complete model directory: it lacks {name} ({why})")

    if not (path / "tokenizer_config.json").is_file():
        raise lacks("tokenizer_config.json", "the tokenizer's settings and chat template")
    if not any(all((path / name).is_file() for name in names) for names in TOKENIZER_VOCABULARIES):
        raise lacks("tokenizer.json", "the tokenizer's vocabulary; or tokenizer.model, vocab.json with merges.txt")
    for name in JSON_FILES:
        if (path / name).is_file():
            read_json_object(path / name, what)
    index = path / SAFETENSORS_INDEX
    if index.is_file():
        try:
            shards = sorted(set(read_json_object(index, what)["weight_map"].values()))
        except (KeyError, AttributeError, TypeError):
            raise ConfigError(f"{what}: {str(index)!r} is not a safetensors index (no weight_map)") from None
        missing = [shard for shard in shards if not (path / shard).is_file()]
        if missing:
            raise lacks(missing[0], f"{len(missing)} of the {len(shards)} weight shards {SAFETENSORS_INDEX} names")
    else:
        shards = [p.name for p in sorted(path.glob("*.safetensors"))]
        if not shards:
            raise lacks("model.safetensors", "the weights; only safetensors are loaded")
    for shard in shards:
        problem = _safetensors_problem(path / shard)
        if problem:
            raise ConfigError(f"{what}: {str(path / shard)!r} {problem}: a partial download or copy")
    return path


def read_json_object(path: Path, what: str) -> dict:
    """A model directory's JSON file as an object; text that is not UTF-8 JSON (a truncated or garbled copy) is
    refused with one line naming the file."""
    try:
        value = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError(f"{what}: {str(path)!r} is not JSON ({err}): a damaged download or copy") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{what}: {str(path)!r} is not a JSON object: a damaged download or copy")
    return value


def _safetensors_problem(path: Path) -> str | None:
    """What is wrong with a safetensors file's length, or None: it holds 8 bytes of header length, the JSON header,
    then the tensors' data up to the largest end offset the header gives."""
    size = path.stat().st_size
    with path.open("rb") as f:
        length = int.from_bytes(f.read(8), "little")
        try:
            header = json.loads(f.read(length)) if 0 < length <= size - 8 else None
        except ValueError:
            header = None
    if not isinstance(header, dict):
        return "has no readable safetensors header"
    try:
        ends = [int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__"]
    except (KeyError, IndexError, TypeError, ValueError):
        return "has a safetensors header without its tensors' data offsets"
    expected = 8 + length + max(ends, default=0)
    return None if size == expected else f"is {size:,} bytes where its header says {expected:,}"


def load_policy(name: str, spec: ModelSpec, path: str | Path | None = None, dtype: str | None = None) -> Policy:
    """Load model and tokenizer with the same code for a built toy model and for SmolLM3 or Qwen3.

    Weights come from safetensors only and ``trust_remote_code`` stays off. ``dtype`` overrides the spec's
    parameter dtype (sharded training keeps float32 masters).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    where = check_model_dir(path or spec.path, f"models.{name}.path")
    tokenizer = AutoTokenizer.from_pretrained(where, trust_remote_code=False)
    model = AutoModelForCausalLM.from_pretrained(
        where, dtype=DTYPES[dtype or spec.dtype], use_safetensors=True, trust_remote_code=False
    )
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    fmt = prompt_format(spec)
    fmt.check(name, tokenizer, str(where))
    return Policy(name, model, tokenizer, fmt)


def prompt_format(spec: ModelSpec) -> PromptFormat:
    """A model's prompt format from its config entry (the chat template file read here)."""
    text = Path(spec.chat_template).read_text() if spec.chat_template else None
    return PromptFormat(spec.template, spec.chat, text)


def check_prompt(name: str, spec: ModelSpec, path: str | Path | None = None) -> str:
    """Load only the tokenizer of a model directory and refuse a prompt format it cannot apply (before any job
    runs); returns the prompt of the placeholder problem ``{problem}``."""
    from transformers import AutoTokenizer

    where = Path(path or spec.path)
    tokenizer = AutoTokenizer.from_pretrained(where, trust_remote_code=False)
    return prompt_format(spec).check(name, tokenizer, str(where))


def model_device(model: torch.nn.Module) -> torch.device:
    """Where the model computes (a sharded parameter reports its local device)."""
    return next(model.parameters()).device


def pad_right(rows: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token rows to a [B, L] long tensor and its bool mask."""
    width = max((len(r) for r in rows), default=0)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.bool)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        mask[i, : len(row)] = True
    return ids, mask


def response_logprobs(
    model: torch.nn.Module,
    prompts: list[list[int]],
    responses: list[list[int]],
    pad_id: int,
    temperature: float = 1.0,
    logits_chunk_mib: float = TrainSpec.logits_chunk_mib,
    packed: bool = TrainSpec.packing,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log pi(o_t | q, o_<t) of each response after its prompt, in one forward pass.

    Rows are prompt + response, right-padded, so every row's positions start at 0 exactly as in a left-padded
    generate call; ``packed``: the rows end to end in one sequence without padding, positions restarting at each
    row and attention kept within it (graft.engine.packing), which gives the same log-probs within float32
    rounding. Log-probs come from the raw logits divided by the temperature, computed ``logits_chunk_mib`` MiB of
    logits at a time (graft.engine.logprobs), never for the whole batch at once.

    Returns:
        (logp [B, T], mask [B, T]) with T the longest response; logp carries the graph if grad is enabled.
    """
    if any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    rows = [p + r for p, r in zip(prompts, responses, strict=True)]
    device = model_device(model)
    if packed:
        attend_within_rows(model)
        ids, inputs = pack_rows(rows, device)
    else:
        ids, attn = pad_right(rows, pad_id)
        ids, inputs = ids.to(device), {"attention_mask": attn.long().to(device)}
    width = max((len(r) for r in responses), default=0)
    mask = torch.zeros(len(rows), width, dtype=torch.bool)
    row_index, position = [], []
    start = 0  # where row i begins in the pass: 0 for padded rows, the rows before it for packed ones
    for i, (p, r) in enumerate(zip(prompts, responses, strict=True)):
        # token j of the response sits at position len(p) + j of its row, predicted from the position before
        row_index += [0 if packed else i] * len(r)
        position += range(start + len(p) - 1, start + len(p) - 1 + len(r))
        mask[i, : len(r)] = True
        start += len(p) + len(r) if packed else 0
    mask = mask.to(device)
    logp = response_token_logprobs(
        model,
        ids,
        torch.tensor(row_index, dtype=torch.long, device=device),
        torch.tensor(position, dtype=torch.long, device=device),
        temperature,
        logits_chunk_mib,
        **inputs,
    )
    out = torch.zeros(mask.shape, dtype=logp.dtype, device=device)
    return out.masked_scatter(mask, logp), mask
