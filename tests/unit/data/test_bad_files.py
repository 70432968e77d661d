"""A benchmark or training file that is damaged, or whose gold answer the grader cannot read, is refused at load
with one line naming the file, the line and (for a gold answer) the problem's id."""

from __future__ import annotations

import json

import pytest

from graft.data.problems import load_problems
from graft.errors import ConfigError

ROWS = [{"id": f"p{i}", "problem": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(3)]
TEXT = "".join(json.dumps(row) + "\n" for row in ROWS)


def refusal(path, **kwargs) -> str:
    with pytest.raises(ConfigError) as err:
        load_problems(path, "eval.benchmarks.x", **kwargs)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"eval.benchmarks.x: '{path}' ")
    return message


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: b[:-15], "line 3 is not valid JSON"),  # truncated mid-record
        (lambda b: b.replace(b"What is 1", b"What is \xff"), "line 2 is not UTF-8 text"),
        (lambda b: "é".join(TEXT.split("What")).encode("latin-1"), "line 1 is not UTF-8 text"),
        (lambda b: b + b"\x00\x9c\xfe garbage\n", "line 4 is not UTF-8 text"),
        (lambda b: b + b"[1, 2]\n", "line 4 is not a JSON object"),
        (lambda b: b + TEXT.splitlines(keepends=True)[1].encode(), "line 4 repeats id 'p1'"),
    ],
)
def test_a_damaged_file_is_refused_naming_file_and_line(tmp_path, damage, message):
    path = tmp_path / "x.jsonl"
    path.write_bytes(damage(TEXT.encode()))
    assert message in refusal(path)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"id": "q", "answer": "1"}, "line 4 has no problem: expected 'problem' or 'question' text, or a 'prompt'"),
        ({"id": "q", "problem": "x"}, "line 4 has no answer: expected 'answer', 'ground_truth' or"),
        ({"id": "q", "problem": "x", "solution": "no box"}, "line 4 has no answer"),
    ],
)
def test_a_record_without_its_keys_is_refused(tmp_path, row, message):
    path = tmp_path / "x.jsonl"
    path.write_text(TEXT + json.dumps(row) + "\n")
    assert message in refusal(path)


@pytest.mark.parametrize(
    ("reward", "gold", "why"),
    [
        ("toy", "4.5", "is not an integer (the toy grader compares integers)"),
        ("toy", "twelve", "is not an integer"),
        ("math", "\\$", "is not an answer math-verify parses"),
        ("math", "}{", "is not an answer math-verify parses"),
    ],
)
def test_a_gold_answer_the_grader_cannot_read_is_refused_naming_its_id(tmp_path, reward, gold, why):
    path = tmp_path / "x.jsonl"
    path.write_text(TEXT + json.dumps({"id": "bad", "problem": "What?", "answer": gold}) + "\n")
    assert len(load_problems(path, "eval.benchmarks.x")) == 4  # read alone, the file is well formed
    message = refusal(path, reward=reward)
    assert f"line 4 (id 'bad'): gold answer {gold!r} {why}" in message


@pytest.mark.parametrize("reward", ["toy", "math"])
def test_readable_gold_answers_pass(tmp_path, reward):
    path = tmp_path / "x.jsonl"
    path.write_text(TEXT + json.dumps({"id": "neg", "problem": "What?", "answer": "-7"}) + "\n")
    assert [p.answer for p in load_problems(path, reward=reward)] == ["0", "2", "4", "-7"]
