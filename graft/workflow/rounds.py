"""The next round of an invocation under ``workflow.disk_budget_gb``: Snakemake runs no job downstream of a failed
one, so a cell that failed for good holds back the cells waiting behind it in its lane (graft.planning.turns). With
``--keep-going`` the user asked for every cell that can complete to complete, so the workflow's ``onerror`` runs the
same command once more, in which those cells wait in another lane; without it, the line says to run it again.

Each round needs a cell that failed anew with cells behind it, so the rounds end. The next round runs while this
one still holds Snakemake's lock on the working directory (onerror runs inside it), so no other invocation can
start in between; it therefore runs with ``--nolock``, and this one only ends after it. It is not run when this
round was stopped (Ctrl-C, SIGTERM, an executor's error): the user asked for no more jobs. It runs with this round's
config or not at all (``ROUND_OF``): a config file edited meanwhile would otherwise plan it anew, and under
``workflow.changed_runs: retrain`` retire the cells this round has just finished.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from graft.planning.turns import held_behind

Cell = TypeVar("Cell")

AGAIN = "the workflow runs again, in which they wait in another lane"
"""Words of the line with which a ``--keep-going`` invocation starts its next round."""

BY_HAND = "the next invocation gives them another lane: run the same command again"
"""Words of the line where the invocation runs no next round itself."""

ROUND_OF = "GRAFT_ROUND_OF"
"""The environment variable that gives a next round the config snapshot of the round that started it, which the
workflow checks before it plans anything (rules/common.smk)."""

FORCING = {"-f": "--force", "-F": "--forceall", "-R": "--forcerun"}
"""Snakemake's options that redo jobs whose outputs are present (``--forcerun`` takes the words up to the next
option). The next round leaves them out: this round has already redone what they named, and redoing it again would
retrain finished cells that nobody asked to retrain twice."""


def _forcing(option: str) -> str | None:
    """The forcing option (its long name) that ``option`` names, as Snakemake's parser reads it (a long option may be
    abbreviated), else None."""
    if option in FORCING:
        return FORCING[option]
    if option == "--force":
        return option
    found = [name for name in FORCING.values() if len(option) > len("--force") and name.startswith(option)]
    return found[0] if found else None


@functools.cache
def _short_options() -> dict[str, bool]:
    """Snakemake's one-letter options, each with whether it takes a value, from its own parser."""
    from snakemake.cli import get_argument_parser

    return {
        option[1]: action.nargs != 0
        for action in get_argument_parser()._actions
        for option in action.option_strings
        if len(option) == 2 and option[1] != "-"
    }


def _drop_values(words: list[str]) -> None:
    """Drop the words that ``--forcerun`` takes: those up to the next option, or to ``--``."""
    while words and not words[0].startswith("-"):
        words.pop(0)


def _short_cluster(word: str, words: list[str]) -> str:
    """A word of one-letter options (``-kF``, ``-kRtrain``, ``-j4``) without the forcing ones: a letter that takes a
    value takes the rest of the word (``-R`` also drops it, or, last, the words it takes)."""
    options, kept = _short_options(), ""
    for at in range(1, len(word)):
        letter = word[at]
        if letter == "R":
            if at == len(word) - 1:
                _drop_values(words)
            break
        if options.get(letter, True):  # a value (or a letter Snakemake does not know): the rest is as written
            kept += word[at:]
            break
        if f"-{letter}" not in FORCING:
            kept += letter
    return f"-{kept}" if kept else ""


def next_round_command(argv: Sequence[str]) -> list[str]:
    """The command of the next round: Snakemake's own ``argv`` (its command line, program first) run by this
    Python, without the lock that this round still holds (first, since a ``--`` makes every later word a target) and
    without the options that force jobs (``FORCING``)."""
    kept, words = [], list(argv[1:])
    while words:
        word = words.pop(0)
        if word == "--":
            kept += [word, *words]
            break
        name = _forcing(word.split("=", 1)[0]) if word.startswith("--") or len(word) == 2 else None
        if name:
            if name == "--forcerun" and "=" not in word:
                _drop_values(words)
            continue
        if word.startswith("-") and not word.startswith("--") and len(word) > 2:
            word = _short_cluster(word, words)
            if not word:
                continue
        kept.append(word)
    return [sys.executable, "-m", "snakemake", "--nolock", *kept]


def forces(argv: Sequence[str]) -> bool:
    """Whether ``argv`` itself forces jobs, as opposed to a profile that does (which the next round would read
    again)."""
    return next_round_command(argv)[4:] != list(argv[1:])


def held_line(failed: Iterable[str], held: int, again: bool, why_not: str = "") -> str:
    """The line for the end of a round in which the cells named ``failed`` failed for good with ``held`` cells
    behind them; ``again``: whether the workflow runs the next round itself (``--keep-going``); ``why_not``: why it
    does not, where it otherwise would."""
    names = ", ".join(sorted(failed))
    end = AGAIN if again else BY_HAND + (f" ({why_not})" if why_not else "")
    return (
        f"graft: {held} cell(s) of the disk budget's lanes waited behind {names}, which failed for good on its last "
        f"attempt (failed.json beside the run, kept with its checkpoints); {end}"
    )


def run_round(command: Sequence[str], directory: Path, env: Mapping[str, str]) -> int:
    """Run the next round and wait for it. It runs in a session of its own, and this process hands it SIGINT and
    SIGTERM: a Ctrl-C then reaches it once, and it cancels its own jobs before it ends, where the default would
    kill it after a quarter of a second with its Slurm jobs still running."""
    child = subprocess.Popen(list(command), cwd=directory, env={**os.environ, **env}, start_new_session=True)
    before = {}
    with contextlib.suppress(ValueError):  # only the main thread may set handlers (onerror runs there)
        for number in (signal.SIGINT, signal.SIGTERM):
            before[number] = signal.signal(number, lambda number, frame: child.send_signal(number))
    try:
        return child.wait()
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)


def after_failures(
    before: Mapping[Cell, Cell],
    failed_at_start: Iterable[Cell],
    failed_now: Iterable[Cell],
    finished: Callable[[Cell], bool],
    name: Callable[[Cell], str],
    keep_going: bool,
    command: Sequence[str] | None,
    directory: Path,
    stopped: str | None = None,
    forced: bool = False,
    env: Mapping[str, str] | None = None,
) -> int | None:
    """What the workflow's ``onerror`` does under a disk budget (``before``: each cell -> the cell it waited for in
    this round). Where cells failed for good in this round (in ``failed_now``, not ``failed_at_start``) with cells
    not ``finished`` behind them, it prints the line, and with ``keep_going`` and Snakemake's ``command`` known it
    runs the next round from ``directory`` (where Snakemake started) with ``env`` added, and returns its exit
    status; otherwise None. No next round where this one was ``stopped`` (why, in words), or where jobs were
    ``forced`` by something other than the command line (a profile, which the next round would read again)."""
    new = [c for c in failed_now if c not in set(failed_at_start)]
    held = held_behind(before, new, finished)
    if not held:
        return None
    why_not = ""
    if keep_going and command is not None:
        if stopped:
            why_not = f"this invocation was {stopped}"
        elif forced and not forces(command):
            why_not = "a profile forces jobs, which a next round would force again"
    again = keep_going and command is not None and not why_not
    print(held_line([name(c) for c in new], len(held), again, why_not), file=sys.stderr, flush=True)
    if not again:
        return None
    return run_round(next_round_command(command), directory, env or {})
