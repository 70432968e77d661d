"""The complementarity pre-flight (paper Figure 1 at step 0) for every pair of the embedded default, on the five
toy test sets with n = 8. Prints a Markdown table and writes bench/results/complementarity.{json,md}.

Usage: python bench/experiments/complementarity.py [--config config/config.yaml] [--results DIR-with-built-toy-models]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/, for needs.py
from needs import toy_world


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=Path("config/config.yaml"))
    parser.add_argument("--results", help="results directory holding toy/ (default: the config's)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "results" / "complementarity")
    args = parser.parse_args()
    toy_world(args.config, args.results)
    config = yaml.safe_load(args.config.read_text())
    if args.results:
        config["results"] = args.results
    root = Path(config["results"]) / "toy" / "data" / "test"
    reports = {}
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "config.yaml"
        cfg.write_text(yaml.safe_dump(config))
        for pair, (a, b) in config["pairs"].items():
            out = Path(tmp) / f"{pair}.json"
            data = [arg for f in sorted(root.glob("*.jsonl")) for arg in ("--data", str(f))]
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "graft.cli",
                    "complementarity",
                    "--config",
                    str(cfg),
                    "--models",
                    f"{a},{b}",
                    *data,
                    "--out",
                    str(out),
                ],
                check=True,
                capture_output=True,
            )
            reports[pair] = json.loads(out.read_text())
    lines = [
        "| pair | direction (receiver last) | receiver all-fail | peer mixed on them | peer solved | candidates "
        "| selected (balanced) | gate pass | pass if correct / incorrect | s p25 / p50 / p75 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for pair, r in reports.items():
        for direction, d in r["directions"].items():
            s = d["s_quantiles"] or {}
            lines.append(
                f"| {pair} | {direction} | {d['all_fail']}/{r['prompts']} | {d['peer_mixed_given_all_fail']:.0%} "
                f"| {d['peer_solved_given_all_fail']:.0%} | {d['candidates']} | {d['selected_after_balancing']} "
                f"| {d['gate_pass_rate'] if d['gate_pass_rate'] is None else format(d['gate_pass_rate'], '.0%')} "
                f"| {d['gate_pass_rate_correct']} / {d['gate_pass_rate_incorrect']} "
                f"| {s.get('p25')} / {s.get('p50')} / {s.get('p75')} |"
            )
    accuracy = {pair: r["accuracy_by_set"] for pair, r in reports.items()}
    table = "\n".join(lines) + "\n"
    print(table)
    print(json.dumps(accuracy.get("P1", accuracy), indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(reports, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(table)


if __name__ == "__main__":
    main()
