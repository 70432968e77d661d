"""Wall time of a GRAFT co-training step under each placement, and the bytes that cross between the split groups.

At the toy's sizes on the CPU, from the same initial models and seed (so the same prompt batches), each run a
``graft train`` of its own with one thread per process:
- each model of the pair alone (GRPO n=8, one process): the floor a split step can approach;
- GRAFT colocated in one process (the models take turns);
- GRAFT colocated over two processes (torchrun; both models sharded over both, still taking turns);
- GRAFT split over two processes (torchrun; one model each, at the same time; the records cross once per step).
Per run: the mean step time after ``--skip`` warm-up steps, and for the split run the mean of ``exchange_bytes``
(what each group's first process sent the other, summed). Prints a table; writes bench/results/placement.json.

Usage: python bench/benchmarks/placement.py [--config config/config.yaml] [--pair P1] [--steps 4] [--skip 1]
Builds the toy world of the config first when it is missing (graft toy build --config config/config.yaml).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/, for needs.py
from needs import graft_train, toy_world

from graft.config import read_yaml
from graft.results import write_text


def train(config: Path, method: str, models: list[str], steps: int, out: Path, processes: int) -> list[dict]:
    """One ``graft train``; its metrics rows."""
    graft_train(config, method, models, steps, out, processes)
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def mean_after(rows: list[dict], key: str, skip: int) -> float:
    steps = sorted({r["step"] for r in rows})[skip:]
    return statistics.fmean(next(r[key] for r in rows if r["step"] == s) for s in steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=Path("config/config.yaml"))
    parser.add_argument("--pair", default=None, help="pair name (default: the config's first)")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--skip", type=int, default=1, help="warm-up steps left out of the means")
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "results" / "placement.json")
    args = parser.parse_args()
    config = toy_world(args.config)
    pair = args.pair or next(iter(config.pairs))
    a, b = config.pairs[pair]
    raw = read_yaml(args.config)
    runs = {
        f"GRPO {a} alone": ("grpo_n8", [a], 1, "colocated"),
        f"GRPO {b} alone": ("grpo_n8", [b], 1, "colocated"),
        "GRAFT colocated, 1 process": ("graft", [a, b], 1, "colocated"),
        "GRAFT colocated, 2 processes": ("graft", [a, b], 2, "colocated"),
        "GRAFT split, 2 processes": ("graft", [a, b], 2, "split"),
    }
    measured = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, (label, (method, models, processes, placement)) in enumerate(runs.items()):
            path = Path(tmp) / f"config{i}.yaml"
            scale = {**raw.get("scale", {}), "processes": processes, "placement": placement}
            path.write_text(yaml.safe_dump({**raw, "scale": scale}))
            rows = train(path, method, models, args.steps, Path(tmp) / f"run{i}", processes)
            measured[label] = {
                "step_s": mean_after(rows, "step_time_s", args.skip),
                "exchange_bytes": mean_after(rows, "exchange_bytes", args.skip) if placement == "split" else 0.0,
            }
            print(f"{label}: {measured[label]['step_s']:.2f} s per step", file=sys.stderr)
    slower = max(measured[f"GRPO {a} alone"]["step_s"], measured[f"GRPO {b} alone"]["step_s"])
    print(
        f"pair {pair} ({a}, {b}), {config.train.prompts_per_step} prompts x n=8, one thread per process, "
        f"mean over steps {args.skip}..{args.steps - 1}, {os.cpu_count()} CPUs"
    )
    print(f"{'run':<32}{'s/step':>9}{'/ slower alone':>16}{'bytes crossing':>16}")
    for label, row in measured.items():
        print(f"{label:<32}{row['step_s']:>9.2f}{row['step_s'] / slower:>16.2f}{row['exchange_bytes']:>16,.0f}")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    result = {
        "commit": commit,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "pair": pair,
        "models": [a, b],
        "prompts_per_step": config.train.prompts_per_step,
        "steps": args.steps,
        "skip": args.skip,
        "runs": measured,
        "slower_model_alone_s": slower,
    }
    write_text(args.out, json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
