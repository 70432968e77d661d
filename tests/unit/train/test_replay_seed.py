"""Archive replay of a peer's GRPO run of another seed is refused when the request is validated, naming both seeds,
before any model loads or any file is written: the corrected command then starts cleanly."""

from __future__ import annotations

import json

import pytest
import torch
import yaml
from helpers.own_pair import own_pair_config
from helpers.run_dirs import tree_digest

from graft.cli import main
from graft.config import load_config
from graft.data.problems import batch_indices, load_problems
from graft.data.records import StepRecords, write_step
from graft.errors import ConfigError
from graft.train.request import check_archive, check_batches

STEPS = 3


def peer_run(root, config, seed: int, run_json: bool = True):
    """A peer's GRPO run of ``seed`` as replay reads it: ``<run>/trajectories/qwen25`` holding, at each step, the
    batch that seed's sampler draws, and the run's run.json naming the seed."""
    cfg = load_config(config)
    problems = load_problems(cfg.data.train)
    size = cfg.train.prompts_per_step
    archive = root / "trajectories" / "qwen25"
    for step in range(STEPS):
        ids = [problems[i].id for i in batch_indices(step, size, len(problems), seed)]
        rewards = torch.tensor([[0.0, 1.0] for _ in ids])
        texts = [["\\boxed{0}", "\\boxed{1}"] for _ in ids]
        write_step(
            StepRecords(
                "qwen25",
                step,
                ids,
                texts,
                [[[1, 2]] * 2 for _ in ids],
                [[[-0.5, -0.5]] * 2 for _ in ids],
                rewards,
                rewards - 0.5,
                [[False, False] for _ in ids],
            ),
            archive,
        )
    if run_json:
        (root / "run.json").write_text(json.dumps({"models": ["qwen25"], "seed": seed}))
    return archive


@pytest.fixture
def config(tmp_path):
    path = own_pair_config(tmp_path)
    raw = yaml.safe_load(path.read_text())
    raw["scale"] = {}  # one process with the Hugging Face sampler
    path.write_text(yaml.safe_dump(raw))
    return path


def batches_check(config, archive, seed):
    cfg = load_config(config)
    problems = load_problems(cfg.data.train)
    ids = check_archive(archive, STEPS, {p.id for p in problems})
    check_batches(archive, ids, problems, cfg.train.prompts_per_step, seed)


def test_the_same_seeds_trajectories_pass(tmp_path, config):
    batches_check(config, peer_run(tmp_path / "peer", config, seed=3), seed=3)


def test_another_seeds_trajectories_are_refused_naming_both_seeds(tmp_path, config):
    archive = peer_run(tmp_path / "peer", config, seed=1)
    with pytest.raises(ConfigError) as err:
        batches_check(config, archive, seed=0)
    record = tmp_path / "peer" / "run.json"
    assert str(err.value) == (
        f"--peer-archive: '{archive}' holds the trajectories of a run of seed 1 ('{record}'), not of --seed 0; "
        "replay needs the peer's GRPO run of the same seed"
    )


def test_without_its_run_json_the_first_step_of_other_prompts_is_named(tmp_path, config):
    archive = peer_run(tmp_path / "peer", config, seed=1, run_json=False)
    with pytest.raises(ConfigError) as err:
        batches_check(config, archive, seed=0)
    assert str(err.value).startswith(f"--peer-archive: step 0 of '{archive}' holds other prompts than this run's batch")


def test_graft_train_refuses_it_before_writing_and_the_corrected_command_is_not_refused_as_another_run(
    tmp_path, config, capsys
):
    archive = peer_run(tmp_path / "peer", config, seed=1)
    out = tmp_path / "run"
    (tmp_path / "qwen25" / "model.safetensors").unlink()  # any model load would stop on this instead
    before = tree_digest(tmp_path)
    argv = ["train", "--config", str(config), "--method", "replay", "--models", "qwen25", "--steps", str(STEPS)]
    argv += ["--peer-archive", str(archive), "--out", str(out)]
    capsys.readouterr()
    assert main([*argv, "--seed", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "a run of seed 1" in err and "not of --seed 0" in err, err
    assert not out.exists() and tree_digest(tmp_path) == before
    # the corrected command passes validation and stops only at the model load
    assert main([*argv, "--seed", "1"]) != 0
    assert "holds a run" not in capsys.readouterr().err
