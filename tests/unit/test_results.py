"""The results tree (graft.results): paths, step names, and atomic writes that leave nothing half-written."""

from __future__ import annotations

from pathlib import Path

import pytest

from graft.results import (
    ResultsTree,
    RunDir,
    atomic_path,
    begin_dir,
    commit_dir,
    parse_step,
    replay_cell,
    step_name,
    trajectory_file,
    write_text,
)


def test_paths_of_a_cell(tmp_path):
    tree = ResultsTree(tmp_path)
    run = tree.run("graft", "P1", 2)
    assert run.root == tmp_path / "runs" / "graft" / "P1" / "seed2"
    assert run.checkpoint(5) == run.root / "checkpoints" / "step_00005"
    assert tree.archive("qwen", 2) == tmp_path / "runs" / "grpo_n8" / "qwen" / "seed2" / "trajectories" / "qwen"
    assert tree.eval_file("graft", "P1", 2, "smol", 5) == tmp_path / "eval/graft/P1/seed2/smol/step_00005.json"
    assert tree.base_eval("smol", 1) == tmp_path / "eval/base/smol/seed1/smol/step_00000.json"
    assert trajectory_file(run.trajectories("smol"), 3).name == "step_00003.parquet"
    assert replay_cell("smol", "qwen") == "smol_from_qwen"


def test_wildcard_patterns_pass_through():
    run = ResultsTree("r").run("{method}", "{cell}", "{seed}")
    assert str(run.done) == "r/runs/{method}/{cell}/seed{seed}/done.json"


@pytest.mark.parametrize(
    ("name", "step"),
    [("step_00012", 12), ("step_00012.json", 12), ("step_00012.parquet", 12), ("step_00012.tmp", None), ("x", None)],
)
def test_parse_step(name, step):
    assert parse_step(name) == step
    if step is not None:
        assert step_name(step) == name.split(".")[0]


def test_checkpoints_skip_temporaries(tmp_path):
    run = RunDir(tmp_path)
    for name in ("step_00002", "step_00004.tmp", "step_00001"):
        (tmp_path / "checkpoints" / name).mkdir(parents=True)
    assert [p.name for p in run.checkpoints()] == ["step_00001", "step_00002"]


def test_eval_files_are_listed_with_their_cell(tmp_path):
    tree = ResultsTree(tmp_path)
    write_text(tree.eval_file("graft", "P1", 0, "smol", 2), "{}")
    write_text(tree.eval_file("graft", "P1", 0, "smol", 2).with_name(".step_00004.tmp.json"), "{}")
    assert [row[:4] for row in tree.eval_files()] == [("graft", "P1", 0, "smol")]


def test_a_failed_write_keeps_the_old_file(tmp_path):
    target = write_text(tmp_path / "a" / "out.json", "old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert target.read_text() == "old"
    assert list(target.parent.iterdir()) == [target]


def test_directory_commit_replaces_whole(tmp_path):
    final = tmp_path / "ckpt"
    (final / "stale").mkdir(parents=True)
    tmp = begin_dir(final)
    (tmp / "model").write_text("new")
    commit_dir(tmp, final)
    assert sorted(p.name for p in final.iterdir()) == ["model"]
    assert not Path(str(final) + ".tmp").exists()
