"""graft.workflow.rounds: the line after a round in which a cell failed for good with cells behind it, and the
next round's command. A whole --keep-going invocation with its next round runs in
tests/integration/test_workflow_plans.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from graft.workflow.rounds import AGAIN, BY_HAND, after_failures, forces, held_line, next_round_command

# a b c in one lane, d e in another: c waits for b, b for a, e for d
BEFORE = {"b": "a", "c": "b", "e": "d"}


def _after(tmp_path: Path, failed_now, keep_going: bool, command=("snakemake", "all"), finished=()):
    return after_failures(BEFORE, ["d"], failed_now, lambda c: c in finished, str, keep_going, command, tmp_path)


def test_without_keep_going_the_line_names_the_cells_behind_and_says_to_run_the_command_again(tmp_path, capsys):
    assert _after(tmp_path, ["d", "a"], keep_going=False) is None
    assert capsys.readouterr().err.splitlines() == [held_line(["a"], 2, again=False)]
    assert BY_HAND in held_line(["a"], 2, again=False)


def test_a_failure_known_at_the_start_or_with_nothing_left_behind_it_adds_no_round(tmp_path, capsys):
    assert _after(tmp_path, ["d"], keep_going=True) is None  # d failed before this round: e already moved
    assert _after(tmp_path, ["c"], keep_going=True) is None  # nothing waits for c
    assert _after(tmp_path, ["a"], keep_going=True, finished=("b", "c")) is None
    assert capsys.readouterr().err == ""


def test_with_keep_going_but_no_command_line_it_says_so_and_runs_nothing(tmp_path, capsys):
    assert _after(tmp_path, ["b"], keep_going=True, command=None) is None
    assert capsys.readouterr().err.strip() == held_line(["b"], 1, again=False)


def test_the_next_round_is_the_same_command_line_by_this_python_without_the_held_lock():
    argv = ["/env/bin/snakemake", "all", "--profile", "slurm", "--keep-going"]
    assert next_round_command(argv) == [sys.executable, "-m", "snakemake", "--nolock", *argv[1:]]
    # --nolock first: after a -- every word is a target
    assert next_round_command(["snakemake", "--cores", "2", "--", "all"])[3:] == [
        "--nolock",
        "--cores",
        "2",
        "--",
        "all",
    ]
    assert AGAIN in held_line(["grpo_n8/smol/seed0", "graft/P1/seed0"], 3, again=True)
    line = held_line(["z", "a"], 3, again=True)
    assert line.startswith("graft: 3 cell(s) of the disk budget's lanes waited behind a, z,")


@pytest.mark.parametrize(
    ("argv", "kept"),
    [
        ("all --forcerun r/a/done.json r/b/done.json --keep-going", "all --keep-going"),
        ("all -R train --cores 2", "all --cores 2"),
        ("all --forcerun=train -k", "all -k"),
        ("-F all -k", "all -k"),
        ("all --forceall --force -f --cores 2", "all --cores 2"),
        ("all -kF --cores 2", "all -k --cores 2"),
        ("all -kR train --cores 2", "all -k --cores 2"),
        ("all -F", "all"),
        ("all --forcer r/a/done.json --foo", "all --foo"),
        ("all --forcea --forceful", "all --forceful"),
        ("all -Rtrain -k", "all -k"),
        ("all -kRtrain all", "all -k all"),
        ("all -Revaluate_base -Rresults/a/done.json -k", "all -k"),
        ("all -kj4 -sSnakefile -F", "all -kj4 -sSnakefile"),
        ("all --forcerun a b -- c", "all -- c"),
        ("r/a/done.json --rerun-incomplete --profile slurm", "r/a/done.json --rerun-incomplete --profile slurm"),
    ],
)
def test_the_next_round_leaves_out_what_forced_jobs_in_this_one(argv, kept):
    """This round has redone what --forcerun, --forceall and --force named; the next one must not redo it again."""
    command = ["snakemake", *argv.split()]
    assert next_round_command(command) == [sys.executable, "-m", "snakemake", "--nolock", *kept.split()]
    assert forces(command) == (argv != kept)


@pytest.mark.parametrize(
    ("stopped", "forced", "command", "why"),
    [
        ("stopped (Ctrl-C)", False, ("snakemake", "all"), "this invocation was stopped (Ctrl-C)"),
        (None, True, ("snakemake", "all"), "a profile forces jobs, which a next round would force again"),
    ],
)
def test_a_stopped_round_or_one_a_profile_forces_starts_no_next_round_and_says_why(
    tmp_path, capsys, stopped, forced, command, why
):
    """Ctrl-C, SIGTERM or an executor's error ended this round: the user asked for no more jobs. A profile's
    forcing options would be read again by the next round, which would redo what this one redid."""
    result = after_failures(
        BEFORE, ["d"], ["b"], lambda c: False, str, True, command, tmp_path, stopped=stopped, forced=forced
    )
    assert result is None
    assert capsys.readouterr().err.strip() == held_line(["b"], 1, again=False, why_not=why)
    assert held_line(["b"], 1, again=False, why_not=why).endswith(f"{BY_HAND} ({why})")
