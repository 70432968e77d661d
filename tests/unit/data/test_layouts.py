"""Prompt sets as graft, TRL and verl users hold them: graft's JSON Lines, TRL's plain and chat prompts, verl's
Parquet, each read into the same problems whatever its extension; a chat prompt rendered by a chat template with
its system message; a bad record of each layout refused in one line naming the file and the line (or row); a hub
dataset fetched offline from a copy in the hub's layout into the JSON Lines the jobs read."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from graft.config.models import HubDataset, hub_dataset
from graft.data.problems import Problem, load_problems, problem_record
from graft.engine.prompts import Message, PromptFormat
from graft.errors import ConfigError
from graft.toy.models import build_tokenizer

ROOT = Path(__file__).resolve().parents[3]
QUESTIONS = [("What is 1 + 1?", "2"), ("What is $2^{10}$ mod 7?", "2"), ("How many sides has a hexagon?", "6")]
SYSTEM = "Reason step by step, then put the answer in \\boxed{}."
TEXT = [Problem(str(i), q, a) for i, (q, a) in enumerate(QUESTIONS, 1)]
CHAT = [Problem(str(i), (Message("system", SYSTEM), Message("user", q)), a) for i, (q, a) in enumerate(QUESTIONS, 1)]


def messages(question: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]


LAYOUTS = {
    "graft": (TEXT, lambda i, q, a: {"id": str(i), "problem": q, "answer": a}),
    "graft, a question and a boxed solution": (
        TEXT,
        lambda i, q, a: {"idx": i, "question": q, "solution": f"$\\boxed{{{a}}}$"},
    ),
    "TRL plain prompt": (TEXT, lambda i, q, a: {"prompt": q, "solution": f"so \\boxed{{{a}}}"}),
    "TRL plain prompt, ground_truth": (TEXT, lambda i, q, a: {"prompt": q, "ground_truth": a}),
    "TRL chat prompt": (CHAT, lambda i, q, a: {"prompt": messages(q), "answer": a}),
    "verl": (
        CHAT,
        lambda i, q, a: {
            "data_source": "lighteval/MATH",
            "prompt": messages(q),
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": a},
            "extra_info": {"split": "train", "index": i},
        },
    ),
}


def write(path: Path, rows: list[dict]) -> Path:
    if path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".parquet"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_reads_into_the_same_problems_whatever_its_extension(tmp_path, layout, suffix):
    expected, row = LAYOUTS[layout]
    path = write(tmp_path / f"set{suffix}", [row(i, q, a) for i, (q, a) in enumerate(QUESTIONS, 1)])
    assert load_problems(path, "data.train", reward="math") == expected


@pytest.mark.parametrize("problems", [TEXT, CHAT], ids=["text", "chat"])
def test_what_graft_writes_reads_back_as_it_was(tmp_path, problems):
    path = write(tmp_path / "x.jsonl", [problem_record(p) for p in problems])
    assert load_problems(path) == problems


def test_gsm8k_answers_are_the_text_after_the_marks():
    from graft.data.problems import to_problem

    record = {"question": "Natalia sold 48 clips...", "answer": "She sold 48/2 = 24 in May.\n#### 1,072"}
    assert to_problem(record, 7, "t") == Problem("7", "Natalia sold 48 clips...", "1072")


@pytest.fixture(scope="module")
def chatml_tokenizer():
    return build_tokenizer(["<|im_start|>user\nWhat is 1 + 1?<|im_end|>\n"] * 4, "gpt2_regex", 300)


def test_a_chat_prompt_goes_through_the_chat_template_with_its_system_message(chatml_tokenizer):
    chatml = (ROOT / "config" / "chat_templates" / "chatml_user.jinja").read_text()
    fmt = PromptFormat("{problem} Let's think step by step.", chat=True, chat_template=chatml)
    assert fmt.render(chatml_tokenizer, CHAT[0].problem) == (
        f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\nWhat is 1 + 1?<|im_end|>\n<|im_start|>assistant\n"
    )
    # a problem's text still fills the template, sent as one user message
    assert fmt.render(chatml_tokenizer, TEXT[0].problem) == (
        "<|im_start|>user\nWhat is 1 + 1? Let's think step by step.<|im_end|>\n<|im_start|>assistant\n"
    )
    # the tokenizer's own chat template where the config names none
    chatml_tokenizer.chat_template = chatml
    assert PromptFormat(chat=True).render(chatml_tokenizer, CHAT[0].problem) == fmt.render(
        chatml_tokenizer, CHAT[0].problem
    )


def test_a_chat_prompt_for_a_model_without_chat_is_refused_in_one_line(chatml_tokenizer):
    with pytest.raises(ConfigError, match=r"^a chat prompt \(a list of messages\) is rendered by a model's chat "):
        PromptFormat().render(chatml_tokenizer, CHAT[0].problem)


@pytest.mark.parametrize(
    ("suffix", "bad", "message"),
    [
        (".jsonl", {"id": "q", "problem": "What?"}, "line 2 has no answer: expected 'answer', 'ground_truth'"),
        (".jsonl", {"prompt": 3, "answer": "1"}, "line 2: 'prompt' is a number; expected text or a list of chat"),
        (".jsonl", {"prompt": "  ", "answer": "1"}, "line 2 has an empty 'prompt'; expected text"),
        (
            ".jsonl",
            {"prompt": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}], "answer": "1"},
            "line 2: 'prompt' ends with a message of role 'assistant'; a chat prompt ends with the user's message",
        ),
        (".json", {"prompt": [{"role": "user"}], "answer": "1"}, "line 2: 'prompt' is a list but not of chat messages"),
        (".json", {"prompt": [], "answer": "1"}, "line 2: 'prompt' is an empty list; a chat prompt ends with"),
        (
            ".jsonl",
            {"prompt": messages("Q"), "reward_model": {"ground_truth": ["1", "one"]}, "extra_info": {"index": 9}},
            "line 2: 'reward_model.ground_truth' is a list; expected text or a number",
        ),
        (
            ".parquet",
            {"prompt": messages("Q"), "reward_model": {"ground_truth": "1"}, "extra_info": {"index": 1}},
            "row 2 repeats id '1'",
        ),
        (".parquet", {"prompt": messages("Q"), "reward_model": {"ground_truth": None}}, "row 2 has no answer"),
        (".parquet", {"prompt": messages("Q"), "answer": "1", "id": 1.5}, "row 2: 'id' is a number; expected text"),
    ],
)
def test_a_bad_record_of_each_layout_is_refused_naming_the_file_and_the_line(tmp_path, suffix, bad, message):
    good = LAYOUTS["verl" if suffix == ".parquet" else "graft"][1](1, "What is 1 + 1?", "2")
    path = tmp_path / f"set{suffix}"
    if suffix == ".parquet":  # one schema for both rows: each has the other's columns, empty
        write(path, [{**dict.fromkeys(bad), **good}, {**dict.fromkeys(good), **bad}])
    else:
        write(path, [good, bad])
    with pytest.raises(ConfigError) as err:
        load_problems(path, "eval.benchmarks.x")
    assert str(err.value).startswith(f"eval.benchmarks.x: '{path}' ") and "\n" not in str(err.value)
    assert message in str(err.value), err.value


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("set.csv", "problem,answer\n", "'{path}' is neither JSON Lines nor Parquet; expected a file ending in .jsonl"),
        ("set.parquet", "not parquet", "'{path}' is not a readable Parquet file"),
        ("set.json", '[{"problem": "Q", "answer": "1"}]', "'{path}' line 1 is not a JSON object"),
    ],
)
def test_a_file_of_no_supported_layout_is_refused_in_one_line(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ConfigError) as err:
        load_problems(path, "data.train")
    assert str(err.value).startswith("data.train: " + message.format(path=path)) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hf://openai/gsm8k?split=train&config=main", HubDataset("openai/gsm8k", "train", "main")),
        ("hf://HuggingFaceH4/MATH-500?split=test", HubDataset("HuggingFaceH4/MATH-500", "test")),
        ("hf/openai/gsm8k/main/train", HubDataset("openai/gsm8k", "train", "main")),
        ("hf/HuggingFaceH4/MATH-500/test", HubDataset("HuggingFaceH4/MATH-500", "test")),
        ("math500", None),
    ],
)
def test_a_hub_dataset_is_named_by_its_id_or_its_name_in_the_results_tree(text, expected):
    found = hub_dataset(text, "--name")
    assert found == expected
    if found is not None:  # each spelling gives the other back
        assert hub_dataset(found.id, "x") == hub_dataset(found.name, "x") == found


@pytest.mark.parametrize(
    "text",
    [
        "hf://openai/gsm8k",
        "hf://gsm8k?split=train",
        "hf://openai/gsm8k?split=train&subset=main",
        "hf://openai/gsm8k?split=train&config=",
        "hf://openai/gsm8k?split=train[:100]",
        "hf://openai/gsm8k/main?split=train",
        "hf/openai/gsm8k",
    ],
)
def test_a_malformed_hub_dataset_is_refused_in_one_line(text):
    with pytest.raises(ConfigError) as err:
        hub_dataset(text, "config.data.train")
    assert str(err.value) == (
        f"config.data.train: {text!r} is not a hub dataset; expected hf://<owner>/<name>?split=<split>[&config=<config>]"
    )


@pytest.fixture
def mirror(tmp_path, monkeypatch) -> Path:
    """Two repositories as the hub lays them out: one with configs named in its README (as GSM8K's), one in verl's
    layout; the hub itself off."""
    from graft.data.benchmarks import MIRROR_VARIABLE

    root = tmp_path / "mirror"
    gsm8k = root / "openai" / "gsm8k"
    (gsm8k / "main").mkdir(parents=True)
    (gsm8k / "README.md").write_text(
        "---\nconfigs:\n- config_name: main\n  data_files:\n  - split: train\n    path: main/train-*\n"
        "  - split: test\n    path: main/test-*\n---\n"
    )
    answers = [f"Half of {2 * int(a)} is {a}.\n#### {a}" for _, a in QUESTIONS]
    rows = [{"question": q, "answer": text} for (q, _), text in zip(QUESTIONS, answers, strict=True)]
    pq.write_table(pa.Table.from_pylist(rows), gsm8k / "main" / "train-00000-of-00001.parquet")
    pq.write_table(pa.Table.from_pylist(rows[:1]), gsm8k / "main" / "test-00000-of-00001.parquet")
    verl = root / "lab" / "math-verl" / "data"
    verl.mkdir(parents=True)
    rows = [LAYOUTS["verl"][1](i, q, a) for i, (q, a) in enumerate(QUESTIONS, 1)]
    pq.write_table(pa.Table.from_pylist(rows), verl / "train-00000-of-00001.parquet")
    monkeypatch.setenv(MIRROR_VARIABLE, str(root))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    return root


def test_a_hub_dataset_is_fetched_offline_into_json_lines_the_jobs_read(mirror, tmp_path, capsys):
    from graft.cli import main
    from graft.data.fetch import fetch_dataset

    out = tmp_path / "gsm8k.jsonl"
    assert main(["fetch", "dataset", "--name", "hf://openai/gsm8k?split=train&config=main", "--out", str(out)]) == 0
    assert load_problems(out, reward="math") == TEXT
    # by its name in the results tree, as rule fetch_dataset names it, and in verl's layout
    verl = fetch_dataset("hf/lab/math-verl/train", tmp_path / "verl.jsonl")
    assert load_problems(verl) == CHAT
    with pytest.raises(ConfigError, match=r"has no split 'validation'; its splits: train, test$"):
        fetch_dataset("hf://openai/gsm8k?split=validation&config=main", tmp_path / "none.jsonl")
    assert not (tmp_path / "none.jsonl").exists()
