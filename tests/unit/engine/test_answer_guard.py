"""Answers refused before math-verify (too costly to verify), and real answers never refused."""

from pathlib import Path

import pytest
from helpers.benchmarks import REAL_BENCHMARKS

from graft.data.problems import load_problems
from graft.engine.reward import Grader, too_costly

TEST_DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("1+" * 600, "long"),
        ("{" * 40 + "1" + "}" * 40, "nested"),
        ("9^{9^{9^{9}}}", "tower"),
        ("(10^{10^{10}})!", "tower"),
        ("2 ^ { 3 ^ 4 }", "tower"),
    ],
)
def test_costly_answers_are_named(answer, reason):
    assert too_costly(answer) == reason


@pytest.mark.parametrize("answer", ["\\frac{\\sqrt{3}}{3}", "2^{10}", "e^{x^2}", "10^{100}", "(1, 2]", "x^2+y^2"])
def test_ordinary_answers_pass(answer):
    assert too_costly(answer) is None


def test_no_reference_answer_of_the_benchmarks_is_refused():
    """The few problems of tests/data always; the full sets (1,372 answers) where GRAFT_BENCHMARKS names them."""
    files = sorted(TEST_DATA.glob("*.jsonl")) + sorted(REAL_BENCHMARKS.glob("*.jsonl"))
    answers = [p.answer for f in files for p in load_problems(f)]
    assert len(answers) >= 15 and not [a for a in answers if too_costly(a)]


def test_refused_answers_are_counted_and_never_reach_the_pool():
    grader = Grader("math", timeout=1, workers=1)
    grades = grader.grade(["\\boxed{" + "{" * 50 + "1" + "}" * 50 + "}", "\\boxed{9^{9^{9}}}"], ["1", "2"])
    assert grades.rewards == [0.0, 0.0] and grades.refused == 2 and grades.timeouts == 0
    assert grader._pool is None
