"""What a GRAFT co-training step costs against two GRPO n=8 steps on the same prompts.

Runs GRPO n=8 for each model of a pair and GRAFT for the pair, each for a few steps from the same initial
models with the same seed (so the same prompt batches), and splits each step's time into rollout, reward,
scoring (the receiver's forward pass over the peer strings it receives) and update. Prints a table and, as its
last line, ``step ratio graft/grpo: R``; writes bench/results/step_cost.json. Peak memory is the process's
maximum resident set size.

Usage: python bench/benchmarks/step_cost.py [--config config/config.yaml] [--pair P1] [--steps 4] [--threads 2]
Builds the toy world of the config first when it is missing (graft toy build --config config/config.yaml).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/, for needs.py
from needs import toy_world

from graft.methods import get_method
from graft.results import write_text
from graft.train.request import TrainRequest
from graft.train.trainer import Trainer

PARTS = ("rollout_s", "reward_s", "scoring_s", "update_s")


def run(config, method: str, models: list[str], steps: int, out: Path) -> list[dict]:
    req = TrainRequest(config, get_method(method, config.methods), models, 0, out, steps)
    Trainer(req).run()
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def per_step(rows: list[dict], skip: int) -> dict[str, float]:
    """Mean seconds per step (summed over the models of the run), after ``skip`` warm-up steps."""
    steps = sorted({r["step"] for r in rows})[skip:]
    out = {}
    for part in PARTS:
        out[part] = statistics.fmean(sum(r[part] for r in rows if r["step"] == s) for s in steps)
    out["step_s"] = statistics.fmean(next(r["step_time_s"] for r in rows if r["step"] == s) for s in steps)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=Path("config/config.yaml"))
    parser.add_argument("--pair", default=None, help="pair name (default: the config's first)")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--skip", type=int, default=1, help="warm-up steps left out of the means")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "results" / "step_cost.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = toy_world(args.config)
    pair = args.pair or next(iter(config.pairs))
    a, b = config.pairs[pair]
    with tempfile.TemporaryDirectory() as tmp:
        grpo = {m: per_step(run(config, "grpo_n8", [m], args.steps, Path(tmp) / m), args.skip) for m in (a, b)}
        graft_rows = run(config, "graft", [a, b], args.steps, Path(tmp) / "graft")
    graft = per_step(graft_rows, args.skip)
    grpo_sum = {k: grpo[a][k] + grpo[b][k] for k in graft}
    received = statistics.fmean(r.get("admitted", 0) for r in graft_rows)
    print(
        f"pair {pair} ({a}, {b}), {config.train.prompts_per_step} prompts x n=8, {args.threads} threads, "
        f"mean over steps {args.skip}..{args.steps - 1}"
    )
    print(f"{'seconds per step':<18}" + "".join(f"{p.removesuffix('_s'):>10}" for p in (*PARTS, "step_s")))
    for label, row in ((f"GRPO {a}", grpo[a]), (f"GRPO {b}", grpo[b]), ("GRPO sum", grpo_sum), ("GRAFT pair", graft)):
        print(f"{label:<18}" + "".join(f"{row[p]:>10.3f}" for p in (*PARTS, "step_s")))
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    ratio = graft["step_s"] / grpo_sum["step_s"]
    responses = config.train.prompts_per_step * 8
    per_second = {m: responses / grpo[m]["rollout_s"] for m in (a, b)}
    print(
        "rollout responses per second (GRPO n=8): "
        + ", ".join(f"{m} {v:.0f}" for m, v in per_second.items())
        + f"; training responses per second (GRPO sum): {2 * responses / grpo_sum['step_s']:.0f}"
    )
    print(f"peer responses admitted per model-step: {received:.1f}; peak RSS {peak_gib:.2f} GiB")
    result = {
        "pair": pair,
        "models": [a, b],
        "prompts_per_step": config.train.prompts_per_step,
        "threads": args.threads,
        "steps": args.steps,
        "skip": args.skip,
        "grpo": grpo,
        "grpo_sum": grpo_sum,
        "graft": graft,
        "ratio": ratio,
        "peak_rss_gib": peak_gib,
        "admitted_per_model_step": received,
        "rollout_responses_per_s": per_second,
    }
    write_text(args.out, json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    print(f"step ratio graft/grpo: {ratio:.3f}")


if __name__ == "__main__":
    main()
