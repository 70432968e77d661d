"""Experiment tracking: TensorBoard and offline W&B get the metrics of metrics.jsonl."""

from __future__ import annotations

import dataclasses
import importlib.util
import json

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from graft.config import LoggingSpec, load_config
from graft.errors import ConfigError
from graft.methods import get_method
from graft.services.tracking import run_name, scalars
from graft.train.request import TrainRequest
from graft.train.trainer import Trainer


def trainer(world, out, backends, steps=3):
    config = load_config(world["config"])
    config = dataclasses.replace(config, logging=LoggingSpec(backends=backends))
    return Trainer(TrainRequest(config, get_method("graft"), ["A", "B"], 0, out, steps))


def rows(out):
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_tensorboard_events_hold_the_values_of_metrics_jsonl(forced_world, tmp_path):
    out = tmp_path / "runs" / "graft" / "P" / "seed0"
    trainer(forced_world, out, ["jsonl", "tensorboard"]).run()
    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    metrics = rows(out)
    expected = {}
    for step in range(3):
        for key, value in scalars([r for r in metrics if r["step"] == step]).items():
            expected[(key, step)] = value
    assert {"A/reward_mean", "B/reward_mean", "B/admitted", "A/clip_frac_own"} <= tags
    assert tags == {key for key, _ in expected}
    for (key, step), value in expected.items():
        logged = {e.step: e.value for e in events.Scalars(key)}
        assert logged[step] == pytest.approx(value, rel=1e-6, abs=1e-6), (key, step)


def test_offline_wandb_run_writes_its_files(forced_world, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "runs" / "graft" / "P" / "seed0"
    trainer(forced_world, out, ["jsonl", "wandb"], steps=2).run()
    runs = list((out / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and list(runs[0].glob("run-*.wandb"))
    assert len(rows(out)) == 4  # the JSON Lines are written as always


def test_a_backend_without_its_package_is_refused_before_compute(forced_world, tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(ConfigError, match=r"logging\.backends: 'wandb' needs the wandb package"):
        trainer(forced_world, tmp_path / "never", ["jsonl", "wandb"])
    assert not (tmp_path / "never").exists()


def test_run_names_follow_the_cell():
    assert run_name("results/default/runs/graft/P1/seed2") == "graft/P1/seed2"
    assert run_name("/tmp/my-run") == "my-run"
