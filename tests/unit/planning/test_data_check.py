"""The data is checked when the plan is made: ``graft plan`` (and ``check_data``, which the workflow's start calls)
reads every data file the config names, refuses a missing one that no rule makes and names the first bad line, in
one line and exit code 2; files that the workflow's rules make (toy data, fetched datasets) are left to them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graft.cli import main
from graft.config import load_config
from graft.errors import ConfigError
from graft.planning.data import check_data, making_rule

ROOT = Path(__file__).resolve().parents[3]
SMOKE = str(ROOT / "config" / "smoke.yaml")
PAPER = str(ROOT / "config" / "paper.yaml")
ROWS = [{"id": f"p{i}", "problem": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(3)]


def plan(capsys, *settings: str, config: str = SMOKE) -> tuple[int, str, str]:
    argv = ["plan", "--config", config]
    for setting in settings:
        argv += ["--set", setting]
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def refusal(capsys, *settings: str, config: str = SMOKE) -> str:
    code, _, err = plan(capsys, *settings, config=config)
    assert code == 2 and err.startswith("graft: error: ") and err.count("\n") == 1, err
    return err.removeprefix("graft: error: ").rstrip("\n")


def test_a_missing_file_that_no_rule_makes_is_refused(capsys):
    assert refusal(capsys, "data.train=/nonexistent/train.jsonl") == (
        "data.train: no such file '/nonexistent/train.jsonl', and no rule of the workflow makes it"
    )
    # under the results tree, but no dataset rule fetch_dataset knows
    assert refusal(capsys, 'eval.benchmarks.x="{results}/data/mine.jsonl"', config=PAPER) == (
        "eval.benchmarks.x: no such file 'results/paper/data/mine.jsonl', and no rule of the workflow makes it"
    )


@pytest.mark.parametrize(
    ("name", "field", "line", "message"),
    [
        ("train.jsonl", "data.train", '{"id": "q", "problem": "What?"}', "line 4 has no answer: expected 'answer'"),
        ("val.json", "eval.validation", "{not json", "line 4 is not valid JSON"),
        ("add.jsonl", "eval.benchmarks.add", '{"prompt": [{"role": "user"}], "answer": "1"}', "line 4: 'prompt' is a"),
    ],
)
def test_the_first_bad_line_is_named(tmp_path, capsys, name, field, line, message):
    path = tmp_path / name
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS) + line + "\n" + "{also bad\n")
    assert refusal(capsys, f"{field}={path}").startswith(f"{field}: '{path}' {message}")


def test_a_bad_parquet_row_is_named(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist([*ROWS, {**ROWS[0], "id": "p1"}]), path)
    assert refusal(capsys, f"data.validation={path}") == f"data.validation: '{path}' row 4 repeats id 'p1'"


def test_chat_prompts_for_a_model_without_chat_are_refused(tmp_path, capsys):
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps({"prompt": [{"role": "user", "content": "What is 1 + 1?"}], "answer": "2"}) + "\n")
    assert refusal(capsys, f"data.train={path}") == (
        f"data.train: '{path}' holds chat prompts (lists of messages), which a chat template renders, but models.smol "
        "has chat: false; set chat: true (and chat_template where its tokenizer ships none)"
    )


def test_good_files_are_counted_and_files_the_rules_make_left_to_them(tmp_path, capsys):
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    code, out, _ = plan(capsys, f"data.train={path}")
    assert code == 0
    assert f"  data.train: '{path}': 3 problems" in out
    assert "  eval.benchmarks.add: 'results/smoke/toy/data/test/add.jsonl', made by rule toy_data" in out


def test_a_hub_dataset_is_left_to_rule_fetch_dataset_but_a_toy_config_has_no_such_rule():
    hub = ("data.train", "hf://openai/gsm8k?split=train&config=main")
    paper = load_config(PAPER, [hub])
    assert paper.data.train == "results/paper/data/hf/openai/gsm8k/main/train.jsonl"
    assert making_rule(paper, paper.data.train) == "fetch_dataset"
    assert "  data.train: 'results/paper/data/hf/openai/gsm8k/main/train.jsonl', made by rule fetch_dataset" in (
        check_data(paper)
    )
    with pytest.raises(ConfigError, match=r"^data\.train: no such file 'results/smoke/data/hf/openai/gsm8k/main/"):
        check_data(load_config(SMOKE, [hub]))
