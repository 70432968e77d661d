"""Snakemake as the suite runs it: in a working directory of its own under a test's temporary directory, never in
the checkout. Snakemake writes its records (``.snakemake/``: locks, metadata, logs, incomplete markers) and every
relative path (``results/`` of a config, a profile's) in its working directory; ``--unlock`` there would remove a
user's own locks. A working directory holds a copy of what Snakemake and graft read relative to it (the Snakefile,
rules/, config/, workflow/, envs/ and the ``slurm`` profile link) and links to what they only read (bench/, tests/,
requirements/), so a command runs there as written for the repository root."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

COPIED = ("Snakefile", "rules", "config", "workflow", "envs", "slurm")
"""What Snakemake and graft read of the repository relative to the working directory (``slurm`` is a relative
link to workflow/profiles/slurm and stays one, so a profile's path reads as from the repository root)."""

LINKED = ("bench", "tests", "requirements")
"""What a config or a command only reads besides (``slurm.gpu_check: bench/results/...``, test data)."""

WORKDIR = "workdir"
"""The working directory's name inside the directory a test gives."""


def workflow_dir(where: Path) -> Path:
    """``where``/workdir, made on the first call (a later call returns it, with Snakemake's records of earlier
    runs there): the directory every Snakemake command of the suite runs in."""
    where = Path(where).resolve()
    assert not where.is_relative_to(ROOT), f"{where}: a test's Snakemake runs outside the checkout"
    work = where / WORKDIR
    if work.is_dir():
        return work
    work.mkdir(parents=True)
    for name in COPIED:
        source = ROOT / name
        if source.is_symlink():
            (work / name).symlink_to(source.readlink())
        elif source.is_dir():
            shutil.copytree(source, work / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copyfile(source, work / name)
    for name in LINKED:
        (work / name).symlink_to(ROOT / name)
    return work


def tool(name: str) -> str:
    """A program of the test environment (the venv's first)."""
    import pytest

    path = BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed; install the test extras: pip install -e '.[test,workflow]'")
    return found


def environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (the test's own environment when None) with the venv's programs first on PATH."""
    env = dict(os.environ if env is None else env)
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    return env


def run_in(
    where: Path, *cmd, check: bool = False, timeout: float = 1800, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``cmd`` run in ``where``'s working directory (``workflow_dir``), its output captured; with ``check``, a
    non-zero exit fails the test with the output's tail."""
    proc = subprocess.run(
        [str(c) for c in cmd],
        cwd=workflow_dir(where),
        capture_output=True,
        text=True,
        env=environment(env),
        timeout=timeout,
    )
    if check:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def start_in(where: Path, *cmd, log: Path | None = None) -> subprocess.Popen:
    """``cmd`` started in the background in ``where``'s working directory, in a session of its own (so that a test
    can kill it with everything it runs); its output goes to ``log`` where one is given."""
    kwargs = {"cwd": workflow_dir(where), "env": environment(), "start_new_session": True}
    cmd = [str(c) for c in cmd]
    if log is None:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs)
    with log.open("w") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, **kwargs)


def checkout_state() -> dict[str, float]:
    """The checkout's ``.snakemake/`` and ``results/``: every path under them with its modification time (a
    directory's changes when an entry is added or removed), for a test to compare before and after."""
    state = {}
    for top in (ROOT / ".snakemake", ROOT / "results"):
        if not top.exists():
            continue
        for path in [top, *top.rglob("*")]:
            try:
                state[str(path.relative_to(ROOT))] = path.lstat().st_mtime_ns
            except FileNotFoundError:  # removed while listed
                continue
    return state


def job_counts(proc) -> dict[str, int]:
    """The 'Job stats' table of a dry run (Snakemake logs it on stderr)."""
    output = proc.stdout + proc.stderr
    if "Nothing to be done" in output:
        return {}
    table = output.split("Job stats:", 1)[1].split("\n\n", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M) if m.group(1) != "total"}
