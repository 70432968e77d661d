"""Every command a page shows (the README, CONTRIBUTING.md, docs/, bench/results/ and the configs' comments;
tests/helpers/page_commands.py finds them) runs as written, as far as it can be checked without running it:
Snakemake's own parser reads each ``snakemake`` command with every target first, no target read as the value of an
option that takes several words; graft's own parser reads each ``graft`` command, its subcommand's ``--help`` works,
and the cheap ones (``plan``, ``cells``, ``methods``) run; every other command is on a list of those not run, with
the reason, and the script or file it names exists. tests/integration/test_page_dry_runs.py runs each Snakemake
command as a dry run."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import itertools
import tomllib

import pytest
from helpers.page_commands import (
    MADE_BY_A_PAGE,
    PROGRAMS,
    ROOT,
    config_commands,
    markdown_commands,
    page_commands,
    shell_words,
    snakemake_options,
    stood_in,
    swallowed,
    workflow_copy,
)

from graft.cli import build_parser, main

COMMANDS = page_commands()

NOT_RUN = {
    "python3": "python3 -m venv makes the project's venv: an install, run by CI on a fresh clone",
    ".": "activates a venv in the reader's own shell",
    "pip": "installs from the package index (network); each requirements file and extra it names is checked",
    "pytest": "the test suite itself",
    "ruff": "a static check, which tests/integration/test_static_checks.py runs over the checkout",
    "snakefmt": "a static check, which tests/integration/test_static_checks.py runs over the checkout",
    "lint-imports": "a static check, which tests/integration/test_static_checks.py runs over the checkout",
    "bash": "builds an environment from the network or checks a GPU node; the script is checked to exist",
    "python": "an experiment or check that reads a finished results tree or needs a GPU, or a job's launcher; the "
    "script or module is checked to exist (tests/integration/test_page_dry_runs.py runs the one a dry run reads)",
    "sbatch": "submits to a Slurm cluster; its batch script is checked to exist",
    "tmux": "an interactive terminal session on a login node",
    "lfs": "a cluster file system's quota tool (Lustre)",
    "mmlsquota": "a cluster file system's quota tool (GPFS)",
    "quota": "a cluster file system's quota tool",
    "mv": "moves a run directory of the paper's results tree, which a checkout does not hold",
}
"""Each program whose commands are not run here, and why; ``snakemake`` and ``graft`` commands are all checked."""

CHEAP = ("plan", "cells", "methods")
"""graft subcommands that run here in a second, and do, where a page gives them every argument."""


def distinct(program: str) -> list:
    """One command of each text that ``program`` opens, as params named by its first page and line."""
    seen = {}
    for command in COMMANDS:
        if command.program == program and command.text not in seen:
            seen[command.text] = command
    return [pytest.param(c, id=f"{c.page}:{c.line}") for c in seen.values()]


def test_the_pages_show_commands_of_each_kind():
    programs = {command.program for command in COMMANDS}
    assert {"snakemake", "graft", "pip", "bash", "python"} <= programs
    assert len(distinct("snakemake")) >= 20 and len(distinct("graft")) >= 30


def test_the_extractor_reads_blocks_prompts_continuations_chains_comments_and_inline_code(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "Run `snakemake --cores 2\nall` or `graft.cli`, not `graft`.\n\n"
        "```bash\n"
        "a --x 'b # c' \\\n    --y   # a comment\n"
        "$ d && e | f\n"
        "```\n\n"
        "```console\n$ g\noutput\n```\n\n"
        "```\nnot a command\n```\n"
    )
    found = [(c.line, c.text, c.inline) for c in markdown_commands(page, tmp_path)]
    assert found == [
        (1, "snakemake --cores 2 all", True),
        (5, "a --x 'b # c' --y", False),
        (7, "d", False),
        (7, "e", False),
        (7, "f", False),
        (11, "g", False),
    ]
    config = tmp_path / "c.yaml"
    config.write_text(
        "# Run with:  snakemake all --profile slurm\n# graft plan prints it, `graft plan --config c.yaml`\n"
        "#   snakemake x \\\n#       --configfile c.yaml\nkey: 1  # a value\n"
    )
    found = [(c.line, c.text) for c in config_commands(config, tmp_path)]
    assert found == [
        (1, "snakemake all --profile slurm"),
        (2, "graft plan --config c.yaml"),
        (3, "snakemake x --configfile c.yaml"),
    ]


def test_every_command_is_checked_or_on_the_list_of_those_not_run():
    unknown = [str(c) for c in COMMANDS if c.program not in ("snakemake", "graft") and c.program not in NOT_RUN]
    assert not unknown, f"add a check for these, or their program to NOT_RUN with the reason: {unknown}"
    assert set(PROGRAMS) - {"snakemake", "graft"} <= set(NOT_RUN)


@pytest.mark.parametrize("command", distinct("snakemake"))
def test_a_snakemake_command_keeps_its_targets_and_parses(command):
    from snakemake.cli import get_argument_parser

    words = stood_in(shell_words(command.text, ROOT, substitute=False))
    problems = swallowed(words[1:])
    assert not problems, f"{command}: {problems}"
    with contextlib.redirect_stderr(io.StringIO()) as err:
        try:
            args = get_argument_parser().parse_args(words[1:])
        except SystemExit:
            pytest.fail(f"{command}: {err.getvalue().strip()}")
    missing = [p for p in args.configfile or [] if str(p) not in MADE_BY_A_PAGE and not (ROOT / p).is_file()]
    assert not missing, f"{command}: no such config file {missing}"
    profiles = args.profile if isinstance(args.profile, list) else [args.profile] if args.profile else []
    assert all((ROOT / p).is_dir() for p in profiles), f"{command}: no such profile {profiles}"


def test_the_check_finds_a_target_that_an_option_swallows():
    assert swallowed(["--configfile", "x.yaml", "all"]) == [
        "--configfile reads 'all' as a config file: put the targets first"
    ]
    assert swallowed(["--config", "results=x", "all"]) == ["--config reads 'all' as a setting: put the targets first"]
    assert swallowed(["--cores", "2", "--configfile", "x.yaml", "--cores", "2", "all"]) == [
        "target 'all' comes after --configfile: put the targets first"
    ]
    assert swallowed(["--forcerun", "train", "all"])
    assert swallowed(["--quiet", "host", "all"])
    assert not swallowed(["all", "--cores", "2", "--configfile", "a.yaml", "b.yaml", "--forcerun", "train", "all"])
    assert not swallowed(["--profile", "slurm", "results/x", "--config", "slurm={site_check: false}"][2:])


def graft_command(words: list[str]) -> tuple[list[str], argparse.ArgumentParser]:
    """The subcommand words of a graft command and the parser of the last."""
    parser, path = build_parser(), []
    for word in words:
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subparsers or word not in subparsers[0].choices:
            break
        parser = subparsers[0].choices[word]
        path.append(word)
    return path, parser


def parsed(argv: list[str]) -> tuple[int, str]:
    """graft's parser on ``argv``: its exit code (0 where it returns) and what it wrote."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            build_parser().parse_args(argv)
        except SystemExit as exit:
            return exit.code or 0, out.getvalue()
    return 0, out.getvalue()


@pytest.mark.parametrize("command", distinct("graft"))
def test_a_graft_command_names_a_subcommand_and_options_it_has(command):
    words = stood_in(command.words[1:])
    path, parser = graft_command(words)
    assert path, f"{command}: no such graft command"
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert not subparsers or command.inline, f"{command}: graft {' '.join(path)} needs a subcommand"
    options = {name for action in parser._actions for name in action.option_strings}
    unknown = [w.split("=")[0] for w in words if w.startswith("--") and w.split("=")[0] not in options]
    assert not unknown, f"{command}: graft {' '.join(path)} has no {unknown}"
    code, text = parsed([*path, "--help"])
    assert code == 0 and "usage: graft" in text, f"{command}: {text}"
    if not command.inline and "..." not in words:
        code, text = parsed(words)
        assert code == 0, f"{command}: {text}"


def cheap(command) -> bool:
    """A graft command of ``CHEAP`` with its config (``methods`` needs none), not the site check (Slurm's tools)."""
    words = command.words
    return words[1] in CHEAP and ("--config" in words or words[1] == "methods") and "--site" not in words


@pytest.mark.parametrize("command", [p for p in distinct("graft") if cheap(p.values[0])])
def test_a_cheap_graft_command_runs(command, tmp_path, monkeypatch):
    """From a copy of the workflow with the files a page leaves to the reader (the worked example's problems)."""
    monkeypatch.chdir(workflow_copy(tmp_path / "repo"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(stood_in(command.words[1:]))
    assert code == 0, f"{command}: {out.getvalue()[-2000:]}"


def extras() -> set[str]:
    return set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.program in ("pip", "bash", "python", "sbatch")], ids=str)
def test_a_command_not_run_names_files_that_exist(command):
    words = command.words
    if words[0] == "pip":
        for flag, value in itertools.pairwise(words):
            if flag in ("-r", "-c"):
                assert (ROOT / value).is_file(), f"{command}: no such file {value}"
            if flag == "-e" and "[" in value:
                named = set(value.split("[", 1)[1].rstrip("]").split(","))
                assert named <= extras(), f"{command}: no such extra {named - extras()}"
        return
    if words[:2] in (["python", "-m"], ["python3", "-m"]):
        if words[2] != "venv":
            assert importlib.util.find_spec(words[2]), f"{command}: no module {words[2]}"
        return
    assert (ROOT / words[1]).is_file(), f"{command}: no such script {words[1]}"


def test_a_snakemake_option_in_the_check_is_snakemakes():
    options = snakemake_options()
    for name in ("--configfile", "--config", "--forcerun", "--quiet", "--until", "--omit-from", "--allowed-rules"):
        assert options[name].nargs in ("*", "+"), name
