"""The scale path on a GPU node at the paper's lengths, with a model of the Qwen3-1.7B architecture and random
weights (nothing can be downloaded there): rollout tokens/s, training tokens/s and peak memory of one
minibatch update, the time to move new weights into the rollout engine, and whether the engine's log-probs
agree with the trained model's forward pass, and the GPU memory in use with the engine awake, asleep (vLLM's
level-2 sleep mode) and after the weight load. Prints a table; writes JSON.

Run by bench/gpu_check.sh (torchrun, one process per GPU). Rollouts use vLLM when it is installed and the
Hugging Face backend otherwise (then with far fewer sequences: ``generate`` keeps every step's logits). Training
is the project's own path: FSDP2 with float32 masters and bf16 compute, gradient checkpointing, the
token-budgeted micro-batches of config/paper.yaml, AdamW. ``--tiny`` runs the same steps with a tiny model on
the CPU, to check the script itself.

Usage: torchrun --nproc-per-node N bench/gpu_check.py [--out DIR] [--tiny]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.distributed as dist
from transformers import Qwen3Config, Qwen3ForCausalLM

from graft.engine import deepspeed_engine
from graft.engine.distributed import World, enable_gradient_checkpointing, shard_model
from graft.engine.policy import Policy, response_logprobs
from graft.engine.prompts import PromptFormat
from graft.engine.rollout import HFRollout
from graft.methods import get_method
from graft.train.exchange import Row
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
TINY = dict(
    vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, max_position_embeddings=1024, tie_word_embeddings=True, eos_token_id=1,
    bos_token_id=1,
)  # fmt: skip


def settings(tiny: bool) -> SimpleNamespace:
    """The paper's lengths and one GPU's share of a minibatch (32 prompts x 8 responses over 4 GPUs = 64 rows;
    16 here to stay inside the time limit), or a tiny stand-in."""
    if tiny:
        return SimpleNamespace(prompts=4, n=4, hf_prompts=2, hf_n=2, prompt_tokens=16, response_tokens=32,
                               train_rows=8, micro_batch=4, micro_batch_tokens=96, model=TINY)  # fmt: skip
    return SimpleNamespace(prompts=16, n=8, hf_prompts=2, hf_n=4, prompt_tokens=256, response_tokens=4096,
                           train_rows=16, micro_batch=16, micro_batch_tokens=36864, model=QWEN3_17B)  # fmt: skip


def ids_only_tokenizer(cfg) -> SimpleNamespace:
    """What the policy needs of a tokenizer when prompts are token ids (random weights have no tokenizer)."""
    return SimpleNamespace(pad_token_id=0, eos_token_id=cfg.model["eos_token_id"], decode=lambda ids, **_: "")


def start_world() -> World:
    """A process group even for one process, so that training runs the sharded (FSDP2) path."""
    cuda = torch.cuda.is_available()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        torch.cuda.set_device(local)
    dist.init_process_group("nccl" if cuda else "gloo")
    return World(dist.get_rank(), dist.get_world_size(), f"cuda:{local}" if cuda else "cpu")


def peak_gib(world: World) -> float:
    return torch.cuda.max_memory_allocated() / 2**30 if world.device.type == "cuda" else float("nan")


def used_gib(world: World) -> float:
    """This GPU's memory in use by every process on it (the engine's own processes included), from the driver."""
    if world.device.type != "cuda":
        return float("nan")
    free, total = torch.cuda.mem_get_info()
    return (total - free) / 2**30


def build_model(cfg: SimpleNamespace, directory: Path, world: World) -> None:
    """Random weights of the architecture, saved as a bf16 safetensors ``from_pretrained`` directory."""
    if world.is_main:
        torch.manual_seed(0)
        with torch.device(world.device):
            model = Qwen3ForCausalLM(Qwen3Config(**cfg.model))
        model.to(torch.bfloat16).save_pretrained(directory, safe_serialization=True)
        del model
    dist.barrier()


def random_prompts(cfg: SimpleNamespace, count: int, seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(2, cfg.model["vocab_size"], (cfg.prompt_tokens,), generator=g).tolist() for _ in range(count)]


def rollout_phase(cfg, directory: Path, world: World, results: dict):
    """Sample with vLLM if installed, else with HF generate; returns the engine (or None)."""
    if world.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    try:
        from graft.engine.vllm import VLLMRollout

        use_vllm = world.device.type == "cuda"
    except ImportError:
        use_vllm = False
    if use_vllm:
        t0 = time.perf_counter()
        engine = VLLMRollout(
            str(directory), "bfloat16", cfg.response_tokens, cfg.prompt_tokens + cfg.response_tokens,
            gpu_memory_utilization=0.3, colocated=True, device_index=world.device.index,
            engine_args={"skip_tokenizer_init": True},
        )  # fmt: skip
        results["vllm_start_s"] = time.perf_counter() - t0
        results["gpu_used_gib_engine_started"] = used_gib(world)
        prompts, n = random_prompts(cfg, cfg.prompts, world.rank), cfg.n
        backend = "vllm"
    else:
        model = Qwen3ForCausalLM.from_pretrained(directory, dtype=torch.bfloat16).to(world.device).eval()
        policy = Policy("gpu_check", model, ids_only_tokenizer(cfg), PromptFormat(""))
        engine = HFRollout(policy, cfg.response_tokens, batch_size=cfg.hf_prompts * cfg.hf_n)
        prompts, n = random_prompts(cfg, cfg.hf_prompts, world.rank), cfg.hf_n
        backend = "hf generate"
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
        rollout_peak_gib_torch=peak_gib(world),
    )
    if backend == "vllm":  # generate() ends with a level-2 sleep: weights and KV cache handed back to the driver
        results["gpu_used_gib_engine_asleep"] = used_gib(world)
    if backend == "hf generate":
        del engine, policy, model
        if world.device.type == "cuda":
            torch.cuda.empty_cache()
        return None
    return engine


def training_rows(cfg, world: World) -> list[Row]:
    g = torch.Generator().manual_seed(1)
    rows = []
    for i in range(cfg.train_rows * world.size):  # the job's whole minibatch; each process takes its share
        prompt = torch.randint(2, cfg.model["vocab_size"], (cfg.prompt_tokens,), generator=g).tolist()
        response = torch.randint(2, cfg.model["vocab_size"], (cfg.response_tokens,), generator=g).tolist()
        rows.append(Row(prompt, response, [-12.0] * len(response), 1.0 if i % 2 else -1.0, is_peer=i % 4 == 0))
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


def weight_sync_phase(cfg, engine, policy: Policy, stepper, world: World, results: dict) -> None:
    """New weights into the sleeping engine, then a short rollout whose log-probs are compared with a forward
    pass of the trained model (bf16 on both sides, so agreement is to bf16 precision)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    t0 = time.perf_counter()
    if deepspeed_engine.is_engine(stepper):
        full = deepspeed_engine.full_weights(stepper)
    else:
        full = get_model_state_dict(policy.model, options=StateDictOptions(full_state_dict=True))
    engine.load_weights(full)
    results["weight_sync_s"] = time.perf_counter() - t0
    results["gpu_used_gib_weights_loaded"] = used_gib(world)
    engine.max_new_tokens = 64
    prompts = random_prompts(cfg, 2, 100 + world.rank)
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
    results["logprob_max_abs_diff"] = max(d.max().item() for d in diffs) if diffs else None
    results["logprob_mean_abs_diff"] = torch.cat(diffs).mean().item() if diffs else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument("--tiny", action="store_true", help="a tiny model on the CPU: checks the script only")
    parser.add_argument("--engine", choices=("fsdp2", "deepspeed"), default="fsdp2", help="training engine")
    args = parser.parse_args()
    if not args.tiny and not torch.cuda.is_available():
        raise SystemExit("gpu_check.py: no CUDA device here; run it on a GPU node (bench/gpu_check.sh), or --tiny")
    cfg = settings(args.tiny)
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
    # one directory for every process: process 0 writes the model there, the others read it
    shared = [tempfile.mkdtemp(prefix="gpu_check_") if world.is_main else None]
    dist.broadcast_object_list(shared, src=0)
    directory = Path(shared[0]) / "model"
    try:
        if world.is_main:
            directory.mkdir()
        t0 = time.perf_counter()
        build_model(cfg, directory, world)
        results["build_s"] = time.perf_counter() - t0
        engine = rollout_phase(cfg, directory, world, results)
        policy, stepper = training_phase(cfg, directory, world, results, args.engine)
        if engine is not None:
            weight_sync_phase(cfg, engine, policy, stepper, world, results)
        dist.barrier()
    finally:
        if world.is_main:
            shutil.rmtree(shared[0], ignore_errors=True)
    if world.is_main:
        width = max(len(k) for k in results)
        print(f"| {'measure':<{width}} | value |\n|{'-' * (width + 2)}|-------|")
        for key, value in results.items():
            shown = f"{value:.4g}" if isinstance(value, float) else str(value)
            print(f"| {key:<{width}} | {shown} |")
        args.out.mkdir(parents=True, exist_ok=True)
        name = (
            "gpu_check"
            + ("_tiny" if args.tiny else "")
            + ("_deepspeed" if args.engine == "deepspeed" else "")
            + ".json"
        )
        (args.out / name).write_text(json.dumps(results, indent=2) + "\n")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
