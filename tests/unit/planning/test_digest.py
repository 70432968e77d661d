"""graft digest: a record of a results tree, and the lines that say how another tree differs from it."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from graft.cli import main
from graft.errors import ConfigError
from graft.planning import digest
from graft.results import ResultsTree

NUMERICS = {"mode": "avx2", "environment": {"ATEN_CPU_CAPABILITY": "avx2"}, "threads": 1, "cpu": "A"}


def make_tree(root, weights=None):
    tree = ResultsTree(root)
    (tree.toy / "data" / "test").mkdir(parents=True)
    (tree.toy / "data" / "train.jsonl").write_text('{"id": 1}\n')
    (tree.toy / "data" / "test" / "add.jsonl").write_text('{"id": 2}\n')
    model = tree.toy / "models" / "m"
    model.mkdir(parents=True)
    weights = weights or {"a.weight": torch.arange(6.0).reshape(2, 3), "b.bias": torch.ones(3)}
    save_file(weights, model / "model.safetensors")
    (model / "tokenizer.json").write_text("{}")
    run = tree.run("grpo_n8", "m", 0)
    run.root.mkdir(parents=True)
    rows = [{"step": s, "model": "m", "reward_mean": 0.25 * s, "rollout_s": 1.0 + s} for s in range(3)]
    run.metrics.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run.run_json.write_text(json.dumps({"numerics": NUMERICS}))
    run.done.write_text("{}")
    result = {"checkpoint": str(root / "x"), "k": 1, "benchmarks": {"add": {"pass@1": 0.5}, "sub": {"pass@1": 0.25}}}
    path = tree.eval_file("grpo_n8", "m", 0, "m", 2)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(result))
    return tree


def rec(tree):
    return digest.record(tree, "grpo_n8", "m", 0)


def edit_json(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_a_tree_reproduces_its_own_record_and_a_copy_elsewhere(tmp_path):
    a, b = make_tree(tmp_path / "a"), make_tree(tmp_path / "b")  # the evaluation's checkpoint path differs
    assert digest.differences(rec(a), rec(a)) == []
    assert digest.differences(rec(a), rec(b)) == []


def test_timings_are_not_part_of_the_record(tmp_path):
    tree = make_tree(tmp_path)
    before = rec(tree)
    rows = [json.loads(line) for line in tree.run("grpo_n8", "m", 0).metrics.read_text().splitlines()]
    tree.run("grpo_n8", "m", 0).metrics.write_text("".join(json.dumps({**r, "rollout_s": 9.0}) + "\n" for r in rows))
    assert digest.differences(before, rec(tree)) == []


def test_one_ulp_in_one_tensor_names_the_file_the_tensor_and_its_norm(tmp_path):
    expected = rec(make_tree(tmp_path / "a"))
    weights = {"a.weight": torch.arange(6.0).reshape(2, 3), "b.bias": torch.ones(3)}
    weights["a.weight"][1, 2] = torch.nextafter(torch.tensor(5.0), torch.tensor(6.0))
    lines = digest.differences(expected, rec(make_tree(tmp_path / "b", weights)))
    assert len(lines) == 1
    assert lines[0].startswith("toy/models/m/model.safetensors: 1 of 2 tensors differ: a.weight norm ")
    assert "(expected 7.4161" in lines[0]


def test_a_metric_difference_names_the_first_row_and_key(tmp_path):
    tree = make_tree(tmp_path)
    expected = rec(tree)
    metrics = tree.run("grpo_n8", "m", 0).metrics
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    rows[1]["reward_mean"] = 0.3
    metrics.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert digest.differences(expected, rec(tree)) == [
        "runs/grpo_n8/m/seed0/metrics.jsonl: first difference at step 1 model m: reward_mean 0.3 (expected 0.25)"
    ]
    metrics.write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    assert digest.differences(expected, rec(tree)) == ["runs/grpo_n8/m/seed0/metrics.jsonl: 2 rows, expected 3"]


def test_an_evaluation_difference_shows_the_scores_and_data_and_tokenizer_changes_are_named(tmp_path):
    tree = make_tree(tmp_path)
    expected = rec(tree)
    edit_json(tree.eval_file("grpo_n8", "m", 0, "m", 2), lambda d: d["benchmarks"]["add"].update({"pass@1": 0.75}))
    (tree.toy / "data" / "test" / "add.jsonl").write_text('{"id": 3}\n')
    (tree.toy / "models" / "m" / "tokenizer.json").write_text('{"v": 1}')
    lines = digest.differences(expected, rec(tree))
    assert lines[0].startswith("toy/data/test/add.jsonl: different bytes")
    assert lines[1] == "toy/models/m/tokenizer.json: different bytes"
    assert (
        lines[2] == "eval/grpo_n8/m/seed0/m/step_00002.json: differs: add 0.75 (expected 0.5), sub 0.25 (expected 0.25)"
    )


def test_the_hint_names_a_differing_numerics_setting_and_ignores_the_cpu_name():
    recorded = {"numerics": NUMERICS, "versions": {"torch": "2.13.0+cpu"}}
    found = {"numerics": {**NUMERICS, "cpu": "B"}, "versions": {"torch": "2.13.0+cpu"}}
    assert "equal the record's" in digest.settings_hint(recorded, found)
    found["numerics"] = {**NUMERICS, "environment": {"ATEN_CPU_CAPABILITY": None}, "mode": "native"}
    found["versions"] = {"torch": "2.14.1"}
    hint = digest.settings_hint(recorded, found)
    assert "numerics/environment/ATEN_CPU_CAPABILITY here None, recorded 'avx2'" in hint
    assert "numerics/mode here 'native'" in hint and "versions/torch here '2.14.1', recorded '2.13.0+cpu'" in hint


def test_the_command_line_writes_checks_and_fails_with_the_differences(tmp_path, capsys):
    tree = make_tree(tmp_path / "t")
    record = tmp_path / "record.json"
    argv = ["digest", "--results", str(tree.root), "--cell", "grpo_n8/m/seed0"]
    assert main([*argv, "--write", str(record)]) == 0
    assert main([*argv, "--check", str(record)]) == 0
    assert "reproduces" in capsys.readouterr().out
    weights = load_file(tree.toy / "models" / "m" / "model.safetensors")
    save_file({k: v * 2 for k, v in weights.items()}, tree.toy / "models" / "m" / "model.safetensors")
    assert main([*argv, "--check", str(record)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("digest: toy/models/m/model.safetensors: 2 of 2 tensors differ")
    assert err[-1].startswith("digest: the numerics pin, threads and versions equal the record's")


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "does not exist"), ("{", "is not JSON"), ('{"format": 0}', "is not a digest record of format 1")],
)
def test_a_bad_record_is_refused_with_one_line(tmp_path, content, message):
    path = tmp_path / "record.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        digest.read_record(path)


def test_a_tree_without_the_cell_is_refused_before_hashing(tmp_path):
    with pytest.raises(ConfigError, match="is missing; run the main job"):
        rec(ResultsTree(tmp_path))


def test_a_malformed_cell_argument_is_refused(tmp_path, capsys):
    assert main(["digest", "--results", str(tmp_path), "--cell", "grpo_n8/smol", "--check", "x"]) == 2
    err = capsys.readouterr().err
    assert "is not <method>/<cell>/seed<S>" in err and err.count("\n") == 1


def test_a_check_of_some_models_ignores_the_others_and_refuses_unknown_names(tmp_path, capsys):
    tree = make_tree(tmp_path / "t")
    other = tree.toy / "models" / "o"
    other.mkdir()
    save_file({"c.weight": torch.zeros(2)}, other / "model.safetensors")
    (other / "tokenizer.json").write_text("{}")
    expected = rec(tree)
    (other / "model.safetensors").unlink()  # a tree that built only model m
    found = rec(tree)
    assert digest.differences(expected, found) == ["toy/models/o: missing"]
    assert digest.differences(expected, found, digest.checked_models(expected, ["m"])) == []
    weights = load_file(tree.toy / "models" / "m" / "model.safetensors")
    save_file({k: v + 1 for k, v in weights.items()}, tree.toy / "models" / "m" / "model.safetensors")
    assert digest.differences(expected, rec(tree), ["m"])[0].startswith("toy/models/m/model.safetensors")
    with pytest.raises(ConfigError, match="--models: x; the record's models: m, o"):
        digest.checked_models(expected, ["m", "x"])
    record = tmp_path / "record.json"
    argv = ["digest", "--results", str(tree.root), "--cell", "grpo_n8/m/seed0"]
    assert main([*argv, "--write", str(record), "--models", "m"]) == 2
    assert "--models goes with --check" in capsys.readouterr().err
    assert not record.exists()


@pytest.mark.parametrize(
    ("model", "vendor"),
    [("AMD EPYC 7763 64-Core Processor", "amd"), ("Intel(R) Xeon(R) Processor", "intel"), ("", "other")],
)
def test_the_digest_check_finds_the_record_of_the_machine_s_cpu_vendor(monkeypatch, model, vendor):
    """Under the same pin AMD EPYC and Intel Xeon give different digits, so each vendor has its record; every
    record checked in belongs to a vendor the check can name."""
    from pathlib import Path

    from graft import numerics

    monkeypatch.setattr(numerics, "cpu_model", lambda: model)
    assert numerics.cpu_vendor() == vendor
    records = sorted(p.name for p in (Path(__file__).resolve().parents[3] / "config" / "digests").glob("*.json"))
    assert records == ["default.intel.json", "default.json"]
