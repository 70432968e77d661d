"""How large must the evaluation be? Projects the 95% half-width of the miniature's paired differences for other
evaluation sizes, from a finished run's per-sample evaluation records.

For each comparison (GRPO n=8 against the base model, GRAFT against GRPO n=8 on the first pair, per model; final
checkpoints) and each benchmark, the variance of the per-problem difference splits into the spread of the true
effect between problems (H) and the sampling noise of each side (one response's variance p(1 - p), averaged
over problems, over the number of responses that side averages: seeds x k). A design with N problems per
benchmark, k samples per problem and s_a, s_b evaluated seeds then has

    half-width = 1.96 * sqrt(sum_b [H_b + V_a,b / (s_a k) + V_b,b / (s_b k)] / N) / B * 100   (points)

which is the normal approximation of graft.report.stats.paired_bootstrap (the first row, the measured design,
shows how close it is). Within-run sampling variance needs k >= 2 in the measured run.

Usage: python bench/experiments/eval_noise.py --results DIR [--pair P1] [--out bench/results/eval_noise.md]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from graft.report.load import load_evaluations
from graft.report.stats import aggregate, paired_bootstrap
from graft.results import write_text
from graft.scores import VALIDATION, checkpoint_scores, select

DESIGNS = [  # (problems per benchmark, samples per problem, evaluated seeds of the base model)
    (64, 4, 1),
    (200, 4, 1),
    (200, 4, 3),
    (256, 2, 3),
    (320, 1, 3),
    (384, 1, 3),
    (512, 1, 3),
]
TRAINED_SEEDS = 3


def _per_problem(samples: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Per (benchmark, problem): pass rate averaged over ``runs`` and one response's variance within a run."""
    rows = samples.merge(runs[["method", "cell", "seed", "model", "step"]])
    rows = rows[rows.benchmark != VALIDATION]
    per_run = rows.groupby(["seed", "benchmark", "problem"])["correct"].agg(["mean", "var", "count"])
    return per_run.groupby(["benchmark", "problem"]).agg(rate=("mean", "mean"), var=("var", "mean"), k=("count", "min"))


def components(samples: pd.DataFrame, a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Per benchmark: H (spread of the effect between problems) and each side's one-response variance."""
    pa, pb = _per_problem(samples, a), _per_problem(samples, b)
    joined = pa.add_suffix("_a").join(pb.add_suffix("_b"), how="inner")
    k = int(joined[["k_a", "k_b"]].min().min())
    if k < 2:
        raise SystemExit(f"eval_noise: the run has {k} sample per problem; the within-run variance needs k >= 2")
    out = []
    for bench, g in joined.groupby(level="benchmark"):
        diff = g.rate_a - g.rate_b
        sampling = g.var_a.mean() / (len(a) * k) + g.var_b.mean() / (len(b) * k)
        out.append(
            {
                "benchmark": bench,
                "problems": len(g),
                "total": float(diff.var(ddof=1)),
                "between_problems": max(float(diff.var(ddof=1) - sampling), 0.0),
                "var_a": float(g.var_a.mean()),
                "var_b": float(g.var_b.mean()),
            }
        )
    return pd.DataFrame(out)


def half_width(comp: pd.DataFrame, problems: int, k: int, seeds_a: int, seeds_b: int) -> float:
    per_bench = comp.between_problems + comp.var_a / (seeds_a * k) + comp.var_b / (seeds_b * k)
    return float(1.96 * np.sqrt(per_bench.sum() / problems) / len(comp) * 100)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--pair", default="P1")
    parser.add_argument("--out", type=Path, default=Path("bench/results/eval_noise.md"))
    args = parser.parse_args()
    if not (args.results / "eval").is_dir():
        print(f"eval_noise: {args.results} has no eval/ directory; run the workflow first", file=sys.stderr)
        return 2
    samples, scores = load_evaluations(args.results)
    final = select(checkpoint_scores(scores), "final")
    models = sorted(final[(final.method == "graft") & (final.cell == args.pair)].model.unique())

    def runs(method, cell, model):
        return aggregate(final, method, cell, model).selected

    comparisons = []
    for model in models:
        comparisons.append((f"RL gain {model}", runs("grpo_n8", model, model), runs("base", model, model), True))
        comparisons.append(
            (f"GRAFT - GRPO {model}", runs("graft", args.pair, model), runs("grpo_n8", model, model), False)
        )
    lines = [
        f"# Evaluation size and the 95% half-width (points), from {args.results}",
        "",
        "measured: paired bootstrap of the run itself; the rows below project the normal approximation",
        "",
        "| comparison | measured | " + " | ".join(f"N={n} k={k} base seeds={s}" for n, k, s in DESIGNS) + " |",
        "|---|---:|" + "---:|" * len(DESIGNS),
    ]
    record = []
    for name, a, b, against_base in comparisons:
        comp = components(samples, a, b)
        low, high = paired_bootstrap(samples, a, b) or (float("nan"), float("nan"))
        projected = [half_width(comp, n, k, TRAINED_SEEDS, s if against_base else TRAINED_SEEDS) for n, k, s in DESIGNS]
        lines.append(f"| {name} | {(high - low) / 2:.2f} | " + " | ".join(f"{p:.2f}" for p in projected) + " |")
        record.append(
            {
                "comparison": name,
                "measured_half_width": (high - low) / 2,
                "components": comp.to_dict("records"),
                "projected": [
                    {"problems": n, "k": k, "base_seeds": s, "half_width": p}
                    for (n, k, s), p in zip(DESIGNS, projected, strict=True)
                ],
            }
        )
    text = "\n".join(lines) + "\n"
    print(text)
    write_text(args.out, text)
    write_text(args.out.with_suffix(".json"), json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
