"""Per-GPU memory of a training cell, phase by phase, and each vLLM engine's KV cache, from the models' sizes and
the config's budgets.

``graft plan`` prints it for GPU jobs and refuses a config whose peak exceeds the GPU's memory before anything is
submitted. Every figure is in GB of 1e9 bytes, as that memory is (``RunConfig.gpu``: the GPU type's, or
``scale.gpu_memory_gb``): what CUDA reports for the GPU (``torch.cuda.get_device_properties(i).total_memory``:
150.75 GB for an H200, the 140.4 GiB behind its datasheet's 141), of which vLLM takes ``gpu_memory_utilization``
(``scale.vllm_memory``) for an engine.

The plan is meant as an upper bound: it counts what a GPU holds through a whole step (model states with
the gradients, held from an update's optimizer step until the model's next minibatch zeroes them, through the
rollouts and the other model's update; a reference model; one CUDA context per process; NCCL's buffers; each
sleeping engine's CUDA graphs) and adds each phase's own peak. The terms are counts of tensors times their sizes;
the activation and log-prob terms' constants are read off ``bench/benchmarks/memory.py``'s measurements on the CPU
(float32, peak resident memory), where the plan and the measurement are printed side by side, and the scoring and
update peaks it predicts bounded those ``bench/checks/gpu_check.py`` measured on an H200
(``bench/results/gpu_check.json``); the constants below that neither measured (contexts, NCCL, CUDA graphs, vLLM's
sampler) are estimates with their sources. The caching allocator's fragmentation is not modelled; bf16 kernels
halve the activations (the ``compute_bytes`` argument).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from graft.config import ModelSizes, RunConfig, model_groups
from graft.engine.chunks import chunk_positions

GB = 1e9
"""The plan's unit, that of a GPU's memory (``RunConfig.gpu``): every figure ``graft plan`` prints is in GB of 1e9
bytes."""

DTYPE_BYTES = {"float32": 4, "bfloat16": 2}
"""Bytes of one element in each ``models.<m>.dtype``: the engine's weights and KV cache, a checkpoint's weights."""

CUDA_CONTEXT_BYTES = 0.65e9
"""One process's CUDA context (driver state and the kernels it loaded; lazy module loading): about 400 MiB for
PyTorch's (pytorch#109888), 616 MiB measured for a process that pins host memory (LMCache#4019). Every training
process has one and so has each of its vLLM engines' core processes."""
NCCL_COMMUNICATOR_BYTES = 1.1e9
"""GPU buffers of one NCCL communicator that a process has joined: 544-688 MB per process group on 4 x A100
(nccl#964), and on NVSwitch nodes NVLS binds 1 GiB more (nccl-tests#216's log); more channels take more."""
CUDA_GRAPH_BYTES = 1.75e9
"""A vLLM engine's CUDA graphs at the default capture sizes (51 piecewise graphs up to 512 tokens, 35 full
graphs up to 256): vLLM's CUDA-graph profiler estimated 1.62 GiB for graphs at those sizes (vllm#39559's log, a
Qwen 3.5 model). Sleep frees only the weights and the KV cache (the two pools of its ``CuMemAllocator``), so a
sleeping engine keeps its graphs."""
ENGINE_NON_TORCH_BYTES = 0.16e9
"""What an engine allocates outside torch within its share, with one GPU and no NCCL of its own (cuBLAS
workspaces, attention buffers): 0.15 GiB in vLLM's profiling logs (vllm#17117)."""
SAMPLER_BYTES_PER_LOGIT = 24
"""vLLM's profiling run samples one position per sequence with top-p and top-k on (``_dummy_sampler_run``): the
float32 logits, their softmax, the sorted logits with int64 indices and the cumulative sum, about 24 bytes per
logit at its peak (an estimate)."""
VLLM_BATCHED_TOKENS = 16384
"""vLLM 0.33's ``max_num_batched_tokens`` for the ``LLM`` class on GPUs of 70 GiB or more (an H100 or H200): the
tokens of its profiling forward pass."""
VLLM_MAX_NUM_SEQS = 1024
"""vLLM 0.33's ``max_num_seqs`` on the same GPUs: the sequences an engine runs at once without
``scale.vllm_max_num_seqs``."""
PASS_SLACK_BYTES = 0.3e9
"""What a forward pass takes beyond the tensors ``forward_bytes`` counts (allocator slack, the attention's
temporaries): bench/benchmarks/memory.py measured 0.13-0.26 GiB above the formula at the paper's shapes on the CPU
(bench/results/memory.json), whatever the model; ``pass_bytes`` adds this bound to every pass."""
KV_BLOCK_TOKENS = 16
"""Tokens of one KV-cache block on GPUs: the cache holds whole blocks, and prefix caching shares full ones."""

SCORE_LOGIT_COPIES = 3.0
"""Float32 [chunk, vocabulary] tensors alive at once while a chunk is scored without gradient: the logits, the
logits / T and their log-softmax (bench/benchmarks/memory.py)."""
UPDATE_LOGIT_COPIES = 3.0
"""The same while a chunk's backward runs: the recomputed log-softmax, its gradient and the logits' gradient (the
recomputed logits are freed as the backward passes them; bench/benchmarks/memory.py measures 3.0 copies)."""


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
    sizes: ModelSizes, tokens: int, response_tokens: int, chunk_mib: float, grad: bool, compute_bytes: int
) -> float:
    """One forward pass (with ``grad``, and its backward) above what the GPU holds throughout (``held``): the
    gathered output projection and one gathered layer in the compute dtype, with ``grad`` the projection's float32
    gradient before its reduce-scatter, then activations and log-probs (``forward_bytes``) and what the formula
    leaves out (``PASS_SLACK_BYTES``). The model's sharded gradients are not counted here: they are held from the
    first update on."""
    gathered = (embedding_parameters(sizes) + 2 * layer_parameters(sizes)) * compute_bytes
    if grad:
        gathered += embedding_parameters(sizes) * 4
    return gathered + forward_bytes(sizes, tokens, response_tokens, chunk_mib, grad, compute_bytes) + PASS_SLACK_BYTES


def fsdp_state_bytes(sizes: ModelSizes, shards: int) -> float:
    """A model's state per GPU under FSDP2 (or whole on one process): float32 parameters, AdamW's two moments and
    float32 gradients, 16 bytes a parameter, sharded over ``shards`` processes."""
    return 16 * parameters(sizes) / shards


def largest_layer_parameters(sizes: ModelSizes) -> int:
    """The largest single module: the [vocabulary, hidden] embedding, or a decoder layer where that is larger."""
    return max(sizes.vocab * sizes.hidden, layer_parameters(sizes))


def zero_state_bytes(sizes: ModelSizes, stage: int, gpus: int) -> float:
    """A model's state per GPU under DeepSpeed ZeRO at ``stage`` over ``gpus`` processes, as DeepSpeed's own
    estimators give it without offload (``estimate_zero2_model_states_mem_needs``,
    ``estimate_zero3_model_states_mem_needs``; tests/unit/planning/test_memory.py calls them): 18 bytes a parameter over
    the GPUs (float32 masters, AdamW's two moments, 16- and 32-bit gradients), and the 16-bit parameters whole at
    stage 2 or, at stage 3, the largest layer gathered in float32."""
    p = parameters(sizes)
    whole = 2 * p if stage == 2 else 4 * largest_layer_parameters(sizes)
    return whole + 18 * p / gpus


def gradient_bytes(cfg: RunConfig, sizes: ModelSizes, shards: int) -> float:
    """The gradients' part of a model's state per GPU: float32 under FSDP2, 16- and 32-bit under DeepSpeed."""
    return (6 if cfg.scale.engine == "deepspeed" and shards > 1 else 4) * parameters(sizes) / shards


def model_state_bytes(cfg: RunConfig, sizes: ModelSizes, shards: int) -> float:
    """A model's state per GPU under the configured engine (DeepSpeed only shards: one process trains whole)."""
    if cfg.scale.engine == "deepspeed" and shards > 1:
        return zero_state_bytes(sizes, cfg.scale.zero_stage, shards)
    return fsdp_state_bytes(sizes, shards)


def reference_bytes(cfg: RunConfig, sizes: ModelSizes, shards: int) -> float:
    """A frozen float32 reference model (a method with a KL term): sharded like the model under FSDP2, whole on
    every process under DeepSpeed (graft.train.learner)."""
    whole = cfg.scale.engine == "deepspeed" and shards > 1
    return 4 * parameters(sizes) / (1 if whole else shards)


def kv_bytes_per_token(sizes: ModelSizes, dtype_bytes: int) -> int:
    """KV cache of one token: a key and a value per layer and KV head."""
    return 2 * sizes.layers * sizes.kv_heads * sizes.head_dim * dtype_bytes


def engine_profile_bytes(sizes: ModelSizes, dtype_bytes: int, sequences: int) -> float:
    """The peak of vLLM's profiling run, which it keeps out of the KV cache: a forward pass over
    ``VLLM_BATCHED_TOKENS`` tokens (the final hidden states and one layer's working set, as in a scoring pass),
    then the sampler over one position of each of ``sequences`` (the engine's ``max_num_seqs``)."""
    forward = kept_activation_bytes(sizes, VLLM_BATCHED_TOKENS, False, dtype_bytes) + layer_working_bytes(
        sizes, VLLM_BATCHED_TOKENS, False, dtype_bytes
    )
    return max(forward, float(sequences * sizes.vocab * SAMPLER_BYTES_PER_LOGIT))


def kv_cache_tokens(share_bytes: float, sizes: ModelSizes, dtype_bytes: int, sequences: int) -> int:
    """The KV-cache tokens an engine keeps in ``share_bytes`` (``gpu_memory_utilization`` times the GPU's total),
    sized as vLLM sizes it (``determine_available_memory``): the share less its weights, its profiling peak, its
    CUDA graphs and its other allocations, in whole blocks."""
    free = share_bytes - parameters(sizes) * dtype_bytes - engine_profile_bytes(sizes, dtype_bytes, sequences)
    free -= CUDA_GRAPH_BYTES + ENGINE_NON_TORCH_BYTES
    blocks = int(free // (kv_bytes_per_token(sizes, dtype_bytes) * KV_BLOCK_TOKENS))
    return max(blocks, 0) * KV_BLOCK_TOKENS


def rollout_kv_tokens(prompts: int, sequences: int, prompt_tokens: int, response_tokens: int) -> int:
    """KV-cache tokens a rollout holds when ``sequences`` run at once from ``prompts`` prompts: each sequence's
    response and two partial blocks (its prompt's last and its own last), each prompt once (prefix caching shares
    a prompt's full blocks among its samples; at most one prompt per running sequence)."""
    return min(prompts, sequences) * prompt_tokens + sequences * (response_tokens + 2 * KV_BLOCK_TOKENS)


@dataclass(frozen=True)
class Phase:
    name: str
    gb: float
    """Peak per GPU during the phase."""
    setting: str
    """The setting that lowers this phase's peak, named when it does not fit."""


@dataclass(frozen=True)
class Held:
    """What a GPU holds through every phase of a step, in bytes."""

    model_states: float
    """Each model's shard of parameters, optimizer state and gradients (``model_state_bytes``)."""
    gradients: float
    """The gradients' part of ``model_states``."""
    reference: float
    """Frozen reference models, where a method of the cell has a KL term."""
    contexts: float
    """One CUDA context for the training process and one for each of its vLLM engines."""
    nccl: float
    """NCCL's buffers, per communicator the training process joins (``nccl_communicators``)."""
    engines_asleep: float
    """Each vLLM engine's CUDA graphs, which sleep keeps."""

    @property
    def total(self) -> float:
        return self.model_states + self.reference + self.contexts + self.nccl + self.engines_asleep


def model_sizes(cfg: RunConfig, name: str) -> ModelSizes | None:
    """A model's sizes: its downloaded config.json, else ``models.<name>.sizes``, else unknown (None)."""
    spec = cfg.models[name]
    config_json = Path(spec.path) / "config.json"
    if config_json.is_file():
        return read_sizes(config_json)
    return spec.sizes


def group_processes(cfg: RunConfig, models: tuple[str, ...]) -> int:
    """How many processes hold each of the cell's models and share its prompts: all of the job's (colocated), or
    its own group's (split, one group per model)."""
    scale = cfg.scale
    return scale.processes * scale.nodes // model_groups(scale.placement, len(models))


def shards_per_model(cfg: RunConfig, models: tuple[str, ...]) -> int:
    """How many processes hold a shard of each of the cell's models: its group's (``group_processes``), and within
    one node only under hybrid sharding (replicated across nodes)."""
    size = group_processes(cfg, models)
    return min(size, cfg.scale.processes) if cfg.scale.sharding == "hybrid" else size


def nccl_communicators(cfg: RunConfig, models: tuple[str, ...]) -> int:
    """NCCL communicators a training process of the cell joins: the job's group; under the split placement its
    model's group and the mesh dimension FSDP2 shards over; under hybrid sharding across nodes the mesh's two
    dimensions; DeepSpeed's clone of the job's group. None (0) with one process."""
    scale = cfg.scale
    if scale.processes * scale.nodes == 1:
        return 0
    split = model_groups(scale.placement, len(models)) > 1
    hybrid = scale.sharding == "hybrid" and group_processes(cfg, models) > scale.processes
    return 1 + split + (2 if hybrid else int(split)) + (scale.engine == "deepspeed")


def cell_held(cfg: RunConfig, models: tuple[str, ...], reference: bool = False) -> Held | None:
    """What each GPU of a cell training ``models`` holds throughout (``reference``: a frozen reference model per
    model); split, that of the model whose GPUs hold most; None when a model's sizes are unknown."""
    sizes = {m: model_sizes(cfg, m) for m in models}
    if any(s is None for s in sizes.values()):
        return None
    p = shards_per_model(cfg, models)
    if model_groups(cfg.scale.placement, len(models)) > 1:
        return max((_held(cfg, {m: s}, p, reference, models) for m, s in sizes.items()), key=lambda h: h.total)
    return _held(cfg, sizes, p, reference, models)


def _held(cfg: RunConfig, sizes: dict[str, ModelSizes], p: int, reference: bool, models: tuple[str, ...]) -> Held:
    """What a GPU holding ``sizes``' models, each sharded over ``p`` processes, holds throughout."""
    engines = len(sizes) if cfg.scale.rollout == "vllm" else 0
    return Held(
        model_states=sum(model_state_bytes(cfg, s, p) for s in sizes.values()),
        gradients=sum(gradient_bytes(cfg, s, p) for s in sizes.values()),
        reference=sum(reference_bytes(cfg, s, p) for s in sizes.values()) if reference else 0.0,
        contexts=(1 + engines) * CUDA_CONTEXT_BYTES,
        nccl=nccl_communicators(cfg, models) * NCCL_COMMUNICATOR_BYTES,
        engines_asleep=engines * CUDA_GRAPH_BYTES,
    )


def engine_share_bytes(cfg: RunConfig) -> float:
    """An awake engine's share as vLLM takes it: ``gpu_memory_utilization`` times the GPU's total memory (a config
    of GPU jobs: ``RunConfig.gpu``)."""
    return cfg.scale.vllm_memory * cfg.gpu().memory_gb * GB


def cell_phases(cfg: RunConfig, models: tuple[str, ...], reference: bool = False) -> list[Phase] | None:
    """Per-GPU peak of each phase of a step of a cell training ``models``; None when a model's sizes are unknown.

    Colocated, every GPU holds every model of the cell, each sharded over ``shards_per_model`` processes; split,
    a GPU holds one model, sharded over its own group, and the peak is that of the model whose GPUs need most.
    Each phase is what the GPU holds throughout (``cell_held``) and the phase's own peak: rollout: one model's vLLM
    engine awake at its share (its CUDA graphs within it), the others asleep (each engine syncs just before its
    own rollout and sleeps at level 2 after it, so none holds weights while another samples); scoring and update:
    the model's gathered output projection and one gathered layer in the compute dtype, the activations of one
    forward pass at ``train.micro_batch_tokens`` and the log-prob chunk (``pass_bytes``); weight sync: the largest
    tensor's shard cast to the engine's dtype and the tensor gathered in it, then the engine's weights awake in its
    dtype (graft.engine.weight_sync)."""
    sizes = {m: model_sizes(cfg, m) for m in models}
    if any(s is None for s in sizes.values()):
        return None
    p = shards_per_model(cfg, models)
    if model_groups(cfg.scale.placement, len(models)) > 1:
        alone = [_phases(cfg, {m: s}, p, reference, models) for m, s in sizes.items()]
        return [max(phase, key=lambda ph: ph.gb) for phase in zip(*alone, strict=True)]
    return _phases(cfg, sizes, p, reference, models)


def _phases(
    cfg: RunConfig, sizes: dict[str, ModelSizes], p: int, reference: bool, models: tuple[str, ...]
) -> list[Phase]:
    """The phases of a GPU that holds ``sizes``' models, each sharded over ``p`` processes."""
    t, scale = cfg.train, cfg.scale
    compute = 2 if any(cfg.models[m].dtype == "bfloat16" for m in sizes) else 4
    held = _held(cfg, sizes, p, reference, models).total
    row = t.max_prompt_tokens + t.max_response_tokens
    tokens = t.micro_batch_tokens or t.micro_batch * row
    # a packed pass fills its tokens with whatever rows fit, so nearly all of them can be response positions
    response = tokens if t.packing else max(tokens // row, 1) * t.max_response_tokens

    def forward(s: ModelSizes, grad: bool) -> float:
        return pass_bytes(s, tokens, response, t.logits_chunk_mib, grad, compute)

    vllm = scale.rollout == "vllm"
    engine = engine_share_bytes(cfg) - CUDA_GRAPH_BYTES if vllm else 0.0
    scoring = max(forward(s, grad=False) for s in sizes.values())
    update = max(forward(s, grad=True) for s in sizes.values())
    # the largest tensor, the [vocabulary, hidden] embedding: this process's shard cast to the engine's dtype, then
    # gathered in it (graft.engine.weight_sync.travelling); then the engine's weights, woken for the load and kept
    # into its rollout
    sync = max(
        s.vocab * s.hidden * DTYPE_BYTES[cfg.models[m].dtype] * (1 + 1 / p)
        + (parameters(s) * DTYPE_BYTES[cfg.models[m].dtype] if vllm else 0)
        for m, s in sizes.items()
    )
    return [
        Phase("rollout", (held + engine) / GB, "scale.vllm_memory"),
        Phase("scoring", (held + scoring) / GB, "train.micro_batch_tokens or train.logits_chunk_mib"),
        Phase("update", (held + update) / GB, "train.micro_batch_tokens or train.logits_chunk_mib"),
        Phase("weight sync", (held + sync) / GB, "scale.processes"),
    ]
