"""The next round of an invocation under ``workflow.disk_budget_gb``: Snakemake runs no job downstream of a failed
one, so a cell that failed for good holds back the cells waiting behind it in its lane (graft.planning.turns). With
``--keep-going`` the user asked for every cell that can complete to complete, so the workflow's ``onerror`` runs the
same command once more, in which those cells wait in another lane; without it, the line says to run it again.

Each round needs a cell that failed anew with cells behind it, so the rounds end. The next round runs while this
one still holds Snakemake's lock on the working directory (onerror runs inside it), so no other invocation can
start in between; it therefore runs with ``--nolock``, and this one only ends after it.
"""

from __future__ import annotations

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
"""Words of the line for an invocation without ``--keep-going``, which stopped at the first failure."""


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


def next_round_command(argv: Sequence[str]) -> list[str]:
    """The command of the next round: Snakemake's own ``argv`` (its command line, program first) run by this
    Python, without the lock that this round still holds and without the options that force jobs (``FORCING``)."""
    kept, words = [], list(argv[1:])
    while words:
        word = words.pop(0)
        name = _forcing(word.split("=", 1)[0])
        if name:
            if name == "--forcerun" and "=" not in word:
                while words and not words[0].startswith("-"):
                    words.pop(0)
            continue
        if word.startswith("-") and not word.startswith("--") and len(word) > 2 and word[1:].isalpha():
            # one-letter flags together (-kF): the forcing ones dropped; -R takes the rest of the word as its value,
            # or, last, the words up to the next option
            rest = ""
            for at, letter in enumerate(word[1:], start=1):
                if letter == "R":
                    if at == len(word) - 1:
                        while words and not words[0].startswith("-"):
                            words.pop(0)
                    break
                if f"-{letter}" not in FORCING:
                    rest += letter
            if rest:
                kept.append(f"-{rest}")
            continue
        kept.append(word)
    return [sys.executable, "-m", "snakemake", *kept, "--nolock"]


def held_line(failed: Iterable[str], held: int, again: bool) -> str:
    """The line for the end of a round in which the cells named ``failed`` failed for good with ``held`` cells
    behind them; ``again``: whether the workflow runs the next round itself (``--keep-going``)."""
    names = ", ".join(sorted(failed))
    return (
        f"graft: {held} cell(s) of the disk budget's lanes waited behind {names}, which failed for good on its last "
        f"attempt (failed.json beside the run, kept with its checkpoints); {AGAIN if again else BY_HAND}"
    )


def after_failures(
    before: Mapping[Cell, Cell],
    failed_at_start: Iterable[Cell],
    failed_now: Iterable[Cell],
    finished: Callable[[Cell], bool],
    name: Callable[[Cell], str],
    keep_going: bool,
    command: Sequence[str] | None,
    directory: Path,
) -> int | None:
    """What the workflow's ``onerror`` does under a disk budget (``before``: each cell -> the cell it waited for in
    this round). Where cells failed for good in this round (in ``failed_now``, not ``failed_at_start``) with cells
    not ``finished`` behind them, it prints the line, and with ``keep_going`` and Snakemake's ``command`` known it
    runs the next round from ``directory`` (where Snakemake started) and returns its exit status; otherwise None."""
    new = [c for c in failed_now if c not in set(failed_at_start)]
    held = held_behind(before, new, finished)
    if not held:
        return None
    again = keep_going and command is not None
    print(held_line([name(c) for c in new], len(held), again), file=sys.stderr, flush=True)
    if not again:
        return None
    return subprocess.run(next_round_command(command), cwd=directory, check=False).returncode
