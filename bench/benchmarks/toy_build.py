"""Time the toy world's build (data and the three warmed-up models) on this machine (the target: at most 5
minutes on 2 cores). Prints a table and writes bench/results/toy_build.json.

Usage: python bench/benchmarks/toy_build.py [--config config/config.yaml] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=Path("config/config.yaml"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "results" / "toy_build.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        summary = Path(tmp) / "summary.json"
        start = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "graft.cli",
                "toy",
                "build",
                "--config",
                str(args.config),
                "--out",
                tmp,
                "--summary",
                str(summary),
                "--threads",
                str(args.threads),
            ],
            check=True,
            capture_output=True,
        )
        total = time.perf_counter() - start
        info = json.loads(summary.read_text())
    models = {k: v for k, v in info.items() if k != "data"}
    print(f"{'model':<6} {'arch':<8} {'params':>8} {'tok/char':>8} {'loss':>6} {'seconds':>8}")
    for name, m in models.items():
        print(
            f"{name:<6} {m['arch']:<8} {m['parameters']:>8} {m['tokens_per_char']:>8.3f} "
            f"{m['warmup_loss_last']:>6.3f} {m['seconds']:>8.1f}"
        )
    print(f"total build (data + models, {args.threads} threads): {total:.1f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"total_seconds": round(total, 1), "threads": args.threads, **info}, indent=2) + "\n"
    )


if __name__ == "__main__":
    main()
