"""Time the README's main job, `snakemake --cores 2 all` on the embedded default, from nothing (the target: at
most 15 minutes on 2 cores with its install), or another target (`--target full`: every cell). Prints per-rule job
counts and seconds and the slowest jobs, and writes bench/results/workflow_time.json (every job's seconds with its
wildcards, and the CPU); keeps the run's report under bench/results/ for the README's results table.

Usage: python bench/benchmarks/workflow_time.py [--results /tmp/graft-timing/results [--replace]] [--cores 2]
       python bench/benchmarks/workflow_time.py --log .snakemake/log/<run>.snakemake.log --minutes M
       (the second times an earlier run from its log; bench/benchmarks/main_job_clone.sh runs the README's main
       job on a fresh clone and records it this way, with its install's seconds: --install-seconds)
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

from graft.numerics import cpu_model, cpu_vendor
from graft.results import write_text

STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d+:\d+:\d+ \d+)\]")


def job_seconds(log: str) -> list[tuple[str, str, int]]:
    """(rule, wildcards, wall seconds) of every finished job, from Snakemake's log."""
    now, start, rule_of, wildcards_of, pending, last = None, {}, {}, {}, None, None
    out = []
    for line in log.splitlines():
        if m := STAMP.match(line):
            now = datetime.datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y")
        elif m := re.match(r"^(?:local)?rule (\w+):", line):
            pending = m.group(1)
        elif (m := re.match(r"\s+jobid: (\d+)", line)) and pending:
            start[m.group(1)], rule_of[m.group(1)], pending = now, pending, None
            last = m.group(1)
        elif m := re.match(r"\s+wildcards: (.*)", line):
            wildcards_of[last] = m.group(1)
        elif (m := re.match(r"Finished jobid: (\d+)", line)) and m.group(1) in start:
            job = m.group(1)
            out.append((rule_of[job], wildcards_of.get(job, ""), int((now - start[job]).total_seconds())))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--results", type=Path, default=Path("/tmp/graft-timing/results"), help="where the timed run writes"
    )
    parser.add_argument("--replace", action="store_true", help="delete --results first when it holds anything")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--target", default="all", help="the Snakemake target timed (default: all, the main job)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "results" / "workflow_time.json")
    parser.add_argument("--log", type=Path, help="read this Snakemake log of a finished run instead of running")
    parser.add_argument("--minutes", type=float, help="with --log: the run's wall-clock minutes")
    parser.add_argument("--install-seconds", type=float, help="the install's seconds before the run, recorded too")
    parser.add_argument("--note", help="what else to record with the run (its commit, the machine's load)")
    args = parser.parse_args()
    if args.log:
        if args.minutes is None:
            sys.exit("--log needs --minutes (the run's wall-clock time; a log does not hold it)")
        log, seconds = args.log.read_text(), 60 * args.minutes
    else:
        if args.results.exists() and any(args.results.iterdir()):
            if not args.replace:  # a run from nothing deletes it: never someone's results by default
                sys.exit(
                    f"--results: {str(args.results)!r} is not empty and a timed run starts from nothing; pass "
                    "--replace to delete it, or time a finished run with --log and --minutes"
                )
            shutil.rmtree(args.results)
        snakemake = Path(sys.executable).parent / "snakemake"
        start = time.perf_counter()
        proc = subprocess.run(
            [str(snakemake), "--cores", str(args.cores), args.target, "--config", f"results={args.results}"],
            capture_output=True,
            text=True,
        )
        seconds = time.perf_counter() - start
        if proc.returncode != 0:
            print(proc.stderr[-3000:])
            raise SystemExit(proc.returncode)
        log = proc.stderr
    jobs = job_seconds(log)
    by_rule: dict[str, list[int]] = collections.defaultdict(list)
    for rule, _, value in jobs:
        by_rule[rule].append(value)
    print(f"{'rule':<18} {'jobs':>5} {'job-seconds':>12}")
    for rule, values in by_rule.items():
        print(f"{rule:<18} {len(values):>5} {sum(values):>12}")
    print("slowest jobs:")
    for rule, wildcards, value in sorted(jobs, key=lambda j: -j[2])[:10]:
        print(f"  {value:>5} s  {rule} {wildcards}")
    print(f"{args.target} on {args.cores} cores: {seconds / 60:.1f} minutes")
    result = {
        "target": args.target,
        "cpu": {"model": cpu_model(), "vendor": cpu_vendor()},
        "cores": args.cores,
        "seconds": round(seconds, 1),
        "minutes": round(seconds / 60, 2),
        **({"install_seconds": args.install_seconds} if args.install_seconds is not None else {}),
        **({"note": args.note} if args.note else {}),
        "job_seconds": sum(value for _, _, value in jobs),
        "rules": {r: {"jobs": len(v), "job_seconds": sum(v)} for r, v in by_rule.items()},
        "jobs": [{"rule": r, "wildcards": w, "seconds": v} for r, w, v in jobs],
    }
    write_text(args.out, json.dumps(result, indent=2) + "\n")
    if not args.log and args.target == "all":
        report = args.out.parent / "embedded_default_report"
        shutil.rmtree(report, ignore_errors=True)
        shutil.copytree(args.results / "report", report)


if __name__ == "__main__":
    main()
