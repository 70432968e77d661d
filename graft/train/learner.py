"""A learner: one model of a run with its optimizer, sampler and reference model, and the processes it lives on."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass

import torch

from graft.config import RunConfig
from graft.engine.distributed import SINGLE, World, enable_gradient_checkpointing, shard_model
from graft.engine.policy import DTYPES, Policy, load_policy
from graft.engine.rollout import HFRollout, RolloutBackend
from graft.engine.weight_sync import WeightStream, gather_to_main
from graft.methods import Method


@dataclass
class Learner:
    name: str
    policy: Policy
    optimizer: torch.optim.Optimizer
    rollout: RolloutBackend
    ref_model: torch.nn.Module | None = None
    world: World = SINGLE
    """The processes this model is sharded over (all of the job's, or its group's under the split placement)."""
    separate_rollout: bool = False
    """The rollout backend samples from its own copy of the weights, refreshed before each rollout that follows an
    update (``refresh_rollout``)."""
    recompute_old_logprobs: bool = False
    """Own responses' old log-probs come from a training forward pass, not the rollout engine
    (``train.old_logprobs``)."""
    engine: object | None = None
    """The DeepSpeed engine around ``policy.model`` (``scale.engine: deepspeed``); it steps the optimizer."""

    @property
    def stepper(self):
        """What ``minibatch_update`` steps: the DeepSpeed engine, or the torch optimizer."""
        return self.engine if self.engine is not None else self.optimizer

    rollout_stale: bool = False
    """The model was updated since the rollout backend's copy was last synced."""

    def sync_rollout(self) -> None:
        """The trained weights into the rollout backend's own copy, one tensor at a time (collective)."""
        self.rollout.sync_from(self._weights(), self.world)
        self.rollout_stale = False

    def refresh_rollout(self) -> None:
        """Sync just before a rollout, not after the update: between them a colocated peer updates and samples, and
        an engine woken for its weights would hold them (a 3B model's 6 GB) on every GPU all that time. A run's last
        update is never synced."""
        if self.rollout_stale:
            self.sync_rollout()

    def main_weights(self) -> dict[str, torch.Tensor]:
        """The whole model on its first process's CPU, empty elsewhere, gathered one tensor at a time (collective)."""
        return gather_to_main(self._weights(), self.world)

    def _weights(self) -> WeightStream:
        return WeightStream(self.engine.module if self.engine is not None else self.policy.model)


def rollout_backend(name: str, cfg: RunConfig, policy: Policy, world: World) -> tuple[RolloutBackend, bool]:
    """The sampling backend and whether it holds its own weights. One process with the Hugging Face backend
    samples from the trained model itself; a sharded model is sampled from an unsharded copy or by vLLM."""
    t, scale = cfg.train, cfg.scale
    if scale.rollout == "vllm":
        from graft.engine.vllm import VLLMRollout
        from graft.engine.weight_sync import WeightStream, sync_bytes, sync_directory

        # where the weight sync writes, decided before any compute
        sync_dir = sync_directory(
            sync_bytes(WeightStream(policy.model), DTYPES[cfg.models[name].dtype]), scale.sync_dir
        )

        engine = VLLMRollout(
            cfg.models[name].path,
            cfg.models[name].dtype,
            t.max_response_tokens,
            t.max_prompt_tokens + t.max_response_tokens,
            t.temperature,
            t.top_p,
            gpu_memory_utilization=scale.vllm_memory,
            colocated=True,
            device_index=world.device.index,
            max_num_seqs=scale.vllm_max_num_seqs,
            cpu_kv_cache_mib=scale.vllm_cpu_kv_cache_mib,
            stop_token_ids=policy.stop_token_ids,
            sync_dir=sync_dir,
        )
        return engine, True
    per_prompt = t.rollout_seeds == "prompt"
    if world.distributed:
        sampler = copy.deepcopy(policy.model).requires_grad_(False).eval().to(world.device)
        copy_policy = dataclasses.replace(policy, model=sampler)
        return HFRollout(copy_policy, t.max_response_tokens, t.temperature, t.top_p, t.rollout_batch, per_prompt), True
    return HFRollout(policy, t.max_response_tokens, t.temperature, t.top_p, t.rollout_batch, per_prompt), False


def compute_in(model: torch.nn.Module, dtype: torch.dtype) -> None:
    """Mixed precision on one process: the float32 master weights stay, each forward runs under autocast in
    ``dtype`` (what the sharded path gets from FSDP2's ``MixedPrecisionPolicy``, and Hugging Face's trainers from
    accelerate on one GPU). An optimizer step on bfloat16 weights at the paper's learning rate rounds most updates
    away."""
    if dtype == torch.float32:
        return
    device_type = next(model.parameters()).device.type
    model.forward = torch.autocast(device_type=device_type, dtype=dtype)(model.forward)


def make_learner(name: str, cfg: RunConfig, method: Method, world: World = SINGLE) -> Learner:
    """The model with float32 master weights on every run, computing in the configured dtype; built in the order
    graft.planning.memory plans a GPU for: the model is loaded on the CPU, the rollout engine starts (vLLM takes its
    share of the GPU's free memory when it starts, and refuses to start when less is free) and goes to sleep, and only
    then does the model reach the GPU, sharded there piece by piece (FSDP2 moves each shard to its device), or whole
    on one process."""
    spec = cfg.models[name]
    compute = DTYPES[spec.dtype]
    policy = load_policy(name, spec, dtype="float32")
    policy.model.eval()  # no dropout in RL updates: the ratio's denominator is the same network
    if cfg.scale.gradient_checkpointing:
        enable_gradient_checkpointing(policy.model)
    rollout, separate = rollout_backend(name, cfg, policy, world)
    ref = None
    if method.kl_coef > 0:
        ref = copy.deepcopy(policy.model).requires_grad_(False)
    deepspeed = world.distributed and cfg.scale.engine == "deepspeed"
    if world.distributed and not deepspeed:
        for module in (policy.model, ref):
            if module is not None:
                shard_model(module, world, compute)
    else:
        for module in (policy.model, ref):
            if module is not None:
                module.to(world.device)
                if not world.distributed:
                    compute_in(module, compute)
    t = cfg.train
    optimizer = torch.optim.AdamW(
        policy.model.parameters(), lr=spec.lr or t.lr, betas=(t.beta1, t.beta2), weight_decay=t.weight_decay
    )
    engine = None
    if deepspeed:  # the reference model (HACPO's KL) stays whole on every process: it is frozen
        from graft.engine import deepspeed_engine

        config = deepspeed_engine.engine_config(t.grad_clip, cfg.scale.zero_stage, compute)
        engine = deepspeed_engine.wrap(policy.model, optimizer, config)
    recompute = t.old_logprobs == "recompute" or (t.old_logprobs == "auto" and separate)
    return Learner(name, policy, optimizer, rollout, ref, world, separate, recompute, engine)
