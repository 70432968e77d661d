"""Time the README's main job, `snakemake --cores 2 all` on the embedded default, from nothing (issue 6: at most
20 minutes on 2 cores, goal 10). Prints per-rule job counts and seconds and writes
bench/results/workflow_time.json; keeps the run's report under bench/results/ for the README's results table.

Usage: python bench/workflow_time.py [--results /tmp/graft-timing] [--cores 2]
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from graft.results import write_text

STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d+:\d+:\d+ \d+)\]")


def rule_seconds(log: str) -> dict[str, list[int]]:
    """Wall seconds of every finished job, by rule, from Snakemake's log."""
    now, start, rule_of, pending = None, {}, {}, None
    out: dict[str, list[int]] = collections.defaultdict(list)
    for line in log.splitlines():
        if m := STAMP.match(line):
            now = datetime.datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y")
        elif m := re.match(r"^(?:local)?rule (\w+):", line):
            pending = m.group(1)
        elif (m := re.match(r"\s+jobid: (\d+)", line)) and pending:
            start[m.group(1)], rule_of[m.group(1)], pending = now, pending, None
        elif (m := re.match(r"Finished jobid: (\d+)", line)) and m.group(1) in start:
            out[rule_of[m.group(1)]].append(int((now - start[m.group(1)]).total_seconds()))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("/tmp/graft-timing/results"))
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "workflow_time.json")
    args = parser.parse_args()
    shutil.rmtree(args.results, ignore_errors=True)
    snakemake = Path(sys.executable).parent / "snakemake"
    start = time.perf_counter()
    proc = subprocess.run(
        [str(snakemake), "--cores", str(args.cores), "all", "--config", f"results={args.results}"],
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        print(proc.stderr[-3000:])
        raise SystemExit(proc.returncode)
    by_rule = rule_seconds(proc.stderr)
    print(f"{'rule':<18} {'jobs':>5} {'job-seconds':>12}")
    for rule, values in by_rule.items():
        print(f"{rule:<18} {len(values):>5} {sum(values):>12}")
    print(f"main job on {args.cores} cores: {seconds / 60:.1f} minutes")
    result = {
        "cores": args.cores,
        "seconds": round(seconds, 1),
        "minutes": round(seconds / 60, 2),
        "rules": {r: {"jobs": len(v), "job_seconds": sum(v)} for r, v in by_rule.items()},
    }
    write_text(args.out, json.dumps(result, indent=2) + "\n")
    report = args.out.parent / "embedded_default_report"
    shutil.rmtree(report, ignore_errors=True)
    shutil.copytree(args.results / "report", report)


if __name__ == "__main__":
    main()
