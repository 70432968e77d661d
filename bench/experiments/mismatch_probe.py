"""The complementarity pre-flight of one pair at several values of the mismatch knob (``toy.mismatch``):
the pair's two toy models are rebuilt at each value with dialects of their own, and the gate's score distribution
is reported for the peer's correct and wrong responses. Prints a Markdown table; writes
bench/results/mismatch_probe.{json,md}.

Usage: python bench/experiments/mismatch_probe.py [--config config/config.yaml] [--pair P1] [--values 0 0.25 0.5 1]
           [--dialects 1 2] [--work DIR]
Each value's world and its pre-flight report are made under --work (default /tmp/graft-mismatch/<value>) and reused
when they are there.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import yaml


def with_mismatch(config: dict, root: Path, value: float, dialects: dict[str, int]) -> dict:
    """A copy of ``config`` writing into ``root``, its world at mismatch ``value`` with these models' dialects (the
    toy settings that decide the built world; bench/experiments/mismatch_sweep.py reuses worlds made with them)."""
    config = json.loads(json.dumps(config))
    config["results"] = str(root)
    config["toy"]["mismatch"] = value
    for name, dialect in dialects.items():
        config["toy"]["models"][name]["dialect"] = dialect
    return config


def build(config: dict, pair: list[str], root: Path, value: float, dialects: list[int]) -> Path:
    """The world of one mismatch value (data and the pair's models) under ``root``; returns its config file."""
    config = with_mismatch(config, root, value, dict(zip(pair, dialects, strict=True)))
    path = root / "config.yaml"
    root.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    graft = [sys.executable, "-m", "graft.cli", "toy"]
    if not (root / "toy" / "data" / "warmup.jsonl").is_file():
        subprocess.run([*graft, "data", "--config", str(path), "--out", str(root / "toy")], check=True)
    missing = [m for m in pair if not (root / "toy" / "models" / m).is_dir()]
    # the two warm-ups side by side on one thread each, as the workflow runs them
    model = [*graft, "model", "--config", str(path), "--out", str(root / "toy"), "--threads", "1"]
    jobs = [subprocess.Popen([*model, "--name", m]) for m in missing]
    if any(job.wait() for job in jobs):
        raise SystemExit(f"mismatch_probe.py: a toy model build failed under {root}")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=Path("config/config.yaml"))
    parser.add_argument("--pair", default="P1")
    parser.add_argument("--values", type=float, nargs="+", default=[0.0, 0.25, 0.5, 1.0])
    parser.add_argument("--dialects", type=int, nargs=2, default=[1, 2], help="the pair's dialects, in pair order")
    parser.add_argument("--work", type=Path, default=Path("/tmp/graft-mismatch"))
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "results" / "mismatch_probe")
    args = parser.parse_args()
    config = yaml.safe_load(args.config.read_text())
    if args.pair not in config.get("pairs", {}):
        raise SystemExit(f"mismatch_probe.py: --pair {args.pair!r} is not a pair of {args.config}")
    pair = config["pairs"][args.pair]
    reports = {}
    for value in args.values:
        root = args.work / f"{value:g}"
        path = build(config, pair, root, value, args.dialects)
        tests = sorted((root / "toy" / "data" / "test").glob("*.jsonl"))
        out = root / "complementarity.json"
        command = [sys.executable, "-m", "graft.cli", "complementarity", "--config", str(path)]
        command += ["--models", ",".join(pair), *[a for f in tests for a in ("--data", str(f))], "--out", str(out)]
        if not out.is_file():
            subprocess.run(command, check=True, capture_output=True)
        reports[f"{value:g}"] = json.loads(out.read_text())
    lines = [
        "| mismatch | direction (receiver last) | receiver all-fail | candidates | gate pass | pass if correct / "
        "incorrect | s p25 / p50 / p75 | s p50 if correct / incorrect | accuracy (each model) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for value, r in reports.items():
        accuracy = " / ".join(f"{m} {a:.3f}" for m, a in r.get("accuracy", {}).items())
        for direction, d in r["directions"].items():
            s = d["s_quantiles"] or {}
            right, wrong = (d.get(f"s_quantiles_{k}") or {} for k in ("correct", "incorrect"))
            rate = d["gate_pass_rate"]
            lines.append(
                f"| {value} | {direction} | {d['all_fail']}/{r['prompts']} | {d['candidates']} "
                f"| {'-' if rate is None else format(rate, '.0%')} "
                f"| {d['gate_pass_rate_correct']} / {d['gate_pass_rate_incorrect']} "
                f"| {s.get('p25')} / {s.get('p50')} / {s.get('p75')} | {right.get('p50')} / {wrong.get('p50')} "
                f"| {accuracy} |"
            )
    table = "\n".join(lines) + "\n"
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(reports, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(table)


if __name__ == "__main__":
    main()
