"""Time the algorithm layer's loss and advantage functions on the CPU.

Prints a table and writes bench/results/algo_speed.json. The target: well under a
millisecond per 1,024 x 8 batch. "1,024 x 8" is read as 1,024 prompt groups of n = 8 for the advantage and
selection functions and as 1,024 responses x 8 tokens for the losses; a realistic minibatch
(256 responses x 512 tokens) is timed beside it for scale.

Usage: python bench/benchmarks/algo_speed.py [--repeats N] [--threads T]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

from graft.algo import (
    balanced_selection,
    clipped_token_objective,
    compatibility,
    exchange_candidates,
    group_advantages,
    mean_token_logprob,
    minibatch_order,
    sequence_ratio_objective,
    success_counts,
)
from graft.methods import Method
from graft.results import write_text


def timeit(fn, repeats: int) -> tuple[float, float]:
    """Median and minimum wall time of fn() in microseconds, after warm-up."""
    for _ in range(10):
        fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e6)
    return statistics.median(samples), min(samples)


def cases(g: torch.Generator):
    rewards = (torch.rand(1024, 8, generator=g) < 0.4).float()
    rewards_b = (torch.rand(1024, 8, generator=g) < 0.3).float()

    def selection():
        k_a, k_b = success_counts(rewards), success_counts(rewards_b)
        return balanced_selection(exchange_candidates(k_b, k_a, 8), k_a, exchange_candidates(k_a, k_b, 8), k_b)

    yield "group_advantages [1024 x 8]", lambda: group_advantages(rewards)
    yield "candidates + balanced_selection [1024 x 8]", selection
    recv, src = torch.randn(8192, generator=g), torch.randn(8192, generator=g)
    yield "compatibility [8192 responses]", lambda: compatibility(recv, src, 0.8, 1.0)

    for b, t in ((1024, 8), (256, 512)):
        logp = (-torch.rand(b, t, generator=g) * 3).requires_grad_(True)
        old = logp.detach() + 0.1 * torch.randn(b, t, generator=g)
        adv, w = torch.randn(b, generator=g), torch.rand(b, generator=g)
        mask = torch.rand(b, t, generator=g) < 0.9

        def forward(fn=clipped_token_objective, logp=logp, old=old, adv=adv, w=w, mask=mask):
            return fn(logp, old, adv, w, mask, Method.eps_low, Method.eps_high)

        def forward_backward(logp=logp, old=old, adv=adv, w=w, mask=mask):
            loss, _ = clipped_token_objective(logp, old, adv, w, mask, Method.eps_low, Method.eps_high)
            loss.backward()

        def seq(logp=logp, old=old, adv=adv, w=w, mask=mask):
            return sequence_ratio_objective(logp, old, adv, w, mask, Method.eps_low, Method.eps_high)

        def mean_ll(logp=logp, mask=mask):
            return mean_token_logprob(logp.detach(), mask)

        yield f"clipped_token_objective fwd [{b} x {t}]", forward
        yield f"clipped_token_objective fwd+bwd [{b} x {t}]", forward_backward
        yield f"sequence_ratio_objective fwd [{b} x {t}]", seq
        yield f"mean_token_logprob [{b} x {t}]", mean_ll

    is_peer = torch.rand(128, generator=g) < 0.2
    yield "minibatch_order peer_last [128 groups]", lambda: minibatch_order(is_peer, 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "results" / "algo_speed.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    rows = []
    print(f"{'function':<48} {'median us':>10} {'min us':>8}")
    for name, fn in cases(g):
        median, best = timeit(fn, args.repeats)
        rows.append({"function": name, "median_us": round(median, 1), "min_us": round(best, 1)})
        print(f"{name:<48} {median:>10.1f} {best:>8.1f}")
    result = {
        "torch": torch.__version__,
        "threads": args.threads,
        "machine": platform.machine(),
        "processor": platform.processor(),
        "repeats": args.repeats,
        "rows": rows,
    }
    write_text(args.out, json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
