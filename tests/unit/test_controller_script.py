"""slurm/controller.sbatch: the Snakemake controller as a Slurm job of its own."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "slurm" / "controller.sbatch"


def _run(
    tmp_path: Path, *args: str, with_snakemake: bool = True, snakemake: str = 'echo "cwd=$(pwd) args=$*"'
) -> subprocess.CompletedProcess:
    tools = tmp_path / f"bin{len(list(tmp_path.glob('bin*')))}"
    tools.mkdir()
    for name in ("bash", "dirname", "mktemp", "tee", "grep", "rm", "cat"):
        (tools / name).symlink_to(shutil.which(name))
    if with_snakemake:
        (tools / "snakemake").write_text(f"#!/bin/sh\n{snakemake}\n")
        (tools / "snakemake").chmod(0o755)
    env = {"PATH": str(tools), "SLURM_SUBMIT_DIR": str(tmp_path)}
    return subprocess.run(
        [str(tools / "bash"), str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=60
    )


def test_it_runs_the_target_first_then_the_slurm_profile_from_the_submit_directory(tmp_path):
    assert _run(tmp_path).stdout.strip() == f"cwd={tmp_path} args=all --profile slurm"
    out = _run(tmp_path, "full", "--keep-going").stdout.strip()
    assert out == f"cwd={tmp_path} args=full --keep-going --profile slurm"


def test_without_snakemake_it_stops_in_one_line_naming_the_setting(tmp_path):
    done = _run(tmp_path, with_snakemake=False)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "slurm/controller.sbatch: no snakemake on PATH; set GRAFT_CONTROLLER_ENV to the environment that has it"
    ]


def test_its_sbatch_defaults_ask_for_a_cpu_job_and_no_gpu():
    lines = [line for line in SCRIPT.read_text().splitlines() if line.startswith("#SBATCH")]
    assert "#SBATCH --time=7-00:00:00" in lines and not any("gres" in line or "gpu" in line for line in lines)
    assert os.access(SCRIPT, os.X_OK)


def test_it_ends_with_the_workflows_status_and_leaves_the_rounds_to_it(tmp_path):
    """The next round after a cell failed for good is the workflow's own (graft.workflow.rounds, under the profile's
    --keep-going): the controller runs Snakemake once and ends with its status."""
    done = _run(tmp_path, snakemake="n=$(cat rounds 2>/dev/null || echo 0); echo $((n + 1)) > rounds; exit 3")
    assert done.returncode == 3 and (tmp_path / "rounds").read_text().strip() == "1", done.stderr
    profile = (ROOT / "workflow" / "profiles" / "slurm" / "config.yaml").read_text()
    assert "\nkeep-going: true\n" in profile
