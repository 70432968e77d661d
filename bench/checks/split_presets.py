"""Every co-training preset under the split placement against the same run colocated in one process.

For each preset with a live peer (GRAFT, HACPO, SGT and every ablation), a few steps of the config's first pair
from the same models and seed: colocated in one process, and split over two processes (torchrun, gloo; one model
each). With one process per model the two must agree bit for bit: the metrics without timings and the split-only
``exchange_bytes``, and every weight of the last checkpoint. Prints a table; writes bench/results/split_presets.json.

Usage: python bench/checks/split_presets.py [--config config/config.yaml] [--pair P1] [--steps 2]
Builds the toy world of the config first when it is missing (graft toy build --config config/config.yaml).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/, for needs.py
from needs import graft_train, toy_world
from safetensors.torch import load_file

from graft.config import read_yaml
from graft.methods import PRESETS
from graft.results import LAYOUT_METRICS, TIMING_METRICS, write_text


def metrics(out: Path) -> list[dict]:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIMING_METRICS | LAYOUT_METRICS} for r in rows]


def same_weights(a: Path, b: Path, models: list[str], step: int) -> bool:
    for model in models:
        name = f"checkpoints/step_{step:05d}/{model}/model.safetensors"
        x, y = load_file(a / name), load_file(b / name)
        if x.keys() != y.keys() or any(not x[k].equal(y[k]) for k in x):
            return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=Path("config/config.yaml"))
    parser.add_argument("--pair", default=None, help="pair name (default: the config's first)")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "results" / "split_presets.json")
    args = parser.parse_args()
    config = toy_world(args.config)
    pair = args.pair or next(iter(config.pairs))
    models = list(config.pairs[pair])
    raw = read_yaml(args.config)
    live = [name for name, preset in PRESETS.items() if preset.method.peer == "live"]
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for placement, processes in (("colocated", 1), ("split", 2)):
            paths[placement] = Path(tmp) / f"{placement}.yaml"
            scale = {**raw.get("scale", {}), "processes": processes, "placement": placement}
            # checkpoints at the last step only
            train_section = {**raw["train"], "checkpoint_every": args.steps}
            paths[placement].write_text(yaml.safe_dump({**raw, "scale": scale, "train": train_section}))
        for method in live:
            one, two = Path(tmp) / method / "one", Path(tmp) / method / "split"
            graft_train(paths["colocated"], method, models, args.steps, one, 1)
            graft_train(paths["split"], method, models, args.steps, two, 2)
            rows[method] = {
                "metrics_equal": metrics(one) == metrics(two),
                "weights_equal": same_weights(one, two, models, args.steps),
                "selected": sum(r.get("selected", 0) for r in metrics(one)),
            }
            print(f"{method}: {rows[method]}", file=sys.stderr)
    print(f"pair {pair} ({', '.join(models)}), {args.steps} steps: colocated in 1 process against split over 2")
    print(f"{'preset':<30}{'metrics':>10}{'weights':>10}{'prompts selected':>18}")
    for method, row in rows.items():
        verdict = {True: "equal", False: "DIFFER"}
        print(
            f"{method:<30}{verdict[row['metrics_equal']]:>10}{verdict[row['weights_equal']]:>10}{row['selected']:>18}"
        )
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    result = {"commit": commit, "machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "pair": pair, "rows": rows}
    write_text(args.out, json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
