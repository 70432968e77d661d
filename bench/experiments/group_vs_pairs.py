"""What a third model adds: the three toy models co-trained as one group against each of their pairs and GRPO n=8.

For each model of the group, at the final and at the validation-selected checkpoint: the group's score (pass@1 %,
the test benchmarks' average), each pair's that holds the model, GRPO n=8's, and the group's difference from each
with its 95% paired-bootstrap interval over problems (graft.report.stats.paired_bootstrap) and the difference
seed by seed. The best pair of a model is the one with the higher validation score at that checkpoint (chosen
without the test sets); the group beats it when the difference and its interval's lower end are above 0. From the
group's training metrics: how many all-fail prompts each model took from each peer over the run (how often the
weak model is the chosen peer). Prints the tables and writes bench/results/group_vs_pairs.json.

Usage: python bench/experiments/group_vs_pairs.py [--group G1]
           [--config config/config.yaml --overlay config/overlays/group.yaml]
Needs the evaluations of those cells; --targets prints them for Snakemake (the targets before --configfile, which
takes several files; the whole overlay's `all` works too):
  snakemake $(python bench/experiments/group_vs_pairs.py --targets) --cores 2 \
      --configfile config/config.yaml config/overlays/group.yaml
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from graft.config import config_from_dict, read_yaml
from graft.report.build import report_context
from graft.report.stats import SeedAggregate, on_common_seeds
from graft.results import ResultsTree, write_text
from graft.scores import VALIDATION

RULES = ("final", "val_best")


def merged(base: dict, overlay: dict) -> dict:
    """Snakemake's merge of two config files: mappings key by key, anything else replaced."""
    out = dict(base)
    for key, value in overlay.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def difference(ctx, ours: SeedAggregate, base: SeedAggregate) -> dict:
    a, b = on_common_seeds(ours, base)
    low, high = ctx.bootstrap(a, b) or (float("nan"), float("nan"))
    seeds = {int(s): x - y for s, x, y in zip(a.selected.seed, a.values, b.values, strict=True)}
    return {"ours": a.mean, "base": b.mean, "diff": a.mean - b.mean, "ci": [low, high], "seed_diffs": seeds}


def transfers(metrics: pd.DataFrame, model: str, peers: list[str]) -> dict[str, float]:
    """Prompts ``model`` took from each peer, summed over steps, averaged over seeds."""
    rows = metrics[metrics.model == model]
    per_seed = rows.groupby("seed")[[f"received_from_{p}" for p in peers]].sum()
    return {p: float(per_seed[f"received_from_{p}"].mean()) for p in peers}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=Path("config/config.yaml"))
    parser.add_argument("--overlay", type=Path, default=Path("config/overlays/group.yaml"))
    parser.add_argument("--group", default="G1")
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "results" / "group_vs_pairs.json")
    parser.add_argument("--targets", action="store_true", help="print the evaluation directories it needs, and stop")
    args = parser.parse_args()
    cfg = config_from_dict(merged(read_yaml(args.config), read_yaml(args.overlay)))
    results = Path(cfg.results)
    members = cfg.groups[args.group]
    if args.targets:
        tree, w = ResultsTree(results), cfg.workflow
        cells = [("grpo_n8", m, (m,)) for m in members] + [("graft", args.group, tuple(members))]
        cells += [("graft", p, tuple(m)) for p, m in cfg.pairs.items() if set(m) <= set(members)]
        print(" ".join(str(tree.eval_dir(meth, c, s)) for meth, c, ms in cells for s in w.seeds_of(meth, c, ms)))
        return 0
    if not ResultsTree(results).eval_root.is_dir():
        print(f"no evaluations under {results}; run: snakemake --cores 2 all --configfile {args.config} "
              f"{args.overlay}", file=sys.stderr)  # fmt: skip
        return 2
    ctx = report_context(cfg, results)
    rows = []
    for model in members:
        pairs = [p for p, m in cfg.pairs.items() if model in m]
        for rule in RULES:
            group = ctx.cell("graft", args.group, model, rule=rule)
            val = {p: ctx.cell("graft", p, model, column=VALIDATION, rule=rule).mean for p in pairs}
            best = max(pairs, key=lambda p: val[p] if val[p] is not None else float("-inf"))
            row = {"model": model, "rule": rule, "group": group.mean, "seeds": [int(s) for s in group.selected.seed]}
            row["grpo_n8"] = difference(ctx, group, ctx.cell("grpo_n8", model, model, rule=rule))
            row["pairs"] = {p: difference(ctx, group, ctx.cell("graft", p, model, rule=rule)) for p in pairs}
            row["best_pair"] = best
            row["beats_best_pair"] = bool(row["pairs"][best]["diff"] > 0 and row["pairs"][best]["ci"][0] > 0)
            rows.append(row)
    metrics = ctx.metrics("graft", args.group)
    taken = {m: transfers(metrics, m, [p for p in members if p != m]) for m in members}
    print(f"group {args.group} ({', '.join(members)}) against its pairs and GRPO n=8, {results}")
    print(f"{'model':<6} {'checkpoint':<10} {'group':>6}  {'vs':<14}{'other':>7} {'diff':>7} {'95% CI':>17}  per seed")
    for r in rows:
        versus = {"GRPO n=8": r["grpo_n8"], **{f"GRAFT {p}" + (" *" if p == r["best_pair"] else ""): d
                                                for p, d in r["pairs"].items()}}  # fmt: skip
        for i, (name, d) in enumerate(versus.items()):
            head = f"{r['model']:<6} {r['rule']:<10} {r['group']:6.2f}" if i == 0 else " " * 24
            ci = f"[{d['ci'][0]:+.2f}, {d['ci'][1]:+.2f}]"
            seeds = " ".join(f"{v:+.1f}" for v in d["seed_diffs"].values())
            print(f"{head}  {name:<14}{d['base']:7.2f} {d['diff']:+7.2f} {ci:>17}  {seeds}")
        print(f"{'':<24}  beats its best pair (*, by validation): {'yes' if r['beats_best_pair'] else 'no'}")
    print("all-fail prompts taken from each peer over the run (mean over seeds):")
    for m, peers in taken.items():
        total = sum(peers.values())
        shares = ", ".join(f"{p} {v:.1f} ({100 * v / total:.0f}%)" if total else f"{p} 0" for p, v in peers.items())
        print(f"  {m}: {shares}")
    write_text(args.out, json.dumps({"results": str(results), "group": args.group, "rows": rows,
                                     "taken": taken}, indent=2) + "\n")  # fmt: skip
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
