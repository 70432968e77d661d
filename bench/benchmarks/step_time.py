"""graft plan's step time against the paper's Table 5 (Pair 1's GPU-hours for three epochs, 174 steps, 4 H200s).

The step time (graft/planning/step_time.py) has one figure no measurement here gives: the rollout engine's tokens per
second (the lent GPU had no vLLM). It is fitted per model so that GRPO n=8's step matches Table 5 for SmolLM3 and
Qwen3: the paper's seconds per step minus the scoring, update and sync that the model prices from the config (with
``workflow.gpu_check``'s measured utilization and sync bandwidth), turned into tokens per second. Every other row
is then predicted, not fitted: GRPO n=16 and n=32 of each model, and the co-trained pairs (GRAFT, HACPO, SGT) under
both placements. Dynamic sampling's extra draws are not modelled (its prediction is a floor), and GRAFT with stored
trajectories is the per-model GRPO n=8 step plus its scoring of the archive's responses.

Usage: python bench/benchmarks/step_time.py [--config config/paper.yaml]; writes bench/results/step_time.json and prints
the table, and the fitted rates beside those the config holds.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from graft.config import load_config
from graft.planning.step_time import cell_steps, gpu_rates, step_seconds

STEPS, GPUS = 174, 4
"""Table 5's runs: three epochs of 7,500 prompts at 128 a step, on four H200s."""
TABLE5 = {
    ("grpo_n8", ("smollm3",)): 17.4,
    ("grpo_n8", ("qwen3",)): 12.5,
    ("grpo_n16", ("smollm3",)): 34.8,
    ("grpo_n16", ("qwen3",)): 22.5,
    ("grpo_n32", ("smollm3",)): 99.5,
    ("grpo_n32", ("qwen3",)): 45.6,
    ("grpo_n8_ds", ("smollm3",)): 40.5,
    ("grpo_n8_ds", ("qwen3",)): 27.4,
    ("graft", ("smollm3", "qwen3")): 43.3,
    ("hacpo", ("smollm3", "qwen3")): 47.1,
    ("sgt", ("smollm3", "qwen3")): 53.1,
    ("replay", ("smollm3",)): 20.0,
    ("replay", ("qwen3",)): 13.3,
}
"""Table 5's "3 epochs (GPU-h)" columns: per model for single-model runs, "Both models" for co-trained pairs."""
FITTED = "grpo_n8"


def seconds(gpu_hours: float) -> float:
    return gpu_hours * 3600 / GPUS / STEPS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/paper.yaml")
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "results" / "step_time.json")
    args = parser.parse_args()
    cfg = load_config(args.config)
    rates = gpu_rates(cfg)
    if rates is None:
        raise SystemExit(f"{args.config}: no GPU peak (slurm.gpu_type, or workflow.gpu_peak_tflops); nothing to price")
    # the fit: generation's seconds are what Table 5's GRPO n=8 step leaves after the priced parts
    probe = dataclasses.replace(cfg.workflow, rollout_tokens_per_s=dict.fromkeys(cfg.models, 1.0))
    probed = dataclasses.replace(cfg, workflow=probe)
    fitted = {}
    for (method, models), gpu_hours in TABLE5.items():
        if method == FITTED:
            (step,) = cell_steps(probed, rates, method, models, "colocated")
            left = seconds(gpu_hours) - (step.scoring + step.update + step.sync)
            fitted[models[0]] = step.generation / left  # generation seconds at 1 token/s over those left
    rollout = {name: fitted.get(name, fitted.get("smollm3")) for name in cfg.models}
    cfg = dataclasses.replace(cfg, workflow=dataclasses.replace(cfg.workflow, rollout_tokens_per_s=rollout))
    rows = []
    for (method, models), gpu_hours in TABLE5.items():
        for placement in ("colocated", "split") if len(models) > 1 else ("colocated",):
            steps = cell_steps(cfg, rates, method, models, placement)
            predicted = step_seconds(steps, placement)
            rows.append(
                {
                    "method": method,
                    "models": list(models),
                    "placement": placement,
                    "fitted": method == FITTED,
                    "paper_s": seconds(gpu_hours),
                    "predicted_s": predicted,
                    "ratio": predicted / seconds(gpu_hours),
                    "parts_s": [{k: getattr(s, k) for k in ("generation", "scoring", "update", "sync")} for s in steps],
                }
            )
    report = {
        "config": args.config,
        "rates": [*cfg.gpu().sources, *rates.sources],
        "fitted_rollout_tokens_per_s": fitted,
        "config_rollout_tokens_per_s": load_config(args.config).workflow.rollout_tokens_per_s,
        "rows": rows,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print("\n".join([*cfg.gpu().sources, *rates.sources]))
    print(f"fitted rollout tokens/s per GPU: {', '.join(f'{k} {v:,.0f}' for k, v in fitted.items())}")
    print("\n| method | models | placement | Table 5 s/step | predicted | ratio |\n|---|---|---|---|---|---|")
    for r in rows:
        mark = " (fitted)" if r["fitted"] else ""
        print(
            f"| {r['method']}{mark} | {' + '.join(r['models'])} | {r['placement']} | {r['paper_s']:.0f} | "
            f"{r['predicted_s']:.0f} | {r['ratio']:.2f} |"
        )


if __name__ == "__main__":
    main()
