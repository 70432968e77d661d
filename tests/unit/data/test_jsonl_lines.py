"""JSON Lines as the data readers take them: a byte-order mark is skipped, lines end at ``\\n`` only (a raw U+2028
inside a string is text), an empty problem is refused naming its file and line, and an archive dump's null or
non-text response is refused naming its file and line rather than imported as the text 'None'."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from graft.cli import main
from graft.data.imports import read_dump
from graft.data.problems import load_problems, read_jsonl
from graft.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]
ROWS = [{"id": f"p{i}", "problem": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(3)]
TEXT = "".join(json.dumps(row) + "\n" for row in ROWS)
MESSAGES = "(or a list of messages)"


def test_a_byte_order_mark_is_skipped_as_the_config_reader_skips_it(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + TEXT.encode())
    assert [p.id for p in load_problems(path)] == ["p0", "p1", "p2"]


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85"])  # what str.splitlines cuts, JSON leaves raw
def test_a_raw_line_separator_inside_a_string_is_text(tmp_path, separator):
    row = {"id": "q", "problem": f"What is 1{separator}+ 1?", "answer": "2"}
    path = tmp_path / "x.jsonl"
    path.write_text(TEXT + json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    assert separator in path.read_text(encoding="utf-8")
    assert load_problems(path)[-1].problem == row["problem"]


def test_windows_line_ends_and_blank_lines_are_read_as_before(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(("\n" + TEXT.replace("\n", "\r\n") + "\r\n\n").encode())
    assert [number for number, _ in read_jsonl(path, "data")] == [2, 3, 4]


@pytest.mark.parametrize("field", ["problem", "id"])
@pytest.mark.parametrize("empty", ["", "  \t"])
def test_an_empty_problem_or_id_is_refused_naming_file_and_line(tmp_path, field, empty):
    path = tmp_path / "train.jsonl"
    path.write_text(TEXT + json.dumps({**ROWS[0], "id": "q", field: empty}) + "\n")
    with pytest.raises(ConfigError) as err:
        load_problems(path, "data.train")
    assert str(err.value) == f"data.train: '{path}' line 4 has an empty {field!r}; expected text"


def test_graft_train_refuses_an_empty_problem_before_anything_is_written(tmp_path, capsys):
    from helpers.own_pair import own_pair_config

    config = own_pair_config(tmp_path)
    raw = yaml.safe_load(config.read_text())
    raw["scale"] = {}  # one process with the Hugging Face sampler
    config.write_text(yaml.safe_dump(raw))
    train = tmp_path / "train.jsonl"
    train.write_text(train.read_text() + json.dumps({"id": "blank", "problem": "", "answer": "1"}) + "\n")
    out = tmp_path / "run"
    argv = ["train", "--config", str(config), "--method", "grpo_n8", "--models", "qwen25", "--seed", "0"]
    capsys.readouterr()
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"graft: error: data.train: '{train}' line 65 has an empty 'problem'; expected text\n"
    assert not out.exists()


JSON_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
"""Text of any characters, line and paragraph separators, form feeds and NUL included."""


@settings(max_examples=80)
@given(
    st.lists(st.tuples(JSON_TEXT, JSON_TEXT), min_size=1, max_size=5, unique_by=lambda row: row[0]),
    st.booleans(),
    st.sampled_from(["\n", "\r\n"]),
    st.booleans(),
)
def test_any_jsonl_file_reads_back_its_records_or_refuses_an_empty_field_in_one_line(rows, bom, end, ascii_only):
    """Whatever its text, a record is read back whole from its line; one whose id or problem is blank is refused
    naming its line."""
    import tempfile

    records = [{"id": ident, "problem": problem, "answer": "1"} for ident, problem in rows]
    text = "".join(json.dumps(r, ensure_ascii=ascii_only) + end for r in records)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.jsonl"
        path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
        blank = next((i for i, r in enumerate(records) if not r["id"].strip() or not r["problem"].strip()), None)
        if blank is None:
            assert [(p.id, p.problem) for p in load_problems(path)] == rows
        else:
            with pytest.raises(ConfigError) as err:
                load_problems(path)
            assert f"line {blank + 1} has an empty" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("fmt", "record", "message"),
    [
        ("verl", {"input": "What is 1 + 1?", "output": None, "score": 1}, "'output' is null; expected text"),
        ("verl", {"input": None, "output": "2", "score": 1}, "'input' is null; expected text"),
        ("verl", {"input": "What is 1 + 1?", "output": 2, "score": 1}, "'output' is a number; expected text"),
        ("jsonl", {"step": 0, "prompt": "What?", "response": None}, "'response' is null; expected text"),
        ("jsonl", {"step": 0, "prompt": "What?", "completion": {"a": 1}}, "'completion' is an object; expected"),
        ("jsonl", {"step": 0, "prompt": True, "response": "2"}, "'prompt' is a boolean; expected text"),
    ],
)
def test_a_dumped_null_or_non_text_response_is_refused_naming_file_and_line(tmp_path, fmt, record, message):
    dump = tmp_path / "dump"
    dump.mkdir()
    path = dump / ("1.jsonl" if fmt == "verl" else "rollouts.jsonl")
    good = {"input": "What is 0 + 0?", "output": "0"} if fmt == "verl" else {"step": 0, "prompt": "Q", "response": "0"}
    path.write_text(json.dumps(good) + "\n" + json.dumps(record) + "\n")
    with pytest.raises(ConfigError) as err:
        read_dump(dump, fmt)
    assert str(err.value).startswith(f"--in: '{path}' line 2: {message}"), err.value


def test_graft_archive_import_refuses_a_null_response_before_writing_anything(tmp_path, capsys):
    dump = tmp_path / "dump"
    dump.mkdir()
    (dump / "1.jsonl").write_text(json.dumps({"input": "What is 1 + 1?", "output": None, "score": 0}) + "\n")
    out = tmp_path / "archive"
    argv = ["archive", "import", "--config", str(ROOT / "config" / "smoke.yaml"), "--model", "smol"]
    capsys.readouterr()
    assert main([*argv, "--format", "verl", "--in", str(dump), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"graft: error: --in: '{dump / '1.jsonl'}' line 1: 'output' is null; expected text {MESSAGES}\n"
    assert not out.exists()
