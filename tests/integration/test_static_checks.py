"""The project's static checks: Snakemake's linter and snakefmt, ruff, and the import layers. Each a tool run over the
checkout, in the default run of the suite (the workflow's own tests are in the slow tier)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from helpers.workflow_dir import BIN, run_in, tool

ROOT = Path(__file__).resolve().parents[2]


def run(*cmd):
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    return subprocess.run([str(c) for c in cmd], cwd=ROOT, capture_output=True, text=True, env=env, timeout=600)


def test_snakemake_lint_and_snakefmt(tmp_path):
    lint = run_in(tmp_path, tool("snakemake"), "--lint", timeout=600)  # Snakemake in a directory of its own
    assert lint.returncode == 0 and "Congratulations" in lint.stdout + lint.stderr, lint.stdout + lint.stderr
    fmt = run(tool("snakefmt"), "--check", "Snakefile", "rules")
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


def test_ruff_clean():
    check = run(tool("ruff"), "check", ".")
    assert check.returncode == 0, check.stdout
    fmt = run(tool("ruff"), "format", "--check", ".")
    assert fmt.returncode == 0, fmt.stdout


def test_imports_keep_the_layers():
    """The layer table of docs/design.md section 5, as pyproject.toml's import-linter contracts."""
    lint = run(tool("lint-imports"))
    assert lint.returncode == 0, lint.stdout[-3000:] + lint.stderr[-3000:]
