"""Every Snakemake command a page shows (tests/helpers/page_commands.py finds them) runs as a dry run, as written,
from a copy of the workflow with the files a page leaves to the reader: nothing lands in the checkout. Through a
Slurm profile the dry run skips the check of the site (``slurm.site_check: false``, merged into the command's own
``--config``): this machine has no Slurm. Commands that Snakemake would read alike run once. The workflow tier: each
dry run parses the whole workflow (15 to 40 s on two busy cores)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers.page_commands import MADE_BY_A_PAGE, ROOT, page_commands, shell_words, stood_in, workflow_copy

BIN = Path(sys.executable).parent

COVERED = {
    "--lint": "tests/integration/test_static_checks.py runs snakemake --lint from the repository root",
    "--report": "tests/integration/test_workflow.py builds the HTML report of the smoke workflow with --report",
}
"""Snakemake commands of a mode that a dry run does not show, and the test that runs them."""

NO_SITE_CHECK = {"site_check": False}


def without_site_check(words: list[str]) -> list[str]:
    """``words`` with ``slurm.site_check: false`` in their ``--config`` (one ``--config``: a second would replace
    the first), beside any ``slurm=`` setting there."""
    if "--config" not in words:
        return [*words, "--config", "slurm=" + yaml.safe_dump(NO_SITE_CHECK, default_flow_style=True).strip()]
    start = words.index("--config") + 1
    end = next((i for i in range(start, len(words)) if words[i].startswith("-")), len(words))
    settings = words[start:end]
    slurm = next((i for i, s in enumerate(settings) if s.startswith("slurm=")), None)
    if slurm is None:
        settings.append("slurm={}")
        slurm = len(settings) - 1
    value = {**(yaml.safe_load(settings[slurm].split("=", 1)[1]) or {}), **NO_SITE_CHECK}
    settings[slurm] = "slurm=" + yaml.safe_dump(value, default_flow_style=True, width=10**6).strip()
    return [*words[:start], *settings, *words[end:]]


def dry_run(words: list[str]) -> list[str]:
    """The words Snakemake runs as the page's command's dry run."""
    if "--unlock" not in words and not {"--dry-run", "-n", "--dryrun"} & set(words):
        words = [*words, "--dry-run"]
    if "--profile" in words:
        words = without_site_check(words)
    return words


def read_alike(words: list[str]) -> str:
    """What Snakemake reads from ``words``: commands with the same are the same dry run."""
    from snakemake.cli import get_argument_parser

    try:
        read = vars(get_argument_parser().parse_args(words[1:]))
    except SystemExit:  # the test of this command says why
        return " ".join(words)
    return repr(sorted((k, getattr(v, "__dict__", v)) for k, v in read.items()))


def commands():
    seen, params = set(), []
    for command in page_commands():
        if command.program != "snakemake":
            continue
        words = stood_in(shell_words(command.text, ROOT, substitute=False))
        covered = [COVERED[w] for w in words if w in COVERED]
        key = read_alike(dry_run(words))
        if key in seen:
            continue
        seen.add(key)
        marks = [pytest.mark.skip(reason=covered[0])] if covered else []
        params.append(pytest.param(command, marks=marks, id=f"{command.page}:{command.line}"))
    return params


@pytest.mark.parametrize("command", commands())
def test_a_pages_snakemake_command_runs_as_a_dry_run(command, tmp_path):
    repo = workflow_copy(tmp_path / "repo")
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    words = stood_in(shell_words(command.text, repo, substitute=True))
    for made, writer in MADE_BY_A_PAGE.items():
        if made in words:
            path = repo / Path(made).name
            subprocess.run([*writer, str(path)], cwd=repo, env=env, check=True, timeout=120)
            words = [str(path) if word == made else word for word in words]
    words = dry_run(words)
    done = subprocess.run(
        [BIN / "snakemake", *words[1:]], cwd=repo, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{command}\n{' '.join(words)}\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
