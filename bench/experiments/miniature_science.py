"""Does the miniature show what the paper claims? The miniature's claims, recomputed from a results tree.

1. RL works: GRPO n=8 beats the base model by at least 3 points on the benchmark average, 95% paired-bootstrap
   interval above 0 (for every model of every pair).
2. GRAFT works: on each pair, GRAFT beats GRPO n=8 by at least 3 points for both models, interval above 0.
3. The paper's ranking: on the first pair, GRAFT above each of HACPO, SGT, "w/o compatibility gate" and
   "success-only" for both models, interval above 0 (no minimum gain), for each of them the results tree holds.
   GRAFT - GRPO n=32 is printed beside them and not judged (reported, not required).

Each claim is checked at the final checkpoint and at the validation-selected one (never the best test
checkpoint). Differences average the seeds that both sides ran (where one side ran more, as GRPO n=8's three beside
P2's one GRAFT seed, the extra runs are left out, so a difference never sets a seed mean against one run); the
interval resamples problems within each benchmark (graft.report.stats.paired_bootstrap), so it does not see the
spread between RL seeds: the difference of each seed (same prompt order and sampling seed on both sides) is printed
beside it. The half-width of each interval is
printed too (the target: at most 2 points). Prints a table and writes the rows as JSON.

Usage: python bench/experiments/miniature_science.py [--config config/config.yaml] [--results DIR] [--out FILE]
Needs a finished run of the workflow: snakemake --cores 2 all
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from graft.config import load_config
from graft.report.build import report_context
from graft.report.stats import on_common_seeds
from graft.report.tables import ReportContext
from graft.results import ResultsTree, write_text

MIN_GAIN = 3.0
RULES = ("final", "val_best")
RANKED = ("hacpo", "sgt", "graft_no_gate", "graft_success_only")
"""Claim 3's methods, each of which the paper puts below GRAFT on both models of its first pair."""
VERDICT = {True: "yes", False: "NO", None: "-"}
NAMES = {"hacpo": "HACPO", "sgt": "SGT", "graft_no_gate": "w/o gate", "graft_success_only": "success-only"}


def comparisons(cfg) -> list[tuple[str, str, str, str, str, str, float | None]]:
    """(claim, model, method, cell, baseline method, baseline cell, gain needed or None when only reported) for
    every comparison the claims make."""
    rows = []
    models = [m for m in cfg.models if any(m in members for members in cfg.pairs.values())]
    rows += [("1 RL works", m, "grpo_n8", m, "base", m, MIN_GAIN) for m in models]
    for pair, members in cfg.pairs.items():
        rows += [(f"2 GRAFT works ({pair})", m, "graft", pair, "grpo_n8", m, MIN_GAIN) for m in members]
    w = cfg.workflow
    pair = cfg.ablations_pair()
    ranked = [m for m in RANKED if m in w.pair_methods or m in w.ablations]
    for m in cfg.pairs.get(pair, []):
        rows += [(f"3 above {NAMES[x]} ({pair})", m, "graft", pair, x, pair, 0.0) for x in ranked]
        if "grpo_n32" in w.grpo:
            rows.append((f"- vs GRPO n=32 ({pair})", m, "graft", pair, "grpo_n32", m, None))
    return rows


def evaluate_claims(ctx: ReportContext, cfg) -> list[dict]:
    out = []
    for claim, model, method, cell, base_method, base_cell, gain in comparisons(cfg):
        for rule in RULES:
            ours, base = ctx.cell(method, cell, model, rule=rule), ctx.cell(base_method, base_cell, model, rule=rule)
            ran = [len(ours.selected), len(base.selected)]
            a, b = on_common_seeds(ours, base)
            if a.mean is None or b.mean is None:
                out.append({"claim": claim, "model": model, "rule": rule, "missing": True})
                continue
            low, high = ctx.bootstrap(a, b) or (float("nan"), float("nan"))
            diff = a.mean - b.mean
            # the interval resamples problems only; seed by seed (same prompt order, same sampling seed) shows how
            # much the difference moves between RL runs
            ours_by_seed = dict(zip(a.selected.seed, a.values, strict=True))
            base_by_seed = dict(zip(b.selected.seed, b.values, strict=True))
            out.append(
                {
                    "claim": claim,
                    "model": model,
                    "rule": rule,
                    "ours": a.mean,
                    "baseline": b.mean,
                    "seeds": ran,
                    "paired_seeds": [int(seed) for seed in ours_by_seed],
                    "diff": diff,
                    "ci": [low, high],
                    "half_width": (high - low) / 2,
                    "seed_diffs": {int(seed): ours_by_seed[seed] - base_by_seed[seed] for seed in ours_by_seed},
                    "holds": None if gain is None else bool(diff >= gain and low > 0),
                }
            )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=Path("config/config.yaml"))
    parser.add_argument("--results", type=Path, help="results tree (default: the config's)")
    parser.add_argument("--out", type=Path, help="JSON file (default: bench/results/miniature_science_<seed>.json)")
    args = parser.parse_args()
    cfg = load_config(args.config)
    results = args.results or Path(cfg.results)
    if not ResultsTree(results).eval_root.is_dir():
        print(f"no evaluations under {results}; run the workflow first: snakemake --cores 2 all", file=sys.stderr)
        return 2
    rows = evaluate_claims(report_context(cfg, results), cfg)
    toy_seed = cfg.toy.seed if cfg.toy else "-"
    print(f"results {results} (toy seed {toy_seed}), gain needed {MIN_GAIN} points (claims 1-2)")
    head = f"{'claim':<28} {'model':<6} {'checkpoint':<10} {'ours':>6} {'base':>6} {'diff':>6}"
    print(f"{head} {'95% CI':>16} {'±':>5}  holds  diff per seed")
    for r in rows:
        if r.get("missing"):
            print(f"{r['claim']:<28} {r['model']:<6} {r['rule']:<10} missing")
            continue
        ci = f"[{r['ci'][0]:+.2f}, {r['ci'][1]:+.2f}]"
        print(
            f"{r['claim']:<28} {r['model']:<6} {r['rule']:<10} {r['ours']:6.2f} {r['baseline']:6.2f} {r['diff']:+6.2f} "
            f"{ci:>16} {r['half_width']:5.2f}  {VERDICT[r['holds']]:<5}"
            + " ".join(f"{d:+.1f}" for d in r["seed_diffs"].values())
        )
    seed = cfg.toy.seed if cfg.toy else 0
    out = args.out or Path(__file__).parents[1] / "results" / f"miniature_science_toyseed{seed}.json"
    write_text(out, json.dumps({"results": str(results), "toy_seed": seed, "rows": rows}, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
