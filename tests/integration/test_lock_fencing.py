"""A trainer whose run lock another trainer took over stops before its next save (graft.train.lock.LockLost):
neither a checkpoint nor ``done.json`` of its own lands in the directory its successor owns now."""

from __future__ import annotations

import json

import pytest

from graft.config import load_config
from graft.methods import get_method
from graft.train.lock import LOCK_NAME, LockLost
from graft.train.request import TrainRequest
from graft.train.trainer import Trainer

SUCCESSOR = {"host": "successor-node", "pid": 4242, "slurm_job": None, "started": "2026-01-01T00:00:00+00:00"}


def take_over(out) -> None:
    """What a successor's take-over leaves: another holder's lock in place of this run's."""
    (out / "successor.tmp").write_text(json.dumps({**SUCCESSOR, "token": "successor"}))
    (out / "successor.tmp").replace(out / LOCK_NAME)


@pytest.mark.parametrize("when", ["before the checkpoint", "before done.json"])
def test_a_trainer_whose_lock_was_taken_over_saves_nothing_more(forced_world, tmp_path, monkeypatch, when):
    out = tmp_path / "run"
    req = TrainRequest(load_config(forced_world["config"]), get_method("graft"), ["A", "B"], 0, out, 2)
    trainer = Trainer(req)
    if when == "before the checkpoint":  # after the last step's metrics, before its checkpoint (every 2 steps)
        log = lambda fields: take_over(out) if fields["step"] == 1 else None  # noqa: E731
    else:  # after the last checkpoint, before done.json
        log = lambda fields: None  # noqa: E731
        monkeypatch.setattr(trainer, "_evaluate", lambda: take_over(out))
    with pytest.raises(LockLost, match="it is held by successor-node pid 4242"):
        trainer.run(log=log)
    assert json.loads((out / LOCK_NAME).read_text())["token"] == "successor"  # left to its holder
    assert not (out / "done.json").exists()
    saved = (out / "checkpoints" / "step_00002" / "manifest.json").is_file()
    assert saved == (when == "before done.json")
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [0, 0, 1, 1]
