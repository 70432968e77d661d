"""When does off-policy awareness pay? The sweep over the mismatch knob (``toy.mismatch``), outside the main job.

For each value the embedded default is cut to P1 (GRPO n=8 of both models; GRAFT, HACPO, SGT and "w/o
compatibility gate" on the pair; every cell at --seeds) with the world's models written in dialects 1 and 2 at that
mismatch, and run through the workflow into a results tree of its own (resumable: a rerun skips what is done). Then
each method's difference to GRPO n=8 on the test families, with its paired-bootstrap 95% interval over problems and
the difference seed by seed, at the final and the validation-selected checkpoints. Prints a Markdown table; writes
bench/results/mismatch_sweep.{json,md,png}.

Usage: python bench/experiments/mismatch_sweep.py [--values 0 0.25 0.5 1] [--seeds 0 1 2] [--toy-seed 0] [--cores 2]
           [--out results/mismatch_sweep] [--config config/config.yaml] [--worlds /tmp/graft-mismatch]
About 20 minutes per value on 2 cores (two warm-ups, 18 training cells; 75 measured for the four defaults).
--worlds takes the toy worlds that bench/experiments/mismatch_probe.py built (DIR/<value>/toy, the same settings at
toy seed 0) instead of building them again.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
from pathlib import Path

import yaml
from mismatch_probe import with_mismatch

METHODS = ("graft", "hacpo", "sgt", "graft_no_gate")
RULES = ("final", "val_best")
DIALECTS = {"smol": 1, "qwen": 2}


def world_config(base: dict, value: float, seeds: list[int], toy_seed: int, root: Path) -> dict:
    """The default cut to the sweep's cells, at one mismatch value, writing into ``root``."""
    config = with_mismatch(base, root, value, DIALECTS)
    config["models"] = {m: config["models"][m] for m in DIALECTS}
    config["pairs"] = {"P1": list(DIALECTS)}
    config["toy"]["seed"] = toy_seed
    config["toy"]["models"] = {m: config["toy"]["models"][m] for m in DIALECTS}
    config["workflow"].update(
        grpo=["grpo_n8"],
        pair_methods=[m for m in METHODS if not m.startswith("graft_")],
        ablations=[m for m in METHODS if m.startswith("graft_")],
        replay=False,
        baseline_models=list(DIALECTS),
        baseline_pairs=["P1"],
        main_seeds=seeds,
        other_seeds=seeds,
        method_seeds={},
        cell_seeds={},  # the default's name cells that this cut drops
        main_cells=[],  # rule all runs every cell of the cut
    )
    return config


def deltas(config_path: Path) -> list[dict]:
    """Each method's difference to GRPO n=8 on P1 (test families), per model and checkpoint rule."""
    from graft.config import load_config
    from graft.report.build import report_context

    cfg = load_config(config_path)
    ctx = report_context(cfg, Path(cfg.results))
    rows = []
    for rule in RULES:
        for model in DIALECTS:
            base = ctx.cell("grpo_n8", model, model, rule=rule)
            for method in METHODS:
                ours = ctx.cell(method, "P1", model, rule=rule)
                if ours.mean is None or base.mean is None:
                    continue
                lo, hi = ctx.bootstrap(ours, base) or (None, None)
                # the same RL seed's two runs side by side: the spread between seeds, which the interval over
                # problems does not hold
                mine, theirs = (dict(zip(a.selected.seed, a.values, strict=True)) for a in (ours, base))
                per_seed = [round(mine[k] - theirs[k], 2) for k in sorted(mine) if k in theirs]
                rows.append(
                    {"rule": rule, "model": model, "method": method, "seeds": len(ours.selected),
                     "score": round(ours.mean, 2), "grpo_n8": round(base.mean, 2),
                     "delta": round(ours.mean - base.mean, 2), "ci": [lo, hi], "per_seed": per_seed}
                )  # fmt: skip
    return rows


def figure(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(RULES), len(DIALECTS), figsize=(10, 7), sharex=True, squeeze=False)
    for i, rule in enumerate(RULES):
        for j, model in enumerate(DIALECTS):
            ax = axes[i][j]
            for method in METHODS:
                chosen = sorted((r for r in rows if (r["rule"], r["model"], r["method"]) == (rule, model, method)),
                                key=lambda r: r["mismatch"])  # fmt: skip
                if not chosen:
                    continue
                x = [r["mismatch"] for r in chosen]
                y = [r["delta"] for r in chosen]
                err = [[r["delta"] - r["ci"][0] for r in chosen], [r["ci"][1] - r["delta"] for r in chosen]]
                ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=method)
            ax.axhline(0, color="grey", lw=0.8)
            ax.set_title(f"{model}, {rule} checkpoint")
            ax.set_xlabel("toy.mismatch")
            ax.set_ylabel("Δ vs GRPO n=8 (points)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def markdown(rows: list[dict]) -> str:
    lines = ["| mismatch | checkpoint | model | method | seeds | score | GRPO n=8 | Δ | Δ 95% CI | Δ per seed |"]
    lines.append("|---" * 10 + "|")
    for r in sorted(rows, key=lambda r: (r["rule"], r["model"], r["mismatch"], METHODS.index(r["method"]))):
        lo, hi = r["ci"]
        ci = "—" if lo is None else f"[{lo:+.2f}, {hi:+.2f}]"
        lines.append(
            f"| {r['mismatch']:g} | {r['rule']} | {r['model']} | {r['method']} | {r['seeds']} | {r['score']:.2f} "
            f"| {r['grpo_n8']:.2f} | {r['delta']:+.2f} | {ci} | {' / '.join(f'{d:+.1f}' for d in r['per_seed'])} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=Path("config/config.yaml"))
    parser.add_argument("--values", type=float, nargs="+", default=[0.0, 0.25, 0.5, 1.0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--toy-seed", type=int, default=0)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("results/mismatch_sweep"))
    parser.add_argument(
        "--worlds", type=Path, help="bench/experiments/mismatch_probe.py's --work, to reuse its built worlds"
    )
    parser.add_argument("--report", type=Path, default=Path(__file__).parents[1] / "results" / "mismatch_sweep")
    args = parser.parse_args()
    if any(not 0 <= v <= 1 for v in args.values):
        raise SystemExit(f"mismatch_sweep.py: --values {args.values} must lie in [0, 1]")
    base = yaml.safe_load(args.config.read_text())
    rows = []
    for value in args.values:
        root = (args.out / f"toyseed{args.toy_seed}" / f"m{value:g}").resolve()
        root.mkdir(parents=True, exist_ok=True)
        path = root / "config.yaml"
        path.write_text(yaml.safe_dump(world_config(base, value, args.seeds, args.toy_seed, root), sort_keys=False))
        built = args.worlds / f"{value:g}" / "toy" if args.worlds else None
        if built and not (root / "toy").exists():
            if args.toy_seed != 0:
                raise SystemExit("mismatch_sweep.py: --worlds holds the probe's worlds of toy seed 0 only")
            shutil.copytree(built / "data", root / "toy" / "data")
            for model in DIALECTS:
                shutil.copytree(built / "models" / model, root / "toy" / "models" / model)
        command = ["snakemake", "all", "--cores", str(args.cores), "--quiet", "rules", "--configfile", str(path)]
        if subprocess.run(command).returncode:
            raise SystemExit(f"mismatch_sweep.py: the workflow failed at mismatch {value:g}; its logs: {root}/logs")
        rows += [{"mismatch": value, **r} for r in deltas(path)]
        args.report.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    table = markdown(rows)
    print(table)
    args.report.with_suffix(".md").write_text(table)
    figure(rows, args.report.with_suffix(".png"))


if __name__ == "__main__":
    main()
