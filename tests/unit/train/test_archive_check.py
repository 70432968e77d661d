"""An archive that replay could not read to its last step, or an archive of another problem set, is refused in one
line before step 0; an archive of another n than the run's is not."""

from __future__ import annotations

import json

import pytest
import torch
import yaml
from helpers.own_pair import own_pair_config

from graft.cli import main
from graft.data.imports import MANIFEST
from graft.data.records import StepRecords, write_step
from graft.errors import ConfigError
from graft.results import trajectory_file
from graft.train.request import check_archive

KNOWN = {f"p{i}" for i in range(8)}


def write_archive(directory, steps=3, n=2, ids=("p0", "p1"), manifest=False):
    """A peer's trajectories as its GRPO run writes them (each step's records of ``ids``, ``n`` responses each),
    with an imported archive's archive.json when ``manifest``."""
    for step in range(steps):
        rewards = torch.tensor([[float(i % 2) for i in range(n)] for _ in ids])
        write_step(
            StepRecords(
                "peer",
                step,
                list(ids),
                [[f"\\boxed{{{i}}}" for i in range(n)] for _ in ids],
                [[[1, 2, 3]] * n for _ in ids],
                [[[-0.5, -0.5, -0.5]] * n for _ in ids],
                rewards,
                rewards - rewards.mean(dim=1, keepdim=True),
                [[False] * n for _ in ids],
            ),
            directory,
        )
    if manifest:
        entries = {str(s): {"source_step": s, "prompts": len(ids)} for s in range(steps)}
        (directory / MANIFEST).write_text(json.dumps({"format": "jsonl", "steps": entries, "follow_prompts": True}))
    return directory


def refusal(archive, steps=3) -> str:
    with pytest.raises(ConfigError) as err:
        check_archive(archive, steps, KNOWN)
    assert "\n" not in str(err.value)
    return str(err.value)


@pytest.mark.parametrize("n", [2, 16])
def test_a_whole_archive_of_the_same_problems_passes_whatever_its_n(tmp_path, n):
    check_archive(write_archive(tmp_path / "a", n=n), 3, KNOWN)
    check_archive(write_archive(tmp_path / "b", n=n, manifest=True), 3, KNOWN)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: b[: len(b) // 2], "is not a readable Parquet file"),  # truncated: the footer is gone
        (lambda b: b[:4] + bytes(len(b) - 8) + b[-4:], "is not a readable Parquet file"),  # zeroed, footer magic kept
        (lambda b: b"\xde\xad" * 64, "is not a readable Parquet file"),
    ],
)
def test_a_damaged_step_past_the_first_is_refused_before_step_0(tmp_path, damage, message):
    archive = write_archive(tmp_path / "a")
    path = trajectory_file(archive, 2)
    path.write_bytes(damage(path.read_bytes()))
    assert f"archive: step 2: '{path}' {message}" in refusal(archive)


def test_an_archive_shorter_than_the_run_is_refused_before_step_0(tmp_path):
    archive = write_archive(tmp_path / "a", steps=2)
    assert f"archive: no records for step 2 ('{trajectory_file(archive, 2)}' is missing)" in refusal(archive)


def test_an_archive_of_another_problem_set_is_refused_naming_the_first_missing_id(tmp_path):
    archive = write_archive(tmp_path / "a", ids=("p0", "q7"))
    message = refusal(archive)
    assert f"--peer-archive: step 0 of '{archive}' holds prompt 'q7', which data.train lacks" in message


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda text: text[: len(text) // 2], "is not JSON"),
        (lambda text: text.replace("é", "").encode("latin-1") + b"\xe9", "is not JSON"),
        (lambda text: json.dumps({"steps": [1, 2]}), "has no 'steps' object of per-step entries"),
        (lambda text: text.replace('"2": {', '"7": {'), "gives step 2 no entry; its step file holds 2"),
        (
            lambda text: text.replace('"prompts": 2}}', '"prompts": 5}}'),
            "gives step 2 5 prompts; its step file holds 2",
        ),
    ],
)
def test_a_damaged_or_inconsistent_archive_manifest_is_refused_naming_it(tmp_path, change, message):
    archive = write_archive(tmp_path / "a", manifest=True)
    changed = change((archive / MANIFEST).read_text())
    (archive / MANIFEST).write_bytes(changed if isinstance(changed, bytes) else changed.encode())
    text = refusal(archive)
    assert text.startswith(f"--peer-archive: '{archive / MANIFEST}' ") and message in text


def test_graft_train_refuses_a_damaged_archive_before_loading_a_model(tmp_path, capsys):
    config = own_pair_config(tmp_path)
    raw = yaml.safe_load(config.read_text())
    raw["scale"] = {}  # one process with the Hugging Face sampler
    config.write_text(yaml.safe_dump(raw))
    archive = write_archive(tmp_path / "archive")
    trajectory_file(archive, 1).write_bytes(b"PAR1 garbage")
    (tmp_path / "qwen25" / "model.safetensors").unlink()  # any model load would stop on this instead
    capsys.readouterr()
    argv = ["train", "--config", str(config), "--method", "replay", "--models", "qwen25", "--seed", "0"]
    assert main([*argv, "--steps", "3", "--peer-archive", str(archive), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert f"archive: step 1: '{trajectory_file(archive, 1)}' is not a readable Parquet file" in err
    assert err.count("\n") == 1
    # the training problems are read as the grader reads them, before any model loads
    write_archive(archive)
    train = tmp_path / "train.jsonl"
    train.write_text(train.read_text() + json.dumps({"id": "bad", "problem": "What?", "answer": "\\$"}) + "\n")
    assert main([*argv, "--steps", "3", "--peer-archive", str(archive), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert f"data.train: '{train}' line 65 (id 'bad'): gold answer '\\\\$' is not an answer math-verify parses" in err
