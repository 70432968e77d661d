"""A policy: a causal LM and its tokenizer from a local ``from_pretrained`` directory, with its prompt template,
and batched per-token log-probs of given responses."""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import torch

from graft.config import ModelSpec, RunConfig, TrainSpec
from graft.engine.logprobs import response_token_logprobs
from graft.engine.packing import attend_within_rows, pack_rows
from graft.engine.prompts import Chat, PromptFormat, prompt_format
from graft.errors import ConfigError
from graft.paths import check_input

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

    def prompt_text(self, problem: str | Chat) -> str:
        """The prompt string for a problem (its text or a chat prompt, ``graft.data.problems.Problem.problem``); the
        same text is used when re-tokenizing a peer's response."""
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
MODEL_TYPES = ("llama", "qwen2", "qwen3", "smollm3", "gpt2")
"""The causal-LM families (config.json's ``model_type``) whose decoder blocks, embedding names and sizes graft reads
(graft.engine.distributed.decoder_layers, graft.engine.weight_sync, graft.planning.memory.sizes_from_config):
Llama (SmolLM2, OctoThinker), Qwen2 (Qwen2.5), Qwen3, SmolLM3 and GPT-2."""
SAFETENSORS_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
"""The float dtypes of safetensors headers, loaded as stored so that checking a directory reads no weights."""
NAMED = 3
"""How many of a directory's missing or mismatched weights a refusal names."""


def check_model_dir(path: str | Path, what: str, config: RunConfig | None = None, name: str | None = None) -> Path:
    """Refuse, in one line naming it and before any compute, a model directory graft cannot train or sample from.

    Its files first, before transformers reads them (``_check_files``: a download that stopped half-way, an
    architecture graft does not handle), then what transformers makes of them (``_check_loaded``). ``config`` and
    ``name``: the run's config and the model's name in it, whose prompt format and sequence lengths the directory
    must serve; without them (a download checked before any config names it) those two are not checked.
    """
    path = Path(path)
    dtype = _check_files(path, what)
    _check_loaded(path, what, dtype, config, name)
    return path


def _check_files(path: Path, what: str) -> torch.dtype | None:
    """Refuse a directory that is not a whole safetensors ``from_pretrained`` model of a family graft handles:
    config.json naming one of ``MODEL_TYPES``, the tokenizer's files, and the weights, every shard that the index
    names, each as long as its header says and none empty. Returns the dtype most of the weights are stored in."""
    check_input(what, path, "directory")
    if not (path / "config.json").is_file():
        raise ConfigError(f"{what}: {str(path)!r} is not a model directory: it lacks config.json")

    def lacks(name: str, why: str) -> ConfigError:
        return ConfigError(f"{what}: {str(path)!r} is not a complete model directory: it lacks {name} ({why})")

    if not (path / "tokenizer_config.json").is_file():
        raise lacks("tokenizer_config.json", "the tokenizer's settings and chat template")
    if not any(all((path / name).is_file() for name in names) for names in TOKENIZER_VOCABULARIES):
        raise lacks("tokenizer.json", "the tokenizer's vocabulary; or tokenizer.model, vocab.json with merges.txt")
    parsed = {name: read_json_object(path / name, what) for name in JSON_FILES if (path / name).is_file()}
    model_type = parsed["config.json"].get("model_type")
    if model_type not in MODEL_TYPES:
        raise ConfigError(
            f"{what}: {str(path)!r} holds a model of type {model_type!r} (config.json's model_type); graft trains "
            f"the causal LMs {', '.join(MODEL_TYPES)}"
        )
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
    dtypes: Counter[str] = Counter()
    for shard in shards:
        header = _safetensors_header(path / shard, what)
        if not header:
            raise ConfigError(f"{what}: {str(path / shard)!r} holds no tensors; a model's weights are expected")
        dtypes.update(tensor.get("dtype") for tensor in header.values())
    return SAFETENSORS_DTYPES.get(dtypes.most_common(1)[0][0])


def _check_loaded(path: Path, what: str, dtype: torch.dtype | None, config: RunConfig | None, name: str | None) -> None:
    """Load the directory as training would, with the weights left where they lie (their stored dtype, mapped
    from the files, so nothing is read or converted), and refuse it where transformers' loading report lacks a
    weight (tied ones are not reported) or found one of another shape, where the tokenizer has more tokens than
    the embedding has rows, where no token ends a response (the rollout stops at it and pads with it where the
    tokenizer has no pad token), and, with ``config``, where the prompt format does not apply or prompt plus
    response exceeds the model's positions."""
    tokenizer, model, report = _load_unread(path, what, dtype)
    where = repr(str(path))
    # a renamed weight is missing under its name and unexpected under the other: naming both shows the rename
    missing, unexpected = sorted(report["missing_keys"]), sorted(report["unexpected_keys"])
    if missing:
        extra = f"; it holds {len(unexpected)} it does not use ({_few(unexpected)})" if unexpected else ""
        raise ConfigError(
            f"{what}: {where} lacks {len(missing)} of the weights of its {type(model).__name__} ({_few(missing)})"
            f"{extra}: every weight must be in its safetensors files under transformers' names"
        )
    if report["mismatched_keys"]:
        shapes = [
            f"{key} {list(found)} where the model has {list(wanted)}"
            for key, found, wanted in sorted(report["mismatched_keys"])
        ]
        raise ConfigError(
            f"{what}: {where} holds weights of other shapes than its config.json gives ({_few(shapes)}): its "
            "config and its weights must be of one model"
        )
    rows = model.get_input_embeddings().weight.shape[0]
    if len(tokenizer) > rows:
        raise ConfigError(
            f"{what}: {where}'s tokenizer has {len(tokenizer):,} tokens but its embedding {rows:,} rows; a "
            "tokenizer within the model's vocabulary (vocab_size) is expected"
        )
    fmt = PromptFormat()
    if config is not None and name is not None:
        fmt = prompt_format(config.models[name])
        fmt.check(name, tokenizer, str(path))
    stops = fmt.stop_token_ids(tokenizer, model.generation_config.eos_token_id)
    if not stops:
        raise ConfigError(
            f"{what}: {where} names no end-of-sequence token (its tokenizer's eos_token, the eos_token_id of "
            "generation_config.json or config.json); one is needed to end and pad responses"
        )
    pad = tokenizer.pad_token_id
    beyond = [token for token in [*stops, pad] if token is not None and not 0 <= token < rows]
    if beyond:
        raise ConfigError(
            f"{what}: {where}'s end-of-sequence or pad token {beyond[0]} is beyond its embedding's {rows:,} rows; "
            "special tokens within the model's vocabulary are expected"
        )
    positions = getattr(model.config, "max_position_embeddings", None)
    if config is not None and positions is not None:
        t = config.train
        # training samples prompt plus response; an evaluation may generate longer responses after the same prompt
        longest = t.max_prompt_tokens + max(t.max_response_tokens, config.eval_response_tokens())
        if longest > positions:
            raise ConfigError(
                f"{what}: {where} has {positions:,} positions (config.json's max_position_embeddings or "
                f"n_positions), fewer than the {longest:,} tokens of a prompt and its response (train."
                "max_prompt_tokens plus the longer of train.max_response_tokens and eval.max_response_tokens); "
                f"lower these to {positions:,} in all, or use a model with more positions"
            )


def _load_unread(path: Path, what: str, dtype: torch.dtype | None) -> tuple[object, torch.nn.Module, dict]:
    """The tokenizer, the model and transformers' loading report of a directory whose files are checked, its
    weights mapped from the files but not read. transformers' own report stays unprinted: ``_check_loaded``
    refuses in one line what it would warn of in many."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
        # a weight of another shape is reported rather than raised, so that it is refused in one line
        model, report = AutoModelForCausalLM.from_pretrained(
            path,
            dtype=dtype or "auto",
            use_safetensors=True,
            trust_remote_code=False,
            output_loading_info=True,
            ignore_mismatched_sizes=True,
        )
    except Exception as err:  # transformers raises errors of many types on files it cannot make sense of
        line = " ".join(str(err).split())
        raise ConfigError(f"{what}: transformers cannot load {str(path)!r}: {type(err).__name__}: {line}") from None
    finally:
        hf_logging.set_verbosity(verbosity)
    return tokenizer, model, report


def _few(names: list[str]) -> str:
    """The first ``NAMED`` of ``names``, and how many more."""
    more = f" and {len(names) - NAMED} more" if len(names) > NAMED else ""
    return ", ".join(names[:NAMED]) + more


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


def _safetensors_header(path: Path, what: str) -> dict[str, dict]:
    """A safetensors file's tensors (name to dtype, shape and data offsets), refused in one line where the file's
    length is wrong: it holds 8 bytes of header length, the JSON header, then the tensors' data up to the largest
    end offset the header gives."""

    def damaged(problem: str) -> ConfigError:
        return ConfigError(f"{what}: {str(path)!r} {problem}: a partial download or copy")

    size = path.stat().st_size
    with path.open("rb") as f:
        length = int.from_bytes(f.read(8), "little")
        try:
            header = json.loads(f.read(length)) if 0 < length <= size - 8 else None
        except ValueError:
            header = None
    if not isinstance(header, dict):
        raise damaged("has no readable safetensors header")
    header.pop("__metadata__", None)
    try:
        ends = [int(t["data_offsets"][1]) for t in header.values()]
    except (KeyError, IndexError, TypeError, ValueError):
        raise damaged("has a safetensors header without its tensors' data offsets") from None
    expected = 8 + length + max(ends, default=0)
    if size != expected:
        raise damaged(f"is {size:,} bytes where its header says {expected:,}")
    return header


def load_policy(name: str, spec: ModelSpec, path: str | Path | None = None, dtype: str | None = None) -> Policy:
    """Load model and tokenizer with the same code for a built toy model and for SmolLM3 or Qwen3, from a directory
    the command checked before any compute (``check_model_dir``).

    Weights come from safetensors only and ``trust_remote_code`` stays off. ``dtype`` overrides the spec's
    parameter dtype (sharded training keeps float32 masters).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    where = Path(path or spec.path)
    tokenizer = AutoTokenizer.from_pretrained(where, trust_remote_code=False)
    model = AutoModelForCausalLM.from_pretrained(
        where, dtype=DTYPES[dtype or spec.dtype], use_safetensors=True, trust_remote_code=False
    )
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    fmt = prompt_format(spec)
    fmt.check(name, tokenizer, str(where))
    return Policy(name, model, tokenizer, fmt)


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
