"""Check that two results trees of the same config hold the same training metrics and evaluations.

Timings (step times, GPU-hours) and paths differ between runs and are left out; everything else must be equal.
Usage: python .ci/compare_results.py LOCAL SLURM
"""

import json
import sys
from pathlib import Path

TIMING = {"rollout_s", "reward_s", "scoring_s", "update_s", "step_time_s", "gpu_hours"}


def metrics(root: Path) -> dict[str, list[dict]]:
    out = {}
    for path in sorted(root.glob("runs/*/*/seed*/metrics.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line]
        out[str(path.relative_to(root))] = [{k: v for k, v in r.items() if k not in TIMING} for r in rows]
    return out


def evaluations(root: Path) -> dict[str, dict]:
    out = {}
    for path in sorted(root.glob("eval/**/step_*.json")):
        data = json.loads(path.read_text())
        data.pop("checkpoint")
        out[str(path.relative_to(root))] = data
    return out


def main() -> int:
    local, slurm = Path(sys.argv[1]), Path(sys.argv[2])
    checks = {"metrics": (metrics(local), metrics(slurm)), "evaluations": (evaluations(local), evaluations(slurm))}
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
