"""Every method preset on the paper's code path, one `graft train` each: 2 processes under torchrun, vLLM engines
(the CPU build), the toy models of config/rehearsal.yaml, 2 steps. The CI rehearsal runs GRPO n=8 and GRAFT only;
this finds what the other presets (larger n, dynamic sampling, HACPO, SGT, replay, every ablation) do on that
path. Prints a table; writes bench/results/rehearsal_methods.json.

Usage (in the vLLM environment, .venv-vllm):
    python bench/checks/rehearsal_methods.py [--work DIR] [--methods grpo_n8 graft ...] [--timeout 600]
The toy world is built under --work (default /tmp/graft-rehearsal-methods) when it is not there.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import yaml

from graft.methods import PRESETS, get_method

SINGLE, PAIR = "smollm3", ("smollm3", "qwen3")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=Path("config/rehearsal.yaml"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/graft-rehearsal-methods"))
    parser.add_argument("--methods", nargs="+", default=list(PRESETS))
    parser.add_argument("--timeout", type=int, default=600)
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "results" / "rehearsal_methods.json")
    args = parser.parse_args()
    config = yaml.safe_load(args.config.read_text())
    config["results"] = str(args.work)
    args.work.mkdir(parents=True, exist_ok=True)
    path = args.work / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    graft = [sys.executable, "-m", "graft.cli"]
    if not all((args.work / "toy" / "models" / m).is_dir() for m in config["models"]):
        subprocess.run([*graft, "toy", "build", "--config", str(path), "--threads", "2"], check=True)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m"]

    def train(method: str, models: str, out: Path, *extra: str) -> list[str]:
        """The 2-process `graft train` command of one cell."""
        command = [*torchrun, "graft.cli", "train", "--config", str(path), "--method", method, "--models", models]
        return [*command, "--seed", "0", "--out", str(out), "--threads", "1", *extra]

    # replay reads the peer's stored grpo_n8 trajectories: that run goes first
    order = sorted(args.methods, key=lambda m: (get_method(m).peer == "archive", m != "grpo_n8"))
    archive = args.work / "runs" / "grpo_n8_qwen3"
    rows = []
    for name in order:
        method = get_method(name)
        models = SINGLE if method.peer != "live" else ",".join(PAIR)
        out = args.work / "runs" / name
        extra = ["--peer-archive", str(archive / "trajectories" / "qwen3")] if method.peer == "archive" else []
        command = train(name, models, out, *extra)
        t0 = time.perf_counter()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
            rc, err = done.returncode, done.stderr
        except subprocess.TimeoutExpired as timeout:
            # subprocess hands over what was read so far as bytes on some paths even in text mode
            err = timeout.stderr or ""
            rc, err = "timeout", err.decode(errors="replace") if isinstance(err, bytes) else err
        seconds = time.perf_counter() - t0
        metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()] if rc == 0 else []
        lines = err.splitlines()
        failure = next((line for line in reversed(lines) if "Error" in line), lines[-1] if lines else "")
        rows.append(
            {
                "method": name,
                "models": models,
                "rc": rc,
                "seconds": round(seconds, 1),
                "steps": len({r["step"] for r in metrics}),
                "transferred": sum(r.get("transferred", 0) or 0 for r in metrics),
                "failure": None if rc == 0 else failure[-300:],
            }
        )
        print(json.dumps(rows[-1]), flush=True)
        if name == "grpo_n8":  # the archive replay reads: qwen3's own grpo_n8 run
            subprocess.run(train("grpo_n8", "qwen3", archive), capture_output=True, timeout=args.timeout, check=True)
    print("| method | models | exit | seconds | steps | transferred | failure |\n|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['method']} | {r['models']} | {r['rc']} | {r['seconds']} | {r['steps']} | {r['transferred']} "
              f"| {r['failure'] or ''} |")  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
