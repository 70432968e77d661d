"""What a benchmark needs before it measures anything: the toy world of its config (built here when missing, as
``graft toy build`` would), or else one line that names the command making what is missing.

The scripts under bench/benchmarks/, bench/experiments/ and bench/checks/ put bench/ on the path to import it
as ``needs``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from graft.config import RunConfig, load_config


def toy_world(config_path: Path, results: str | None = None) -> RunConfig:
    """The config, after building its toy world (data and models) if a part of it is missing."""
    config = load_config(config_path)
    if config.toy is None:
        return config
    root = Path(results or config.results)
    paths = [Path(config.data.train), *(Path(m.path) for m in config.models.values())]
    if results is not None:
        paths = [root / "toy" / "data" / "train.jsonl", *(root / "toy" / "models" / m for m in config.models)]
    if all(p.exists() for p in paths):
        return config
    cmd = [sys.executable, "-m", "graft.cli", "toy", "build", "--config", str(config_path)]
    if results is not None:
        cmd += ["--out", str(root / "toy")]
    print(f"{Path(sys.argv[0]).name}: the toy world is missing; building it: {' '.join(cmd[2:])}", file=sys.stderr)
    subprocess.run(cmd, check=True)
    return config


def require(path: Path, what: str, command: str) -> Path:
    """``path``, or exit with one line naming what is missing and the command that makes it."""
    if not Path(path).exists():
        raise SystemExit(f"{Path(sys.argv[0]).name}: {what} {str(path)!r} is missing; make it with: {command}")
    return Path(path)


def graft_train(config: Path, method: str, models: list[str], steps: int, out: Path, processes: int) -> None:
    """One ``graft train`` of seed 0 with one thread per process, under torchrun when ``processes`` > 1; exits with
    the run's stderr when it fails."""
    args = ["train", "--config", str(config), "--method", method, "--models", ",".join(models), "--seed", "0"]
    args += ["--out", str(out), "--steps", str(steps), "--threads", "1"]
    launcher = [sys.executable, "-m", "graft.cli"]
    if processes > 1:
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}"]
        launcher += ["-m", "graft.cli"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run([*launcher, *args], env=env, capture_output=True, text=True, timeout=3600)
    if result.returncode != 0:
        raise SystemExit(
            f"{Path(sys.argv[0]).name}: {method} on {processes} process(es) failed:\n{result.stderr[-3000:]}"
        )
