"""Benchmark loading and grading of reference solutions with the training grader (math-verify)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from helpers.benchmarks import REAL_BENCHMARKS, needs_real_benchmarks

from graft.data.problems import load_problems, to_problem
from graft.engine.reward import Grader, last_boxed
from graft.errors import ConfigError

DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.mark.parametrize(
    ("name", "count"),
    [("math500", 3), ("aime24", 3), ("aime25", 3), ("amc23", 3), ("minerva_math", 3)],
)
def test_local_fixtures_normalise(name, count):
    problems = load_problems(DATA / f"{name}.jsonl")
    assert len(problems) == count
    assert all(p.id and p.problem and p.answer for p in problems)


def test_minerva_gold_comes_from_the_solution_box():
    p = to_problem({"problem": "x?", "solution": "so $\\boxed{6.5 \\times 10^{3}}$ m", "idx": 4}, 1, "t")
    assert (p.id, p.answer) == ("4", "6.5 \\times 10^{3}")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "line 1 is not valid JSON"),
        ('{"problem": "x"}', "line 1 has no answer: expected 'answer', 'ground_truth' or"),
        ('{"answer": "1"}', "line 1 has no problem: expected 'problem' or 'question' text, or a 'prompt'"),
        ('{"id": 1, "problem": "a", "answer": "1"}\n{"id": 1, "problem": "b", "answer": "2"}', "repeats id '1'"),
    ],
)
def test_bad_benchmark_files_are_refused_with_one_line(tmp_path, text, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as err:
        load_problems(path)
    assert "\n" not in str(err.value)


def reference_answer(record: dict) -> str | None:
    return last_boxed(record.get("solution") or "")


@needs_real_benchmarks
@pytest.mark.parametrize("name", ["math500", "aime24", "minerva_math"])
def test_reference_solutions_grade_correct_and_swapped_answers_wrong(name):
    records = [json.loads(line) for line in (REAL_BENCHMARKS / f"{name}.jsonl").read_text().splitlines() if line]
    problems = load_problems(REAL_BENCHMARKS / f"{name}.jsonl", reward="math")  # no reference gold refused
    # Only reference solutions that carry a boxed answer can be graded (one AIME24 AoPS write-up has none).
    keep = [i for i, record in enumerate(records) if reference_answer(record) is not None]
    assert len(keep) >= len(records) - 1
    records = [records[i] for i in keep]
    problems = [problems[i] for i in keep]
    responses = [record["solution"] for record in records]
    golds = [p.answer for p in problems]
    rng = random.Random(0)
    swapped = []
    for i, response in enumerate(responses):
        other = golds[(i + rng.randrange(1, len(golds))) % len(golds)]
        box = reference_answer(records[i])
        swapped.append(response.replace(f"\\boxed{{{box}}}", f"\\boxed{{{other}}}"))
    with Grader("math", timeout=600, workers=2) as grader:  # a deadline no loaded machine reaches
        right = grader.grade(responses, golds).rewards
        wrong = grader.grade(swapped, golds).rewards
    failures = [problems[i].id for i, r in enumerate(right) if r != 1.0]
    assert len(failures) <= 0.01 * len(problems), f"{name}: reference solutions graded wrong: {failures}"
    false_pass = [problems[i].id for i, r in enumerate(wrong) if r != 0.0]
    assert len(false_pass) <= 0.01 * len(problems), f"{name}: swapped answers graded right: {false_pass}"
