"""A model directory that a download left incomplete is refused in one line naming the file it lacks, before
transformers reads it: by the check itself, by ``graft plan`` and by ``graft train``."""

from __future__ import annotations

import re

import pytest
import yaml
from helpers.own_pair import own_pair_config
from helpers.tiny_qwen3 import tiny_model_dir

from graft.cli import main
from graft.engine.policy import check_model_dir
from graft.errors import ConfigError


@pytest.mark.parametrize(
    ("missing", "message"),
    [
        ("config.json", "is not a model directory: it lacks config.json"),
        ("tokenizer_config.json", "it lacks tokenizer_config.json (the tokenizer's settings"),
        ("tokenizer.json", "it lacks tokenizer.json (the tokenizer's vocabulary"),
        ("model.safetensors", "it lacks model.safetensors (the weights"),
    ],
)
def test_a_model_directory_missing_a_file_is_refused_naming_it(tmp_path, missing, message):
    model = tiny_model_dir(tmp_path / "m")
    assert check_model_dir(model, "models.a.path") == model
    (model / missing).unlink()
    with pytest.raises(ConfigError) as err:
        check_model_dir(model, "models.a.path")
    assert str(err.value).startswith(f"models.a.path: '{model}' ") and message in str(err.value)
    assert "\n" not in str(err.value)


def test_a_missing_or_truncated_shard_is_refused_naming_it(tmp_path):
    model = tiny_model_dir(tmp_path / "m", shard_bytes=20_000)
    shards = sorted(model.glob("model-*.safetensors"))
    assert len(shards) > 2 and check_model_dir(model, "w") == model
    data = shards[1].read_bytes()
    shards[1].write_bytes(data[:-100])
    with pytest.raises(ConfigError, match=rf"'{shards[1]}' is {len(data) - 100:,} bytes where its header says "):
        check_model_dir(model, "w")
    shards[1].unlink()
    with pytest.raises(ConfigError, match=rf"lacks {shards[1].name} \(1 of the {len(shards)} weight shards "):
        check_model_dir(model, "w")


def test_graft_plan_and_train_refuse_a_half_downloaded_model_in_one_line(tmp_path, capsys):
    config = own_pair_config(tmp_path)
    model = tmp_path / "smollm2"
    (model / "tokenizer.json").unlink()
    capsys.readouterr()  # the directories' build
    assert main(["plan", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"models.smollm2.path: '{model}' is not a complete model directory: it lacks tokenizer.json" in err
    assert err.count("\n") == 1
    # one process with the Hugging Face sampler: what graft train starts with outside torchrun
    raw = yaml.safe_load(config.read_text())
    raw["scale"] = {}
    config.write_text(yaml.safe_dump(raw))
    argv = ["train", "--config", str(config), "--method", "grpo_n8", "--models", "smollm2", "--seed", "0"]
    assert main([*argv, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "it lacks tokenizer.json" in err and err.count("\n") == 1


@pytest.mark.parametrize("name", ["config.json", "tokenizer_config.json", "tokenizer.json"])
@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: b[: len(b) // 2], "is not JSON \\((Unterminated|Expecting)"),
        (lambda b: b"\x89\xfe\x00garbage" + b[9:], "is not JSON \\('utf-8' codec can't decode"),
        (lambda b: b.decode().replace("{", "\u00e9{", 1).encode("latin-1", "replace"), "is not JSON \\("),
        (lambda b: b"[1, 2]", "is not a JSON object"),
    ],
)
def test_a_garbled_json_file_of_a_model_directory_is_refused_naming_it(tmp_path, name, damage, message):
    model = tiny_model_dir(tmp_path / "m")
    (model / name).write_bytes(damage((model / name).read_bytes()))
    with pytest.raises(ConfigError, match=rf"^models.a.path: '{model / name}' ") as err:
        check_model_dir(model, "models.a.path")
    assert "\n" not in str(err.value)
    assert re.search(message, str(err.value))


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (b"\xff\xfe not json", "has no readable safetensors header"),
        (b'{"w": {"dtype": "F32"}}', "has a safetensors header without its tensors' data offsets"),
        (b'{"w": 3}', "has a safetensors header without its tensors' data offsets"),
    ],
)
def test_a_garbled_safetensors_header_is_refused_naming_the_file(tmp_path, header, message):
    model = tiny_model_dir(tmp_path / "m")
    weights = model / "model.safetensors"
    weights.write_bytes(len(header).to_bytes(8, "little") + header + b"\x00" * 64)
    with pytest.raises(ConfigError, match=rf"^w: '{weights}' {message}: a partial download or copy$"):
        check_model_dir(model, "w")
