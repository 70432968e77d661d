"""Every numeric option of every ``graft`` command is checked as it is parsed: a bad value exits with code 2 and
one line on stderr, before any config is read or anything computed. ``--set`` and ``--version``."""

from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path

import pytest

import graft
from graft.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
SMOKE = str(ROOT / "config" / "smoke.yaml")

BAD = {
    "non_negative_int": ["-1", "x", "1.5"],
    "seed": ["-1", "x", str(2**63), "1" + "0" * 400],
    "positive_int": ["0", "-2", "two"],
    "fraction": ["1.5", "-0.1", ".nan"],
    "n": ["0", "1"],
    "delta": ["1.5", "-0.1", "inf"],
    "_checkpoint_steps": ["5,x", "-5"],
}
"""Bad values for each of the command line's checked types."""


def commands(parser: argparse.ArgumentParser, prefix: tuple = ()):
    """(command words, parser) of every command, nested ones (``toy data``, ``archive import``) included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*prefix, name))
    if prefix:
        yield prefix, parser


def options():
    found = []
    for words, parser in commands(build_parser()):
        for action in parser._actions:
            assert action.type not in (int, float), f"graft {' '.join(words)} {action.option_strings}: unchecked"
            name = getattr(action.type, "__name__", None)
            if name in BAD:
                found += [(words, action.option_strings[0], value) for value in BAD[name]]
    return found


OPTIONS = options()


def test_every_numeric_option_of_every_command_is_covered():
    covered = {(words, option) for words, option, _ in OPTIONS}
    for words, option in [
        (("train",), "--seed"),
        (("train",), "--steps"),
        (("toy", "model"), "--threads"),
        (("archive", "import"), "--min-match"),
        (("evaluate",), "--steps"),
        (("complementarity",), "--n"),
        (("complementarity",), "--delta"),
        (("complementarity",), "--prompts"),
    ]:
        assert (words, option) in covered


@pytest.mark.parametrize(
    ("words", "option", "value"), OPTIONS, ids=lambda x: " ".join(x) if isinstance(x, tuple) else x
)
def test_a_bad_numeric_option_exits_2_with_one_line(words, option, value, capsys):
    assert main([*words, option, value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"argument {option}" in err and "is not allowed; expected " in err, err


def test_a_missing_argument_is_one_line_too(capsys):
    assert main(["plan"]) == 2
    assert capsys.readouterr().err == "graft plan: error: the following arguments are required: --config\n"


def test_set_overrides_fields_and_a_methods_switches(tmp_path, capsys):
    assert main(["plan", "--config", SMOKE]) == 0
    default = capsys.readouterr().out.splitlines()[0]
    assert main(["plan", "--config", SMOKE, "--set", "train.steps=5", "--set", "train.lr=1e-5"]) == 0
    longer = capsys.readouterr().out.splitlines()[0]
    evaluations = lambda line: int(re.search(r"(\d+) checkpoint evaluations", line)[1])  # noqa: E731
    assert evaluations(longer) > evaluations(default)
    out = tmp_path / "run"
    train = ["train", "--config", SMOKE, "--method", "graft", "--models", "smol,qwen", "--seed", "0", "--out", str(out)]
    for setting, message in [
        ("method.delta=1.5", "graft: error: method.delta: 1.5 is not allowed; expected a number in [0, 1)"),
        ("train.grad_clip=-1", "graft: error: config.train.grad_clip: -1 is not allowed; expected a number > 0"),
    ]:
        assert main([*train, "--set", setting]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(message), err
    assert main([*train, "--set", "trainlr"]) == 2
    err = capsys.readouterr().err
    assert (
        err == "graft train: error: argument --set: 'trainlr' is not key=value with a dotted key, e.g. train.lr=1e-5\n"
    )
    assert not out.exists()
    assert main(["plan", "--config", SMOKE, "--set", "method.delta=0.85"]) == 2
    assert "--set method.delta: a method's switches go with graft train --method" in capsys.readouterr().err


def test_version_prints_the_package_version_and_the_commit(capsys):
    assert main(["--version"]) == 0
    line = capsys.readouterr().out.strip()
    commit = r" \(commit [0-9a-f]{7,}( \+ changes)?\)" if shutil.which("git") and (ROOT / ".git").exists() else ""
    assert re.fullmatch(rf"graft {re.escape(graft.__version__)}{commit}", line), line
