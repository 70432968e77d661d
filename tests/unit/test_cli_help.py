"""Every command, nested ones included, says what it does: one line in its parent's ``--help`` at 80 columns, and
that line opening its own ``--help``."""

from __future__ import annotations

import argparse

import pytest

from graft.cli import build_parser


def commands(parser: argparse.ArgumentParser, prefix: tuple = ()):
    """(command words, its parent parser, its own parser) of every command."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*prefix, name), parser, sub
                yield from commands(sub, (*prefix, name))


COMMANDS = list(commands(build_parser()))


def test_every_command_is_covered():
    names = {" ".join(words) for words, _, _ in COMMANDS}
    assert {"evaluate", "reevaluate", "plan", "report", "toy model", "archive import", "fetch dataset"} <= names


@pytest.mark.parametrize(("words", "parent", "parser"), [pytest.param(*c, id=" ".join(c[0])) for c in COMMANDS])
def test_a_command_has_one_line_in_its_parents_help_and_a_description(words, parent, parser, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    listing = parent.format_help().splitlines()
    (line,) = [i for i, text in enumerate(listing) if text.split()[:1] == [words[-1]]]
    summary = listing[line].split(None, 1)[1:]
    assert summary, f"graft {' '.join(words)} has no line in its parent's --help"
    following = listing[line + 1] if line + 1 < len(listing) else ""
    assert not following.startswith(" " * 8), f"graft {' '.join(words)}: its help wraps: {summary[0]!r}"
    assert parser.description and parser.description.lower().startswith(summary[0].lower()), parser.description
