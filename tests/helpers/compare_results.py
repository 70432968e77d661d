"""Check that two results trees of the same config hold the same training metrics and evaluations.

Timings (step times, GPU-hours, the cost table), paths and what only a placement of the processes writes differ
between runs and are left out; everything else must be equal.
With --everything, also the report's tables (CSV, cell by cell), the trajectory archives and the checkpoint and
toy-model weights (byte for byte): what a refactoring that promises unchanged results must keep.
Usage: python tests/helpers/compare_results.py [--everything] A B
"""

import csv
import hashlib
import json
import sys
from pathlib import Path

from graft.results import LAYOUT_METRICS, TIMING_METRICS


def metrics(root: Path) -> dict[str, list[dict]]:
    out = {}
    for path in sorted(root.glob("runs/*/*/seed*/metrics.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line]
        out[str(path.relative_to(root))] = [
            {k: v for k, v in r.items() if k not in TIMING_METRICS | LAYOUT_METRICS} for r in rows
        ]
    return out


def evaluations(root: Path) -> dict[str, dict]:
    """Checkpoint evaluations and the re-evaluations of selected checkpoints."""
    out = {}
    for path in sorted([*root.glob("eval/**/step_*.json"), *root.glob("eval_selected/**/run_*.json")]):
        data = json.loads(path.read_text())
        data.pop("checkpoint")
        out[str(path.relative_to(root))] = data
    return out


def tables(root: Path) -> dict[str, list[list[str]]]:
    # the cost table holds hours measured by the clock
    return {
        str(p.relative_to(root)): list(csv.reader(p.read_text().splitlines()))
        for p in sorted(root.glob("report/tables/*.csv"))
        if p.stem != "table_cost"
    }


def digests(pattern: str):
    def read(root: Path) -> dict[str, str]:
        return {
            str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.glob(pattern))
        }

    return read


EVERYTHING = {
    "tables": tables,
    "trajectories": digests("runs/**/*.parquet"),
    "weights": digests("**/model.safetensors"),
}


def main() -> int:
    args = [a for a in sys.argv[1:] if a != "--everything"]
    local, slurm = Path(args[0]), Path(args[1])
    checks = {"metrics": (metrics(local), metrics(slurm)), "evaluations": (evaluations(local), evaluations(slurm))}
    if "--everything" in sys.argv[1:]:
        checks.update({name: (read(local), read(slurm)) for name, read in EVERYTHING.items()})
    ok = True
    for name, (a, b) in checks.items():
        if not a:
            print(f"{name}: the local run produced none")
            ok = False
        elif a != b:
            differing = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            print(f"{name}: {len(differing)} of {len(a)} files differ, e.g. {differing[:3]}")
            ok = False
        else:
            print(f"{name}: {len(a)} files identical")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
