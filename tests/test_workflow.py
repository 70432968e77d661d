"""The Snakemake workflow end to end on the embedded default, and the project's static checks."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from graft.methods import PRESETS

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def run(*cmd, cwd=ROOT):
    return subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, check=False)


def tool(name):
    path = BIN / name
    if not path.exists():
        found = shutil.which(name)
        if found is None:
            pytest.fail(f"{name} is not installed; install the test extras: pip install -e '.[test,workflow]'")
        path = Path(found)
    return path


def test_workflow_runs_the_embedded_default(tmp_path):
    out = tmp_path / "results"
    proc = run(tool("snakemake"), "all", "--cores", "1", "--config", f"results={out}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    resolved = yaml.safe_load((out / "methods.yaml").read_text())
    assert list(resolved) == list(PRESETS)
    # a second run has nothing to do
    again = run(tool("snakemake"), "all", "--dry-run", "--cores", "1", "--config", f"results={out}")
    assert "Nothing to be done" in again.stdout + again.stderr


def test_workflow_refuses_a_bad_user_preset_before_compute(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump({"results": str(tmp_path / "r"), "methods": {"x": {"base": "graft", "delta": 2.0}}})
    )
    proc = run(tool("snakemake"), "all", "--cores", "1", "--configfile", config)
    assert proc.returncode != 0
    log = (tmp_path / "r" / "logs" / "resolve_methods.log").read_text()
    assert log.strip() == "graft: error: method.delta: 2.0 is not allowed; expected 0 <= delta < 1"


def test_snakemake_lint_and_snakefmt():
    lint = run(tool("snakemake"), "--lint")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = run(tool("snakefmt"), "--check", "Snakefile", "rules")
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


def test_ruff_clean():
    check = run(tool("ruff"), "check", ".")
    assert check.returncode == 0, check.stdout
    fmt = run(tool("ruff"), "format", "--check", ".")
    assert fmt.returncode == 0, fmt.stdout
