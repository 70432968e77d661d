"""``graft evaluate`` refuses, in one line and before anything loads, a checkpoint that its manifest says is damaged,
a model directory with a garbled file, and a checkpoint of another model than the one it is evaluated as."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from helpers.own_pair import own_pair_config
from helpers.tiny_qwen3 import tiny_qwen3

from graft.cli import main
from graft.config import load_config
from graft.eval.evaluate import check_checkpoint
from graft.results import RunDir
from graft.train.checkpoint import damage, write_manifest


@pytest.fixture
def run(tmp_path):
    """The own-pair example's config and a run of its model qwen25 with one checkpoint (step 2) and its manifest."""
    config = own_pair_config(tmp_path)
    run = RunDir(tmp_path / "run")
    shutil.copytree(tmp_path / "qwen25", run.checkpoint(2) / "qwen25")
    write_manifest(run.checkpoint(2))
    run.run_json.write_text(json.dumps({"models": ["qwen25"], "seed": 0}))
    return config, run


def refused(argv: list[str], capsys) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def evaluate(config, run, *extra: str) -> list[str]:
    return ["evaluate", "--config", str(config), *extra]


def test_an_intact_checkpoint_passes(run):
    config, run = run
    checkpoint = run.checkpoint(2) / "qwen25"
    assert check_checkpoint(load_config(config), "qwen25", checkpoint, "--run") == checkpoint


@pytest.mark.parametrize(
    ("name", "change", "message"),
    [
        # the same length, other bytes: only the manifest tells
        (
            "model.safetensors",
            lambda b: b[:-8] + bytes(8),
            "does not match .*manifest.json'.*does not match its sha256",
        ),
        ("config.json", lambda b: b.replace(b"{", b"{ ", 1), "qwen25/config.json has .* bytes, the manifest says"),
        ("model.safetensors", lambda b: b[:-100], "is .* bytes where its header says"),
        ("tokenizer.json", lambda b: b[: len(b) // 3], "tokenizer.json' is not JSON"),
        ("tokenizer_config.json", lambda b: b"\xff\xfe" + b, "tokenizer_config.json' is not JSON"),
    ],
)
@pytest.mark.parametrize("how", ["--checkpoint", "--run"])
def test_a_damaged_checkpoint_is_refused_naming_the_file(run, capsys, tmp_path, name, change, message, how):
    config, run = run
    path = run.checkpoint(2) / "qwen25" / name
    path.write_bytes(change(path.read_bytes()))
    if how == "--checkpoint":
        argv = ["--model", "qwen25", "--checkpoint", str(path.parent), "--out", str(tmp_path / "e.json")]
    else:
        argv = ["--run", str(run.root), "--out-dir", str(tmp_path / "evals")]
    err = refused(evaluate(config, run, *argv), capsys)
    assert err.startswith(f"graft: error: {how}: '{path.parent}") and re.search(message, err), err
    assert not (tmp_path / "e.json").exists() and not (tmp_path / "evals").exists()


def test_a_checkpoint_of_another_model_is_refused(run, capsys, tmp_path):
    config, run = run
    other = RunDir(tmp_path / "other").checkpoint(1) / "qwen25"  # an intact checkpoint of a wider model
    shutil.copytree(run.checkpoint(2) / "qwen25", other)
    tiny_qwen3(vocab=300, hidden=48, head_dim=24).save_pretrained(other, safe_serialization=True)
    write_manifest(other.parent)
    assert damage(other.parent) is None
    argv = ["--model", "qwen25", "--checkpoint", str(other), "--out", str(tmp_path / "e.json")]
    err = refused(evaluate(config, run, *argv), capsys)
    assert f"'{other}' is not a checkpoint of model 'qwen25': its config.json has hidden_size 48 where " in err
    assert "models.qwen25.path's has 32" in err


def test_a_run_evaluated_as_a_model_it_did_not_train_is_refused(run, capsys, tmp_path):
    config, run = run
    argv = ["--model", "smollm2", "--run", str(run.root), "--out-dir", str(tmp_path / "evals")]
    err = refused(evaluate(config, run, *argv), capsys)
    assert f"--model: 'smollm2' is not a model of the run '{run.root}'; its models (run.json): qwen25" in err
    run.run_json.write_bytes(b'{"models": ["qwen2')
    err = refused(evaluate(config, run, "--run", str(run.root), "--out-dir", str(tmp_path / "evals")), capsys)
    assert f"--run: '{run.run_json}' is not a run record with a list of 'models'" in err


@pytest.mark.parametrize("garbage", [b'{"files": {"qwen25/config.json": {"size": 3', b"\xff\xfe{}", b'{"files": []}'])
def test_a_pruned_checkpoint_with_a_corrupt_manifest_is_refused_naming_the_manifest(run, capsys, tmp_path, garbage):
    """Pruning leaves a checkpoint's manifest alone, and the evaluation kept beside the run is matched through it."""
    config, run = run
    shutil.rmtree(run.checkpoint(2) / "qwen25")
    manifest = run.checkpoint(2) / "manifest.json"
    manifest.write_bytes(garbage)
    err = refused(evaluate(config, run, "--run", str(run.root), "--out-dir", str(tmp_path / "evals")), capsys)
    assert err.startswith(f"graft: error: '{manifest}' is unreadable (") and '{"files": {"<model>/<file>"' in err, err
    assert not (tmp_path / "evals").exists()
