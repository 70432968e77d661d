"""What the CPU numerics pin (graft.numerics) costs in speed: the same fixed work, pinned to AVX2 and native.

One toy model of a built world: forward + backward over a fixed batch of token rows (the update's work) and a
greedy-free sampling call of fixed length (the rollout's), each timed over repeats in a fresh process per mode,
because the kernel dispatch is fixed when torch first runs an op. Prints a table and writes
bench/results/pin_cost.json.

Usage: python bench/benchmarks/pin_cost.py --model results/default/toy/models/smol [--threads 2] [--repeats 20]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def measure(model_dir: str, threads: int, repeats: int) -> dict[str, float]:
    import torch
    from transformers import AutoModelForCausalLM

    from graft.numerics import numerics_record

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, use_safetensors=True)
    vocab = model.config.vocab_size
    ids = torch.randint(2, vocab, (128, 48), generator=torch.Generator().manual_seed(0))
    model(input_ids=ids).logits.sum().backward()  # warm-up
    start = time.perf_counter()
    for _ in range(repeats):
        model.zero_grad(set_to_none=True)
        model(input_ids=ids).logits.float().log_softmax(-1).mean().backward()
    update = (time.perf_counter() - start) / repeats
    prompts = ids[:64, :16]
    with torch.no_grad():
        model.generate(prompts, max_new_tokens=4, do_sample=True, top_k=0, top_p=1.0, pad_token_id=0)
        start = time.perf_counter()
        for _ in range(max(repeats // 4, 1)):
            model.generate(
                prompts, max_new_tokens=32, min_new_tokens=32, do_sample=True, top_k=0, top_p=1.0, pad_token_id=0
            )
        rollout = (time.perf_counter() - start) / max(repeats // 4, 1)
    return {"update_s": update, "rollout_s": rollout, "capability": numerics_record()["torch_cpu_capability"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "results" / "pin_cost.json")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.model, args.threads, args.repeats)))
        return
    results = {}
    for mode in ("avx2", "native"):
        env = {**os.environ, "GRAFT_CPU_NUMERICS": mode}
        cmd = [sys.executable, __file__, "--child", "--model", args.model, "--threads", str(args.threads)]
        cmd += ["--repeats", str(args.repeats)]
        out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
        results[mode] = json.loads(out.strip().splitlines()[-1])
    print(f"{'mode':<8} {'kernels':<8} {'update s':>9} {'rollout s':>10}")
    for mode, r in results.items():
        print(f"{mode:<8} {r['capability']:<8} {r['update_s']:>9.4f} {r['rollout_s']:>10.4f}")
    for part in ("update_s", "rollout_s"):
        results[f"{part}_pinned_over_native"] = results["avx2"][part] / results["native"][part]
    print(
        f"pinned / native: update {results['update_s_pinned_over_native']:.3f}, "
        f"rollout {results['rollout_s_pinned_over_native']:.3f}"
    )
    from graft.results import write_text

    payload = {"model": args.model, "threads": args.threads, "repeats": args.repeats, **results}
    write_text(args.out, json.dumps(payload, indent=2) + "\n")


if __name__ == "__main__":
    main()
