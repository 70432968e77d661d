"""The scale path on a GPU node, asking what matters first (nothing can be downloaded there: random weights).

1. Memory at the paper's shapes: the peak of scoring 16 rows of 2,048 + 4,096 tokens and of one update
   micro-batch of 36,864 tokens (gradient checkpointing, FSDP2 with bf16 compute, rows packed as the paper's
   runs pack them) on the SmolLM3-3B and Qwen3-1.7B architectures, beside graft.planning.memory's prediction of the same
   terms, with each pass's tokens per second (what graft plan's step time reads); for every phase the driver's
   view (``mem_get_info``: every process on the GPU, the engines' included) and the caching allocator's reserve.
2. graft's own collectives (sums, gathers, barriers) in the job's process groups, under NCCL where the job has two
   or more processes (said so where it has one).
3. One process, the way a one-GPU run trains: float32 master weights under bf16 autocast, one update at the
   paper's learning rate, which must change most weights (on bf16 weights it rounds most changes away). Then
   ``train.packing``: rows of unequal lengths as one packed sequence (torch's variable-length flash attention in
   bf16) against the same rows padded, each against a float32 pass: log-probs, gradient norm and seconds of each.
4. Two engines at the configured memory share and sequences at once (``scale.vllm_memory`` and
   ``scale.vllm_max_num_seqs`` of config/paper.yaml), asleep from the start, each waking after a training peak:
   GPU memory in use at each point, the KV cache each engine reports (graft plan's estimate beside it).
5. The weight sync's files alone (written and read back onto the GPU: its bandwidth), then with the engines: its
   seconds (graft.engine.weight_sync: each shard cast to bf16 before its gather, copied through pinned buckets into
   the node's files, one per thread of its first process), then sleep at level 2, wake, reload and generate with
   CUDA graphs on. The synced weights are perturbed far from the engine's (the final norm's scale changed), and
   the engine's log-probs must match the trainer's forward of the new weights and not of the old: a sync that
   loads nothing fails.
Then training and rollout throughput, and the evaluation's path (one engine at the evaluation's share, no log-probs
asked) with its tokens per second. Prints a table; writes its JSON after every phase; a phase that raises is
recorded with its error and the next one still runs; exits non-zero when a check fails.

Run by bench/checks/gpu_check.sh (torchrun, one process per GPU). Rollouts use vLLM when it is installed and the
Hugging Face backend otherwise (then with far fewer sequences and tokens: ``generate`` keeps every step's logits
and steps in Python); without vLLM the engines' phases are reported as not run.
``--tiny`` runs the same steps with tiny models on the CPU, to check the script itself.

Usage: torchrun --nproc-per-node N bench/checks/gpu_check.py [--out DIR] [--tiny] [--engine deepspeed [--engine-only]]
       [--only {memory,one-process,packing}] [--row PROMPT RESPONSE]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.distributed as dist
from transformers import Qwen3Config, Qwen3ForCausalLM

from graft.config import read_yaml
from graft.engine import deepspeed_engine
from graft.engine.distributed import World, enable_gradient_checkpointing, process_group_backend, shard_model
from graft.engine.packing import VARLEN
from graft.engine.policy import Policy, response_logprobs
from graft.engine.prompts import PromptFormat
from graft.engine.rollout import HFRollout
from graft.engine.trajectory import Trajectory
from graft.engine.weight_sync import WeightStream, node_files, read_weights, sync_bytes, sync_directory
from graft.errors import ConfigError
from graft.methods import get_method
from graft.planning.step_time import GPU_CHECK_ARCHITECTURES, GPU_CHECK_ROW
from graft.train.learner import compute_in
from graft.train.update import UpdateSettings, minibatch_update

# Qwen/Qwen3-1.7B-Base's config.json (architecture only)
QWEN3_17B = dict(
    vocab_size=151936,
    hidden_size=2048,
    intermediate_size=6144,
    num_hidden_layers=28,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    max_position_embeddings=32768,
    rope_theta=1_000_000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
    eos_token_id=151643,
    bos_token_id=151643,
)
# HuggingFaceTB/SmolLM3-3B-Base's config.json (architecture only)
SMOLLM3_3B = dict(
    vocab_size=128256,
    hidden_size=2048,
    intermediate_size=11008,
    num_hidden_layers=36,
    num_attention_heads=16,
    num_key_value_heads=4,
    max_position_embeddings=65536,
    rope_theta=5_000_000.0,
    tie_word_embeddings=True,
    eos_token_id=128012,
    bos_token_id=128000,
)
PAPER_PACKING = read_yaml(Path(__file__).resolve().parents[2] / "config" / "paper.yaml")["train"]["packing"]
"""The memory phase packs its rows as the paper's runs do (``train.packing``)."""
SHARPEN = 30.0
"""The final norm's weight is multiplied by this: random weights give near-uniform next-token distributions, on
which any two log-prob computations agree; scaled logits make them peaked, as a trained model's are."""
PERTURB = 0.5
"""Before the checked sync the trained model's final norm is scaled by this: the new weights' log-probs are then far
from the engine's old ones, so the check tells a sync that loaded them from one that did not."""
SYNC_TOLERANCE = 0.1
"""Largest mean |log-prob difference| between the engine and the trainer on the same weights (bf16 on both sides)."""
TINY = dict(
    vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, max_position_embeddings=1024, tie_word_embeddings=True, eos_token_id=1,
    bos_token_id=1,
)  # fmt: skip


def settings(tiny: bool) -> SimpleNamespace:
    """The paper's lengths and one GPU's share of a minibatch (32 prompts x 8 responses over 4 GPUs = 64 rows;
    16 here to stay inside the time limit), or a tiny stand-in. ``memory``: the architectures and the shapes of
    the memory phase (config/paper.yaml's scoring micro-batch and update budget). Hugging Face ``generate``, the
    rollout without vLLM, decodes ``hf_response_tokens`` at most: one Python step per token, its figure is a
    check that generation runs, not a throughput the plan uses."""
    if tiny:
        return SimpleNamespace(prompts=4, n=4, hf_prompts=2, hf_n=2, hf_response_tokens=32, prompt_tokens=16,
                               response_tokens=32,
                               train_rows=8, micro_batch=4, micro_batch_tokens=96, model=TINY,
                               memory={"tiny": TINY}, score_rows=4, memory_prompt=16, memory_response=32,
                               update_rows=2, vllm_memory=0.3, max_num_seqs=None)  # fmt: skip
    paper = read_yaml(Path(__file__).resolve().parents[2] / "config" / "paper.yaml")["scale"]
    return SimpleNamespace(prompts=16, n=8, hf_prompts=2, hf_n=4, hf_response_tokens=512, prompt_tokens=256,
                           response_tokens=4096, train_rows=16, micro_batch=16, micro_batch_tokens=36864,
                           model=QWEN3_17B, score_rows=16,
                           memory=dict(zip(GPU_CHECK_ARCHITECTURES, (SMOLLM3_3B, QWEN3_17B), strict=True)),
                           memory_prompt=GPU_CHECK_ROW[0], memory_response=GPU_CHECK_ROW[1],
                           update_rows=6, vllm_memory=paper["vllm_memory"],
                           max_num_seqs=paper.get("vllm_max_num_seqs"))  # fmt: skip


def random_model(model_config: dict, device: torch.device) -> torch.nn.Module:
    """Random weights of an architecture (Qwen3 or SmolLM3 by its config), float32, the output sharpened."""
    from transformers import SmolLM3Config, SmolLM3ForCausalLM

    torch.manual_seed(0)
    smol = model_config["vocab_size"] == SMOLLM3_3B["vocab_size"]
    config_cls, model_cls = (SmolLM3Config, SmolLM3ForCausalLM) if smol else (Qwen3Config, Qwen3ForCausalLM)
    with torch.device(device):
        model = model_cls(config_cls(**model_config))
    with torch.no_grad():
        model.model.norm.weight.mul_(SHARPEN)
    return model


def memory_phase(cfg, world: World, results: dict) -> None:
    """Peak memory above the resident state of scoring (no gradient) and of one update micro-batch (gradient
    checkpointing, FSDP2 with bf16 compute, rows packed as config/paper.yaml packs them), each beside
    graft.planning.memory's prediction of the same terms (activations, the gathered output projection and one layer, the
    log-prob chunk, and for the update the projection's float32 gradient). The resident state is read after a
    first update, so it holds the sharded gradients, as the plan's ``held`` does."""
    for arch, model_config in cfg.memory.items():
        measure_architecture(cfg, arch, model_config, world, results)
        if world.device.type == "cuda":
            torch.cuda.empty_cache()


def measure_architecture(cfg, arch: str, model_config: dict, world: World, results: dict) -> None:
    from graft.config import TrainSpec
    from graft.planning.memory import pass_bytes, sizes_from_config

    cuda = world.device.type == "cuda"
    compute_bytes = 2 if cuda else 4
    sizes = sizes_from_config(model_config)
    model = random_model(model_config, world.device)
    enable_gradient_checkpointing(model)
    shard_model(model, world, torch.bfloat16 if cuda else torch.float32)
    policy = Policy("gpu_check", model, ids_only_tokenizer(SimpleNamespace(model=model_config)), PromptFormat(""))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    g = torch.Generator().manual_seed(2)
    count = max(cfg.score_rows, cfg.update_rows)
    prompts = [torch.randint(2, sizes.vocab, (cfg.memory_prompt,), generator=g).tolist() for _ in range(count)]
    responses = [torch.randint(2, sizes.vocab, (cfg.memory_response,), generator=g).tolist() for _ in range(count)]
    width = cfg.memory_prompt + cfg.memory_response
    rows = {"score": cfg.score_rows, "update": cfg.update_rows}
    batch = [
        Trajectory(p, r, [-12.0] * len(r), 1.0 if i % 2 else -1.0)
        for i, (p, r) in enumerate(zip(prompts[: rows["update"]], responses[: rows["update"]], strict=True))
    ]
    settings = UpdateSettings(
        grad_clip=1.0, micro_batch=rows["update"], micro_batch_tokens=rows["update"] * width, packing=PAPER_PACKING
    )
    method = get_method("graft")
    minibatch_update(method, policy, optimizer, batch, settings=settings, world=world)  # AdamW's moments now exist
    for phase in ("score", "update"):
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        resident = torch.cuda.memory_allocated() if cuda else 0
        t0 = time.perf_counter()
        if phase == "score":
            with torch.no_grad():
                response_logprobs(model, prompts, responses, 0, packed=PAPER_PACKING)
        else:
            minibatch_update(method, policy, optimizer, batch, settings=settings, world=world)
        if cuda:
            torch.cuda.synchronize()
        grad = phase == "update"
        tokens, response = rows[phase] * width, rows[phase] * cfg.memory_response
        plan = pass_bytes(sizes, tokens, response, TrainSpec.logits_chunk_mib, grad, compute_bytes)
        peak = torch.cuda.max_memory_allocated() - resident if cuda else float("nan")
        results[f"memory_{arch}_{phase}_reserved_peak_gib"] = peak_reserved_gib(world)
        results[f"memory_{arch}_{phase}_gpu_used_gib"] = used_gib(world)
        results[f"memory_{arch}_{phase}_tokens"] = tokens
        results[f"memory_{arch}_{phase}_peak_gib"] = peak / 2**30
        results[f"memory_{arch}_{phase}_plan_gib"] = plan / 2**30
        results[f"memory_{arch}_{phase}_s"] = seconds = time.perf_counter() - t0
        results[f"memory_{arch}_{phase}_tokens_per_s"] = tokens / seconds


def ids_only_tokenizer(cfg) -> SimpleNamespace:
    """What the policy needs of a tokenizer when prompts are token ids (random weights have no tokenizer)."""
    return SimpleNamespace(pad_token_id=0, eos_token_id=cfg.model["eos_token_id"], decode=lambda ids, **_: "")


def start_world() -> World:
    """A process group even for one process, so that training runs the sharded (FSDP2) path; its backend is the
    one graft's jobs use (NCCL beside gloo for host tensors on GPUs)."""
    cuda = torch.cuda.is_available()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        torch.cuda.set_device(local)
    dist.init_process_group(process_group_backend("cuda" if cuda else "cpu"))
    return World(dist.get_rank(), dist.get_world_size(), f"cuda:{local}" if cuda else "cpu", local_rank=local)


def peak_gib(world: World) -> float:
    return torch.cuda.max_memory_allocated() / 2**30 if world.device.type == "cuda" else float("nan")


def peak_reserved_gib(world: World) -> float:
    """What the caching allocator held at its peak: the memory other processes could not have."""
    return torch.cuda.max_memory_reserved() / 2**30 if world.device.type == "cuda" else float("nan")


def collectives_phase(world: World, results: dict) -> None:
    """graft's host-side collectives in the job's groups: a float64 sum, an object gather, a barrier."""
    total = world.sum([1.0, float(world.rank)])
    gathered = world.gather(world.rank)
    world.barrier()
    ok = total == [float(world.size), float(sum(range(world.size)))] and gathered == list(range(world.size))
    backend = dist.get_backend_config()
    results["collectives"] = (
        f"{'ok' if ok else 'WRONG'}: sum, gather and barrier on {world.size} processes ({backend})"
        if world.size > 1
        else f"not run: one process ({backend}); run on a machine with two or more GPUs"
    )
    if not ok:
        results.setdefault("failed", []).append("collectives")


def one_process_phase(cfg, world: World, results: dict) -> None:
    """One GPU's training as graft.train.learner builds it: float32 masters, bf16 autocast (compute_in), one
    update at the paper's learning rate; most weights must move."""
    model = random_model(cfg.model, world.device)
    enable_gradient_checkpointing(model)
    compute_in(model, torch.bfloat16 if world.device.type == "cuda" else torch.float32)
    policy = Policy("gpu_check", model, ids_only_tokenizer(cfg), PromptFormat(""))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    rows = training_rows(cfg, SimpleNamespace(size=1))[:2]
    settings = UpdateSettings(grad_clip=1.0, micro_batch=2, micro_batch_tokens=None)
    minibatch_update(get_method("graft"), policy, optimizer, rows, settings=settings)
    dtypes = {p.dtype for p in model.parameters()} | {
        v.dtype for state in optimizer.state.values() for v in state.values() if v.dim() > 0
    }
    moved = sum(int((p.detach() != before[k]).sum()) for k, p in model.named_parameters())
    share = moved / sum(p.numel() for p in model.parameters())
    results["one_process_master_dtypes"] = ", ".join(sorted(str(d) for d in dtypes))
    results["one_process_share_of_weights_moved"] = share
    if dtypes != {torch.float32} or share < 0.5:
        results.setdefault("failed", []).append("one_process")
    del model, policy, optimizer, before
    if world.device.type == "cuda":
        torch.cuda.empty_cache()


PACKING_ERROR_RATIO = 2.0
"""A packed bf16 pass may be off the float32 reference by at most this times what the padded bf16 pass is off it
(plus ``PACKING_ERROR_FLOOR``). Random tokens under sharpened logits have log-probs in the tens, so bf16 rounding
alone puts either pass tenths away from the other: an absolute bound between the two says nothing, an error
against float32 compared with the padded pass's says whether packing adds any."""
PACKING_ERROR_FLOOR = 1e-3
"""Where both passes are float32 (the CPU), both errors are rounding, far below this."""


def packing_phase(cfg, world: World, results: dict) -> None:
    """``train.packing`` on a GPU: rows of unequal lengths scored and trained on as one packed sequence (torch's
    variable-length flash attention under bf16 autocast where torch has it, else SDPA row by row; gradient
    checkpointing on) against the same rows padded (SDPA with a mask). Each pass's log-probs are compared with a
    float32 padded pass of the same weights; the packed pass must be no further from it than the padded one allows
    (``PACKING_ERROR_RATIO``), the gradient norms must agree, and each pass's seconds are recorded."""
    g = torch.Generator().manual_seed(3)
    lengths = [cfg.response_tokens, cfg.response_tokens // 8, cfg.response_tokens // 2, 17, cfg.response_tokens // 4]
    prompts = [torch.randint(2, cfg.model["vocab_size"], (cfg.prompt_tokens // 2,), generator=g).tolist()] * 5
    responses = [torch.randint(2, cfg.model["vocab_size"], (n,), generator=g).tolist() for n in lengths]
    reference = random_model(cfg.model, world.device)  # the same seed, so the same weights, float32 throughout
    with torch.no_grad():
        exact, mask = response_logprobs(reference, prompts, responses, 0, packed=False)
    del reference
    model = random_model(cfg.model, world.device)
    enable_gradient_checkpointing(model)
    compute_in(model, torch.bfloat16 if world.device.type == "cuda" else torch.float32)
    out = {}
    for packed in (False, True):
        model.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        logp, _ = response_logprobs(model, prompts, responses, 0, packed=packed)
        (logp * mask).sum().backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
        if world.device.type == "cuda":
            torch.cuda.synchronize()
        error = float((logp.detach().float() - exact).abs()[mask].mean())
        out[packed] = (error, float(norm), time.perf_counter() - t0)
    results["packing_logprob_mean_abs"] = float(exact.abs()[mask].mean())
    results["packing_logprob_error_padded"], results["packing_logprob_error_packed"] = out[False][0], out[True][0]
    results["packing_grad_norm_relative_difference"] = abs(out[True][1] / out[False][1] - 1)
    results["packing_padded_s"], results["packing_packed_s"] = out[False][2], out[True][2]
    on_gpu = world.device.type == "cuda" and VARLEN is not None
    results["packing_attention"] = "torch varlen_attn (flash)" if on_gpu else "SDPA row by row"
    results["packing_tokens"] = sum(map(len, prompts)) + sum(lengths)
    bound = PACKING_ERROR_RATIO * out[False][0] + PACKING_ERROR_FLOOR
    if out[True][0] > bound or results["packing_grad_norm_relative_difference"] > 0.05:
        results.setdefault("failed", []).append("packing")
    del model, out


def sync_phase(model: torch.nn.Module, world: World, results: dict) -> None:
    """The weight sync's files without an engine (graft.engine.weight_sync): the trained model gathered tensor by
    tensor, each shard cast to bf16 before its gather, copied off the GPU through pinned buckets and written once
    per node where a run writes it (/dev/shm when it has room; a file per thread, written at once), then read back
    onto the GPU tensor by tensor as an engine's loader does. Its bytes over its seconds are the bandwidth graft
    plan's step time uses for the sync, in place of ``workflow.sync_gb_per_s`` (the host's part alone, measured on
    a CPU)."""
    weights = WeightStream(model)
    needed = sync_bytes(weights, torch.bfloat16)
    try:
        directory = sync_directory(needed, None)
    except ConfigError:  # a machine with a small /dev/shm: the figure is then the disk's
        directory = Path(tempfile.gettempdir())
    t0 = time.perf_counter()
    with node_files(weights, world, torch.bfloat16, directory) as paths:
        written = time.perf_counter() - t0
        t1 = time.perf_counter()
        for _, tensor in read_weights(paths):
            tensor.to(world.device)
        if world.device.type == "cuda":
            torch.cuda.synchronize()
        read = time.perf_counter() - t1
    results.update(
        sync_dir=str(directory),
        sync_bytes=needed,
        sync_write_s=written,
        sync_read_s=read,
        sync_gb_per_s=needed / 1e9 / (written + read),
    )


def used_gib(world: World) -> float:
    """This GPU's memory in use by every process on it (the engine's own processes included), from the driver."""
    if world.device.type != "cuda":
        return float("nan")
    free, total = torch.cuda.mem_get_info()
    return (total - free) / 2**30


def build_model(cfg: SimpleNamespace, directory: Path, world: World) -> None:
    """Random weights of the architecture (sharpened), saved as a bf16 safetensors ``from_pretrained`` directory."""
    if world.is_main:
        model = random_model(cfg.model, world.device)
        model.to(torch.bfloat16).save_pretrained(directory, safe_serialization=True)
        del model
    dist.barrier()


def random_prompts(cfg: SimpleNamespace, count: int, seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(2, cfg.model["vocab_size"], (cfg.prompt_tokens,), generator=g).tolist() for _ in range(count)]


def start_engines(cfg, directory: Path, world: World, results: dict) -> list:
    """Two vLLM engines on this GPU at the configured share each, as a co-training run starts them (both asleep
    once built); none without vLLM or a GPU."""
    from importlib.util import find_spec

    from graft.engine.vllm import VLLMRollout

    if find_spec("vllm") is None or world.device.type != "cuda":
        results["engines"] = "not run: " + ("no GPU" if find_spec("vllm") else "vLLM is not installed")
        return []
    engines = []
    for _ in range(2):
        t0 = time.perf_counter()
        engines.append(
            VLLMRollout(
                str(directory),
                "bfloat16",
                cfg.response_tokens,
                cfg.prompt_tokens + cfg.response_tokens,
                gpu_memory_utilization=cfg.vllm_memory,
                colocated=True,
                device_index=world.device.index,
                engine_args={"skip_tokenizer_init": True},
                max_num_seqs=cfg.max_num_seqs,
                stop_token_ids=[cfg.model["eos_token_id"]],
            )
        )
        results[f"engine{len(engines)}_start_s"] = time.perf_counter() - t0
        results[f"engine{len(engines)}_kv_cache_tokens"] = kv_cache_tokens(engines[-1])
    results["engine_kv_cache_tokens_plan"] = planned_kv_cache_tokens(cfg, world)
    results["gpu_used_gib_engines_built_asleep"] = used_gib(world)
    return engines


def planned_kv_cache_tokens(cfg, world: World) -> int:
    """graft.planning.memory's estimate of the KV cache an engine of ``cfg.model`` keeps at its share of this GPU."""
    from graft.planning.memory import VLLM_MAX_NUM_SEQS, sizes_from_config
    from graft.planning.memory import kv_cache_tokens as planned

    share = cfg.vllm_memory * torch.cuda.get_device_properties(world.device).total_memory
    return planned(share, sizes_from_config(cfg.model), 2, cfg.max_num_seqs or VLLM_MAX_NUM_SEQS)


def kv_cache_tokens(engine) -> int | None:
    """The KV cache the engine reports: its blocks times the block size (None where the engine does not say)."""
    cache = getattr(getattr(getattr(engine.llm, "llm_engine", None), "vllm_config", None), "cache_config", None)
    blocks = getattr(cache, "num_gpu_blocks", None)
    return None if blocks is None else int(blocks) * int(cache.block_size)


def rollout(engine, prompts: list[list[int]], n: int, world: World, results: dict, backend: str) -> None:
    t0 = time.perf_counter()
    samples = engine.generate(prompts, n, seed=world.rank)
    elapsed = time.perf_counter() - t0
    tokens = sum(len(s.token_ids) for group in samples for s in group)
    totals = world.sum([tokens, elapsed])
    results.update(
        rollout_backend=backend,
        rollout_sequences=len(prompts) * n * world.size,
        rollout_tokens=int(totals[0]),
        rollout_s=totals[1] / world.size,
        rollout_tokens_per_s=totals[0] / (totals[1] / world.size),
    )


def hf_rollout_phase(cfg, directory: Path, world: World, results: dict) -> None:
    """Without vLLM: Hugging Face generate on a few sequences."""
    model = Qwen3ForCausalLM.from_pretrained(directory, dtype=torch.bfloat16).to(world.device).eval()
    policy = Policy("gpu_check", model, ids_only_tokenizer(cfg), PromptFormat(""))
    engine = HFRollout(policy, cfg.hf_response_tokens, batch_size=cfg.hf_prompts * cfg.hf_n)
    rollout(engine, random_prompts(cfg, cfg.hf_prompts, world.rank), cfg.hf_n, world, results, "hf generate")
    del engine, policy, model
    if world.device.type == "cuda":
        torch.cuda.empty_cache()


def engine_phase(cfg, engines: list, policy: Policy, stepper, world: World, results: dict) -> None:
    """After the training peak: each engine takes the trained weights (the streamed sync, timed) and wakes to
    sample, then sleeps; the first one samples the paper's rollout batch for throughput; then the engine's
    log-probs against the trainer's forward (bf16 on both sides, so agreement is to bf16 precision)."""
    model = stepper.module if deepspeed_engine.is_engine(stepper) else policy.model
    results["gpu_used_gib_after_training_peak"] = used_gib(world)
    for index, engine in enumerate(engines, start=1):
        t0 = time.perf_counter()
        engine.sync_from(WeightStream(model), world)
        results[f"engine{index}_weight_sync_s"] = time.perf_counter() - t0
        results[f"gpu_used_gib_engine{index}_weights_loaded"] = used_gib(world)
        if index == 1:
            rollout(engine, random_prompts(cfg, cfg.prompts, world.rank), cfg.n, world, results, "vllm")
        else:
            engine.generate(random_prompts(cfg, 2, world.rank), 2, seed=world.rank)
        results[f"gpu_used_gib_engine{index}_asleep_after_rollout"] = used_gib(world)
    engine = engines[0]
    engine.max_new_tokens = 64
    prompts = random_prompts(cfg, 2, 100 + world.rank)
    old = engine_against_trainer(engine, policy, model, prompts, world, results, "before")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("model.norm.weight"):
                p.mul_(PERTURB)
    # slept at level 2 after the last rollout: the sync wakes the weights, the rollout the KV cache
    new = engine_against_trainer(engine, policy, model, prompts, world, results, "after")
    results["sync_check"] = (
        f"engine vs trainer after perturbing: {new:.3g} mean |diff| (tolerance {SYNC_TOLERANCE}); "
        f"the same check before the perturbation gave {old:.3g}"
    )
    results["cuda_graphs"] = not engine.llm.llm_engine.vllm_config.model_config.enforce_eager
    if not (new <= SYNC_TOLERANCE and old <= SYNC_TOLERANCE):
        results.setdefault("failed", []).append("weight_sync")


def engine_against_trainer(engine, policy, model, prompts, world, results, when: str) -> float:
    """Sync the trainer's weights into the engine, sample, and compare the engine's log-probs of its samples with
    the trainer's forward; also records how far the samples' log-probs are from those of the weights the engine
    had before (the previous call's), which a failed sync would match."""
    engine.sync_from(WeightStream(model), world)
    samples = [s for group in engine.generate(prompts, 2, seed=7) for s in group]
    with torch.no_grad():
        logp, _ = response_logprobs(
            policy.model, [p for p in prompts for _ in range(2)], [s.token_ids for s in samples], 0
        )
    diffs = [
        (logp[i, : len(s.token_ids)].float().cpu() - torch.tensor(s.logprobs)).abs()
        for i, s in enumerate(samples)
        if s.token_ids
    ]
    sampled = [lp for s in samples for lp in s.logprobs]
    mean = torch.cat(diffs).mean().item() if diffs else float("inf")
    results[f"engine_sampled_logprob_mean_{when}"] = sum(sampled) / max(len(sampled), 1)
    results[f"logprob_max_abs_diff_{when}"] = max(d.max().item() for d in diffs) if diffs else None
    results[f"logprob_mean_abs_diff_{when}"] = mean
    return mean


def evaluation_phase(cfg, directory: Path, engines: list, world: World, results: dict) -> None:
    """The evaluation's path, as graft.eval.evaluate runs it: the training engines shut down and the trainer's
    memory released, then one engine at the evaluation's share (``eval.vllm_memory``), no log-probs asked, sampling
    at the paper's evaluation temperature and top-p; its tokens per second are what the evaluation jobs' lengths
    rest on (``workflow.generation_tokens_per_s``)."""
    from graft.config import EvalSpec
    from graft.engine.vllm import VLLMRollout

    for engine in engines:
        engine.close()
    gc.collect()  # the sharded trainer's modules hold reference cycles
    torch.cuda.empty_cache()
    results["gpu_used_gib_before_evaluation_engine"] = used_gib(world)
    share = EvalSpec.vllm_memory
    engine = VLLMRollout(
        str(directory),
        "bfloat16",
        cfg.response_tokens,
        cfg.prompt_tokens + cfg.response_tokens,
        temperature=0.6,
        top_p=0.95,
        gpu_memory_utilization=share,
        colocated=False,
        engine_args={"skip_tokenizer_init": True},
        stop_token_ids=[cfg.model["eos_token_id"]],
        logprobs=False,
    )
    results["evaluation_engine_share"] = share
    results["evaluation_engine_kv_cache_tokens"] = kv_cache_tokens(engine)
    t0 = time.perf_counter()
    samples = engine.generate(random_prompts(cfg, cfg.prompts, 200 + world.rank), 8, seed=world.rank)
    elapsed = time.perf_counter() - t0
    tokens = sum(len(s.token_ids) for group in samples for s in group)
    totals = world.sum([tokens, elapsed])
    results["evaluation_tokens_per_s"] = totals[0] / (totals[1] / world.size)
    engine.close()


def training_rows(cfg, world: World) -> list[Trajectory]:
    g = torch.Generator().manual_seed(1)
    rows = []
    for i in range(cfg.train_rows * world.size):  # the job's whole minibatch; each process takes its share
        prompt = torch.randint(2, cfg.model["vocab_size"], (cfg.prompt_tokens,), generator=g).tolist()
        response = torch.randint(2, cfg.model["vocab_size"], (cfg.response_tokens,), generator=g).tolist()
        rows.append(Trajectory(prompt, response, [-12.0] * len(response), 1.0 if i % 2 else -1.0, is_peer=i % 4 == 0))
    return rows


def training_phase(cfg, directory: Path, world: World, results: dict, engine: str):
    """Two updates of the job's minibatch with FSDP2 or DeepSpeed ZeRO-3; returns the policy and what steps it."""
    if world.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    model = Qwen3ForCausalLM.from_pretrained(directory, dtype=torch.float32).to(world.device)
    enable_gradient_checkpointing(model)
    compute = torch.bfloat16 if world.device.type == "cuda" else torch.float32
    if engine == "fsdp2":
        shard_model(model, world, compute)
    policy = Policy("gpu_check", model, ids_only_tokenizer(cfg), PromptFormat(""))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    if engine == "deepspeed":
        optimizer = deepspeed_engine.wrap(model, optimizer, deepspeed_engine.engine_config(1.0, 3, compute))
    rows = training_rows(cfg, world)
    method = get_method("graft")
    times = []
    for index in range(2):  # the first includes one-time costs (allocator, kernels); the second is reported
        if world.device.type == "cuda":
            torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        settings = UpdateSettings(grad_clip=1.0, micro_batch=cfg.micro_batch, micro_batch_tokens=cfg.micro_batch_tokens)
        minibatch_update(method, policy, optimizer, rows, settings=settings, update_index=index, world=world)
        if world.device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    tokens = sum(len(r.prompt_ids) + len(r.response_ids) for r in rows)
    results.update(
        train_rows=len(rows),
        train_tokens=tokens,
        train_first_update_s=times[0],
        train_update_s=times[1],
        train_tokens_per_s=tokens / times[1],
        train_peak_gib=peak_gib(world),
    )
    return policy, optimizer


ALONE = {"memory": memory_phase, "one-process": one_process_phase, "packing": packing_phase}
"""The phases that need no other, in the order a full check runs them."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "results")
    parser.add_argument("--tiny", action="store_true", help="a tiny model on the CPU: checks the script only")
    parser.add_argument("--engine", choices=("fsdp2", "deepspeed"), default="fsdp2", help="training engine")
    parser.add_argument(
        "--engine-only",
        action="store_true",
        help="only the phases the training engine changes (training, sync, rollout): the others ran with fsdp2",
    )
    parser.add_argument(
        "--only", choices=sorted(ALONE), help="one phase that needs no other (after the collectives), to rerun it"
    )
    parser.add_argument(
        "--row",
        type=int,
        nargs=2,
        metavar=("PROMPT", "RESPONSE"),
        help="the memory phase's row in tokens (default: the paper's limits); its update takes as many rows as the "
        "update's token budget holds",
    )
    args = parser.parse_args()
    if not args.tiny and not torch.cuda.is_available():
        raise SystemExit(
            "gpu_check.py: no CUDA device here; run it on a GPU node (bench/checks/gpu_check.sh), or --tiny"
        )
    cfg = settings(args.tiny)
    if args.row:
        cfg.memory_prompt, cfg.memory_response = args.row
        cfg.update_rows = max(1, cfg.micro_batch_tokens // sum(args.row))
    world = start_world()
    results: dict = {
        "model": "Qwen3-1.7B architecture, random weights" if not args.tiny else "tiny Qwen3 (script check)",
        "processes": world.size,
        "device": torch.cuda.get_device_name() if world.device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "engine": args.engine if args.engine == "fsdp2" else "deepspeed ZeRO-3",
        "prompt_tokens": cfg.prompt_tokens,
        "response_tokens": cfg.response_tokens,
        "micro_batch_tokens": cfg.micro_batch_tokens,
    }
    name = "gpu_check" + ("_tiny" if args.tiny else "") + ("_deepspeed" if args.engine == "deepspeed" else "")
    name += f"_{args.only}" if args.only else ""
    name += f"_row{args.row[0]}x{args.row[1]}" if args.row else ""
    results["memory_row"] = [cfg.memory_prompt, cfg.memory_response]

    def phase(label: str, run, *run_args):
        """Run one phase and write the figures so far at once. A phase that raises is recorded as failed with its
        error's last line, and the next phase still runs: one GPU session should show every phase it can."""
        try:
            value = run(*run_args)
        except Exception as error:  # recorded, reported, and turned into the exit status
            traceback.print_exc()
            results.setdefault("errors", {})[label] = f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"
            results.setdefault("failed", []).append(label)
            value = None
        else:
            results["phases_done"] = [*results.get("phases_done", []), label]
        if world.device.type == "cuda":
            gc.collect()
            torch.cuda.empty_cache()
        if world.is_main:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"{name}.json").write_text(json.dumps(results, indent=2) + "\n")
        return value

    # one directory for every process: process 0 writes the model there, the others read it
    shared = [tempfile.mkdtemp(prefix="gpu_check_") if world.is_main else None]
    dist.broadcast_object_list(shared, src=0)
    directory = Path(shared[0]) / "model"
    try:
        if world.is_main:
            directory.mkdir()
        phase("collectives", collectives_phase, world, results)
        for label, run in ALONE.items():
            if args.only in (None, label) and not args.engine_only:
                phase(label, run, cfg, world, results)
        if args.only:
            return finish(world, results)
        t0 = time.perf_counter()
        build_model(cfg, directory, world)
        results["build_s"] = time.perf_counter() - t0
        engines = phase("engines started", start_engines, cfg, directory, world, results) or []
        trained = phase("training", training_phase, cfg, directory, world, results, args.engine)
        if trained is not None:
            policy, stepper = trained
            module = stepper.module if deepspeed_engine.is_engine(stepper) else policy.model
            phase("sync", sync_phase, module, world, results)
            if engines:
                phase("rollout", engine_phase, cfg, engines, policy, stepper, world, results)
            del policy, stepper, module, trained  # an evaluation job holds no training state
        if engines:
            phase("evaluation", evaluation_phase, cfg, directory, engines, world, results)
        else:
            phase("rollout", hf_rollout_phase, cfg, directory, world, results)
        dist.barrier()
    finally:
        if world.is_main:
            shutil.rmtree(shared[0], ignore_errors=True)
    return finish(world, results)


def finish(world: World, results: dict) -> int:
    """Print the figures as a table (first process), leave the process group, and say whether a check failed."""
    if world.is_main:
        width = max(len(k) for k in results)
        print(f"| {'measure':<{width}} | value |\n|{'-' * (width + 2)}|-------|")
        for key, value in results.items():
            shown = f"{value:.4g}" if isinstance(value, float) else str(value)
            print(f"| {key:<{width}} | {shown} |")
    dist.destroy_process_group()
    if results.get("failed"):
        print(f"gpu_check.py: FAILED: {', '.join(results['failed'])}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
