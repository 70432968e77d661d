"""Per-GPU memory of a training cell, phase by phase, from the models' sizes and the config's budgets.

``graft plan`` prints it and refuses a config whose peak exceeds ``scale.gpu_memory_gb`` before anything is
submitted. The terms are counts of tensors times their sizes; the activation and log-prob terms' constants are
read off ``bench/memory.py``'s measurements on the CPU (float32, peak resident memory), where the plan and the
measurement are printed side by side. On a GPU the caching allocator adds fragmentation that no formula here
models, bf16 kernels halve the activations (the ``compute_bytes`` argument), and vLLM's engines take exactly their
configured share while awake.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from graft.config import ModelSizes, RunConfig
from graft.engine.logprobs import chunk_positions

GB = 1e9

SCORE_LOGIT_COPIES = 3.0
"""Float32 [chunk, vocabulary] tensors alive at once while a chunk is scored without gradient: the logits, the
logits / T and their log-softmax (bench/memory.py)."""
UPDATE_LOGIT_COPIES = 3.0
"""The same while a chunk's backward runs: the recomputed log-softmax, its gradient and the logits' gradient (the
recomputed logits are freed as the backward passes them; bench/memory.py measures 3.0 copies)."""


def read_sizes(path: Path) -> ModelSizes:
    """Sizes from a Hugging Face ``config.json`` file."""
    return sizes_from_config(json.loads(Path(path).read_text()))


def sizes_from_config(c: dict) -> ModelSizes:
    """Sizes from a Hugging Face model config as a dict (Llama, Qwen3, SmolLM3 and GPT-2 names)."""

    def get(*names, default=None):
        return next((c[n] for n in names if n in c), default)

    hidden = get("hidden_size", "n_embd")
    heads = get("num_attention_heads", "n_head")
    return ModelSizes(
        layers=get("num_hidden_layers", "n_layer"),
        hidden=hidden,
        intermediate=get("intermediate_size", "n_inner") or 4 * hidden,
        heads=heads,
        kv_heads=get("num_key_value_heads", default=heads),
        head_dim=get("head_dim", default=hidden // heads),
        vocab=get("vocab_size"),
        tied=bool(get("tie_word_embeddings", default=True)),
    )


def parameters(sizes: ModelSizes) -> int:
    """Parameter count: embeddings, attention (q, k, v, o), gated MLP (gate, up, down), norms."""
    return embedding_parameters(sizes) + sizes.layers * layer_parameters(sizes) + sizes.hidden


def embedding_parameters(sizes: ModelSizes) -> int:
    return sizes.vocab * sizes.hidden * (1 if sizes.tied else 2)


def layer_parameters(sizes: ModelSizes) -> int:
    h, q, kv = sizes.hidden, sizes.heads * sizes.head_dim, sizes.kv_heads * sizes.head_dim
    return h * (q + 2 * kv) + q * h + 3 * h * sizes.intermediate + 2 * h


def kept_activation_bytes(sizes: ModelSizes, tokens: int, grad: bool, compute_bytes: int) -> float:
    """What a forward pass over ``tokens`` padded tokens keeps until its end: the final hidden states, and with
    gradient checkpointing every layer's input, kept for the backward."""
    return float(tokens * sizes.hidden * compute_bytes * (sizes.layers + 1 if grad else 1))


def layer_working_bytes(sizes: ModelSizes, tokens: int, grad: bool, compute_bytes: int) -> float:
    """One layer's working set over ``tokens`` (memory-efficient attention, no [L, L] scores): without gradient
    its input and output, q/k/v and the attention output, the MLP's gate, up and product; in a checkpointed
    backward the recomputed layer with everything its backward needs and the gradients flowing through it."""
    h, i, q = sizes.hidden, sizes.intermediate, (sizes.heads + 2 * sizes.kv_heads) * sizes.head_dim
    per_token = 8 * h + 2 * q + 5 * i if grad else 3 * h + q + 3 * i
    return float(tokens * per_token * compute_bytes)


def logprob_bytes(sizes: ModelSizes, response_tokens: int, chunk_mib: float, grad: bool) -> float:
    """The log-prob chunk: a few float32 [chunk, vocabulary] tensors (fewer positions when the responses are
    shorter than a chunk), and the response positions' hidden states in float32."""
    positions = min(chunk_positions(sizes.vocab, chunk_mib), response_tokens)
    copies = UPDATE_LOGIT_COPIES if grad else SCORE_LOGIT_COPIES
    return float(copies * positions * sizes.vocab * 4 + response_tokens * sizes.hidden * 4 * (2 if grad else 1))


def forward_bytes(
    sizes: ModelSizes, tokens: int, response_tokens: int, chunk_mib: float, grad: bool, compute_bytes: int
) -> float:
    """Activations and log-probs of one forward pass (and its backward): what is kept throughout, plus the larger
    of a layer's working set and the log-prob chunk, which are never alive together (the layers are done when the
    output projection runs, and in the backward the chunks come first)."""
    return kept_activation_bytes(sizes, tokens, grad, compute_bytes) + max(
        layer_working_bytes(sizes, tokens, grad, compute_bytes), logprob_bytes(sizes, response_tokens, chunk_mib, grad)
    )


def pass_bytes(
    sizes: ModelSizes,
    tokens: int,
    response_tokens: int,
    chunk_mib: float,
    grad: bool,
    compute_bytes: int,
    processes: int = 1,
) -> float:
    """One forward pass (with ``grad``, and its backward) above the resident weights and optimizer state: the
    gathered output projection and one gathered layer in the compute dtype, with ``grad`` the projection's float32
    gradient before its reduce-scatter and the model's sharded float32 gradients, then activations and log-probs
    (``forward_bytes``)."""
    gathered = (embedding_parameters(sizes) + 2 * layer_parameters(sizes)) * compute_bytes
    if grad:
        gathered += embedding_parameters(sizes) * 4 + 4 * parameters(sizes) / processes
    return gathered + forward_bytes(sizes, tokens, response_tokens, chunk_mib, grad, compute_bytes)


@dataclass(frozen=True)
class Phase:
    name: str
    gb: float
    """Peak per GPU during the phase."""
    setting: str
    """The setting that lowers this phase's peak, named when it does not fit."""


def model_sizes(cfg: RunConfig, name: str) -> ModelSizes | None:
    """A model's sizes: its downloaded config.json, else ``models.<name>.sizes``, else unknown (None)."""
    spec = cfg.models[name]
    config_json = Path(spec.path) / "config.json"
    if config_json.is_file():
        return read_sizes(config_json)
    return spec.sizes


def shards_per_model(cfg: RunConfig, models: tuple[str, ...]) -> int:
    """How many processes hold a shard of each of the cell's models: all of the job's (colocated), its own group's
    (split, one group per model), and within one node only under hybrid sharding (replicated across nodes)."""
    scale = cfg.scale
    groups = len(models) if scale.placement == "split" and len(models) > 1 else 1
    size = scale.processes * scale.nodes // groups
    return min(size, scale.processes) if scale.sharding == "hybrid" else size


def cell_phases(cfg: RunConfig, models: tuple[str, ...]) -> list[Phase] | None:
    """Per-GPU peak of each phase of a step of a cell training ``models``; None when a model's sizes are unknown.

    Colocated, every GPU holds every model of the cell, each sharded over ``shards_per_model`` processes; split,
    a GPU holds one model, sharded over its own group, and the peak is that of the model whose GPUs need most.
    A GPU's resident state is its models' float32 parameters and AdamW's two moments, sharded (gradients, also
    sharded, only from the update's backward to its step). On top: rollout: one model's vLLM engine awake at its
    memory share (the others asleep, nothing held); scoring and update: the model's gathered output projection
    and one gathered layer in the compute dtype, the activations of one forward pass at
    ``train.micro_batch_tokens`` and the log-prob chunk; weight sync: the whole model gathered one tensor at a
    time (graft.engine.weight_sync), at most the largest tensor in float32."""
    sizes = {m: model_sizes(cfg, m) for m in models}
    if any(s is None for s in sizes.values()):
        return None
    p = shards_per_model(cfg, models)
    if cfg.scale.placement == "split" and len(models) > 1:
        alone = [_phases(cfg, {m: s}, p) for m, s in sizes.items()]
        return [max(phase, key=lambda ph: ph.gb) for phase in zip(*alone, strict=True)]
    return _phases(cfg, sizes, p)


def _phases(cfg: RunConfig, sizes: dict[str, ModelSizes], p: int) -> list[Phase]:
    """The phases of a GPU that holds ``sizes``' models, each sharded over ``p`` processes."""
    t, scale = cfg.train, cfg.scale
    compute = 2 if any(cfg.models[m].dtype == "bfloat16" for m in sizes) else 4
    resident = sum(12 * parameters(s) for s in sizes.values()) / p
    row = t.max_prompt_tokens + t.max_response_tokens
    tokens = t.micro_batch_tokens or t.micro_batch * row
    # a packed pass fills its tokens with whatever rows fit, so nearly all of them can be response positions
    response = tokens if t.packing else max(tokens // row, 1) * t.max_response_tokens

    def forward(s: ModelSizes, grad: bool) -> float:
        return pass_bytes(s, tokens, response, t.logits_chunk_mib, grad, compute, p)

    engine = scale.vllm_memory * scale.gpu_memory_gb * GB if scale.rollout == "vllm" else 0.0
    scoring = max(forward(s, grad=False) for s in sizes.values())
    update = max(forward(s, grad=True) for s in sizes.values())
    # the largest tensor, the [vocabulary, hidden] embedding, gathered in float32 and cast to the engine's dtype
    sync = max(s.vocab * s.hidden * (4 + compute) for s in sizes.values())
    return [
        Phase("rollout", (resident + engine) / GB, "scale.vllm_memory"),
        Phase("scoring", (resident + scoring) / GB, "train.micro_batch_tokens or train.logits_chunk_mib"),
        Phase("update", (resident + update) / GB, "train.micro_batch_tokens or train.logits_chunk_mib"),
        Phase("weight sync", (resident + sync) / GB, "scale.processes"),
    ]
