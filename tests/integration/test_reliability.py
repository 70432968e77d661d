"""Reliability of a run directory: one owner at a time, damage detected and survived."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest
import torch
import yaml
from helpers.run_dirs import tree_digest, unfinish
from safetensors.torch import load_file

from graft.cli import main
from graft.config import load_config
from graft.data.records import read_step
from graft.engine.rollout import HFRollout
from graft.errors import ConfigError
from graft.methods import get_method
from graft.results import TIMING_METRICS, RunDir
from graft.train.lock import LOCK_NAME, RunLock
from graft.train.request import TrainRequest
from graft.train.stop import TrainingStopped
from graft.train.trainer import Trainer


def metrics(out):
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIMING_METRICS} for r in rows]


def train(world, out, steps=3, resume=False):
    req = TrainRequest(load_config(world["config"]), get_method("graft"), ["A", "B"], 0, out, steps, resume=resume)
    Trainer(req).run()


def weights(out, step):
    name = f"step_{step:05d}"
    return {m: load_file(out / "checkpoints" / name / m / "model.safetensors") for m in "AB"}


def same_weights(a, b):
    return all(torch.equal(a[m][k], b[m][k]) for m in a for k in a[m])


def cli_train(world, out, *extra, steps=2, seed=0):
    argv = ["train", "--config", str(world["config"]), "--method", "graft", "--models", "A,B", "--seed", str(seed)]
    return main([*argv, "--out", str(out), "--steps", str(steps), *extra])


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=60)
    return child.pid


def write_lock(out, host, pid):
    out.mkdir(parents=True, exist_ok=True)
    (out / LOCK_NAME).write_text(json.dumps({"host": host, "pid": pid, "started": "2026-01-01T00:00:00+00:00"}))


def test_a_live_holder_on_this_host_is_refused_with_one_line(forced_world, tmp_path, capsys):
    out = tmp_path / "run"
    write_lock(out, socket.gethostname(), os.getpid())
    assert cli_train(forced_world, out) == os.EX_TEMPFAIL  # a temporary failure: a retry may find it free
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"pid {os.getpid()}" in err and "in use" in err
    assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME]  # nothing written


def test_a_dead_holder_on_this_host_is_taken_over_and_the_lock_released(forced_world, tmp_path, capsys):
    out = tmp_path / "run"
    write_lock(out, socket.gethostname(), dead_pid())
    assert cli_train(forced_world, out) == 0
    assert "taking over the run lock" in capsys.readouterr().err
    assert not (out / LOCK_NAME).exists() and (out / "done.json").is_file()


def test_another_hosts_lock_is_respected_unless_forced(forced_world, tmp_path, capsys):
    out = tmp_path / "run"
    write_lock(out, "some-other-node", 12345)
    assert cli_train(forced_world, out) == os.EX_TEMPFAIL
    assert "--force-unlock" in capsys.readouterr().err
    assert cli_train(forced_world, out, "--force-unlock") == 0
    assert not (out / LOCK_NAME).exists()


def test_a_live_holder_is_refused_before_any_model_loads(forced_world, tmp_path, monkeypatch, capsys):
    def no_model_may_load(*args, **kwargs):
        raise AssertionError("a model was loaded before the lock was taken")

    monkeypatch.setattr("graft.train.trainer.make_learner", no_model_may_load)
    out = tmp_path / "run"
    write_lock(out, socket.gethostname(), os.getpid())
    assert cli_train(forced_world, out) == os.EX_TEMPFAIL
    assert "in use by a run on" in capsys.readouterr().err


def test_the_lock_is_exclusive_and_only_its_holder_releases_it(tmp_path):
    with RunLock(tmp_path):
        with pytest.raises(ConfigError, match="in use"):
            RunLock(tmp_path).acquire()
        RunLock(tmp_path).release()  # not the holder: the lock stays
        assert (tmp_path / LOCK_NAME).is_file()
    assert not (tmp_path / LOCK_NAME).exists()


def test_two_concurrent_trainers_on_one_directory(forced_world, tmp_path):
    """A second trainer on a directory a running one holds is refused in one line, and the first ends as if alone.
    The first is stopped (SIGSTOP) once it holds the lock mid-run and resumed after the second has looked, so the
    race does not depend on the machine's speed."""
    out = tmp_path / "run"
    steps = 20  # the first is stopped after its first step, long before its last
    cmd = [sys.executable, "-m", "graft.cli", "train", "--config", str(forced_world["config"]), "--method", "graft"]
    cmd += ["--models", "A,B", "--seed", "0", "--out", str(out), "--steps", str(steps), "--threads", "1"]
    first = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not ((out / LOCK_NAME).is_file() and (out / "metrics.jsonl").is_file()):  # the first holds it, mid-run
        assert first.poll() is None and time.monotonic() < deadline, first.stderr.read() if first.poll() else ""
        time.sleep(0.01)
    os.kill(first.pid, signal.SIGSTOP)
    assert (out / LOCK_NAME).is_file(), "the first trainer ended before it was stopped: raise steps"
    try:
        second = subprocess.run(cmd, stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.kill(first.pid, signal.SIGCONT)
    assert second.returncode == os.EX_TEMPFAIL, second.stderr
    assert "in use by a run on" in second.stderr and second.stderr.count("\n") == 1
    assert first.wait(timeout=600) == 0, first.stderr.read()
    rows = [(r["step"], r["model"]) for r in metrics(out)]
    assert rows == [(s, m) for s in range(steps) for m in "AB"]  # no interleaved or duplicated rows


def test_ctrl_c_ends_training_with_one_line_naming_the_checkpoint_to_resume_from(forced_world, tmp_path):
    """SIGINT to the whole process group, as a terminal's Ctrl-C sends it (the grading workers too), once the run
    has a checkpoint: no traceback from any process, one line naming the checkpoint, and --resume finishes."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "graft.cli", "train", "--config", str(forced_world["config"]), "--method", "graft"]
    cmd += ["--models", "A,B", "--seed", "0", "--out", str(out), "--threads", "1"]
    # SIGINT as a terminal leaves it, whatever the suite was started with (a shell's background job ignores it)
    first = subprocess.Popen(
        [*cmd, "--steps", "20"],
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 300
    while not (out / "checkpoints" / "step_00002" / "manifest.json").is_file():
        assert first.poll() is None and time.monotonic() < deadline, first.stderr.read() if first.poll() else ""
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGINT)
    err = first.communicate(timeout=300)[1]
    assert first.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    last = err.strip().splitlines()[-1]
    assert (
        last.startswith("graft: interrupted; ") and "rerun with --resume to continue from its checkpoint step_" in last
    )
    again = subprocess.run([*cmd, "--steps", "20", "--resume"], stderr=subprocess.PIPE, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert (out / "done.json").is_file()


@pytest.fixture(scope="module")
def uninterrupted(forced_world, tmp_path_factory):
    out = tmp_path_factory.mktemp("whole") / "run"
    train(forced_world, out)
    return out


@pytest.mark.parametrize(
    ("flags", "seed", "code", "said"),
    [
        ((), 0, 2, "holds a run (models A,B, seed 0, finished at 3 steps); --resume continues it, --overwrite"),
        (("--resume",), 0, 0, "holds this run, finished at 3 steps; nothing to do"),
        (("--resume",), 1, 2, "holds a run of another seed (0 there, 1 now); --overwrite replaces it"),
    ],
)
def test_a_finished_run_is_neither_destroyed_nor_redone_unless_overwritten(
    forced_world, tmp_path, uninterrupted, capsys, flags, seed, code, said
):
    out = tmp_path / "run"
    shutil.copytree(uninterrupted, out)
    before = tree_digest(out)
    assert cli_train(forced_world, out, *flags, steps=3, seed=seed) == code
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1, err
    assert tree_digest(out) == before  # byte for byte


def test_overwrite_replaces_a_finished_run_with_a_whole_new_one(forced_world, tmp_path, uninterrupted, capsys):
    out = tmp_path / "run"
    shutil.copytree(uninterrupted, out)
    (out / "trajectories" / "A" / "step_00009.parquet").write_bytes(b"left by an older run")
    (out / "notes.txt").write_text("the user's own file")
    assert cli_train(forced_world, out, "--overwrite", steps=3) == 0
    assert "--overwrite: replacing the run" in capsys.readouterr().err
    assert metrics(out) == metrics(uninterrupted)
    assert same_weights(weights(out, 3), weights(uninterrupted, 3))
    assert not (out / "trajectories" / "A" / "step_00009.parquet").exists()
    assert (out / "notes.txt").read_text() == "the user's own file"


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda c: _truncate(c / "A" / "model.safetensors"), "A/model.safetensors has"),
        (lambda c: (c / "B" / "optimizer.pt").unlink(), "no resume state"),
        (lambda c: (c / "state.json").unlink(), "no resume state"),
        (lambda c: (c / "manifest.json").unlink(), "no manifest.json"),
        (lambda c: (c / "A" / "config.json").write_text("{}"), "A/config.json has"),
    ],
)
def test_resume_falls_back_from_a_damaged_newest_checkpoint(
    forced_world, tmp_path, uninterrupted, capsys, damage, reason
):
    out = tmp_path / "run"
    shutil.copytree(uninterrupted, out)
    damage(out / "checkpoints" / "step_00003")
    unfinish(out)
    train(forced_world, out, resume=True)
    said = capsys.readouterr().err
    assert f"checkpoint step_00003 is not usable: {reason}" in said and "falling back to step_00002" in said
    assert metrics(out) == metrics(uninterrupted)  # step 2 redone once, no duplicate rows
    assert same_weights(weights(out, 3), weights(uninterrupted, 3))


def test_with_no_intact_checkpoint_the_run_starts_over(forced_world, tmp_path, uninterrupted, capsys):
    out = tmp_path / "run"
    shutil.copytree(uninterrupted, out)
    for ckpt in (out / "checkpoints").iterdir():
        _truncate(ckpt / "B" / "model.safetensors")
    unfinish(out)
    train(forced_world, out, resume=True)
    assert "no intact checkpoint; starting over" in capsys.readouterr().err
    assert metrics(out) == metrics(uninterrupted)
    assert same_weights(weights(out, 3), weights(uninterrupted, 3))


def test_records_after_the_fallback_are_trimmed(forced_world, tmp_path, uninterrupted):
    out = tmp_path / "run"
    shutil.copytree(uninterrupted, out)
    shutil.rmtree(out / "checkpoints" / "step_00003")
    unfinish(out)
    stale = out / "trajectories" / "A" / "step_00007.parquet"  # a record no step of this run will rewrite
    shutil.copy(out / "trajectories" / "A" / "step_00002.parquet", stale)
    with (out / "metrics.jsonl").open("a") as handle:
        handle.write('{"step": 2, "model": "A", "reward_')  # torn by a kill while appending
    train(forced_world, out, resume=True)
    assert not stale.exists()
    assert metrics(out) == metrics(uninterrupted)


def test_a_truncated_trajectory_file_is_refused_naming_file_and_step(uninterrupted, tmp_path):
    directory = tmp_path / "A"
    shutil.copytree(uninterrupted / "trajectories" / "A", directory)
    path = directory / "step_00001.parquet"
    _truncate(path)
    with pytest.raises(ConfigError, match=r"archive: step 1: .*step_00001\.parquet.* is not a readable Parquet"):
        read_step(directory, 1)
    pq.read_table(directory / "step_00000.parquet")  # the others are untouched


def killed_at_step_2_then_resumed(forced_world, tmp_path, monkeypatch, seen, **train) -> list[int]:
    """Three GRAFT steps with the forced world's config and ``train`` settings into ``tmp_path / "run"``, killed
    during step 2 (a KeyboardInterrupt stands for a SIGKILL); ``seen`` looks at what the kill left; then resumed.
    Returns the steps the resume ran."""
    cfg = yaml.safe_load(forced_world["config"].read_text())
    cfg["train"].update(train)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(cfg))
    out, ran = tmp_path / "run", []
    real_step = Trainer.step

    def killed_at_step_2(self, step):
        if step == 2:
            raise KeyboardInterrupt
        return real_step(self, step)

    def run(resume):
        req = TrainRequest(load_config(config), get_method("graft"), ["A", "B"], 0, out, 3, resume=resume)
        Trainer(req).run()

    monkeypatch.setattr(Trainer, "step", killed_at_step_2)
    with pytest.raises(KeyboardInterrupt):
        run(resume=False)
    seen(RunDir(out))
    monkeypatch.setattr(Trainer, "step", lambda self, step: ran.append(step) or real_step(self, step))
    run(resume=True)
    return ran


def test_a_run_killed_between_checkpoints_resumes_from_its_wall_time_checkpoint(
    forced_world, tmp_path, uninterrupted, monkeypatch
):
    """train.checkpoint_minutes: with checkpoints by step only at the end (checkpoint_every 100) and a tiny interval,
    a resumable checkpoint follows every step and replaces the one before; a job killed during the third step
    redoes only that step, ends as the uninterrupted run, and leaves no interim checkpoint for evaluation."""

    def seen(run):
        assert not run.checkpoints()
        assert [p.name for p in run.interim_checkpoints()] == ["step_00002"]  # the newest only

    ran = killed_at_step_2_then_resumed(
        forced_world, tmp_path, monkeypatch, seen, checkpoint_every=100, checkpoint_minutes=1e-9
    )
    out = tmp_path / "run"
    assert ran == [2]  # without the interim checkpoint the resume would redo all three steps
    assert metrics(out) == metrics(uninterrupted)
    assert same_weights(weights(out, 3), weights(uninterrupted, 3))
    assert [p.name for p in RunDir(out).checkpoints()] == ["step_00003"]
    assert not RunDir(out).interim_checkpoints()
    assert json.loads((out / "done.json").read_text())["checkpoints"] == ["step_00003"]


@pytest.mark.parametrize(("minutes", "redone"), [(60, [0, 1, 2]), (1e-9, [2])])
def test_resume_state_is_saved_by_wall_time_not_with_every_checkpoint(
    forced_world, tmp_path, uninterrupted, monkeypatch, minutes, redone
):
    """A checkpoint every step, resume state every ``train.checkpoint_minutes``: within the interval (60 minutes)
    the policy checkpoints hold only their models and a job killed during step 2 starts over; past it (a tiny
    interval) each one holds the resume state and the kill costs only step 2. Either way the run ends as the
    uninterrupted one, and its last checkpoint holds the resume state."""

    def seen(run):
        saved = {
            c.name: (c / "state.json").is_file() and (c / "A" / "optimizer.pt").is_file() for c in run.checkpoints()
        }
        assert saved == {"step_00001": minutes < 1, "step_00002": minutes < 1}

    ran = killed_at_step_2_then_resumed(
        forced_world, tmp_path, monkeypatch, seen, checkpoint_every=1, checkpoint_minutes=minutes
    )
    out = tmp_path / "run"
    assert ran == redone
    assert metrics(out) == metrics(uninterrupted)
    assert same_weights(weights(out, 3), weights(uninterrupted, 3))
    assert (out / "checkpoints" / "step_00003" / "state.json").is_file()


def test_the_rollout_engines_stop_when_the_steps_end_before_any_evaluation_and_on_a_stop(
    forced_world, tmp_path, monkeypatch
):
    """A process of a distributed job ends without the interpreter's teardown (graft.engine.distributed.end_process),
    so the trainer stops its learners' rollout engines itself: vLLM's engine cores would otherwise outlive torchrun,
    holding the job's GPU memory and output streams. Each once: after the last step, before an evaluation's engine
    would start; and on a stop signal."""
    events = []
    monkeypatch.setattr(HFRollout, "close", lambda self: events.append("close"))
    monkeypatch.setattr(Trainer, "_evaluate", lambda self: events.append("evaluate"))
    train(forced_world, tmp_path / "finished", steps=1)
    assert events == ["close", "close", "evaluate"]
    events.clear()
    real_update = Trainer._update

    def signal_in_update(self, learner, groups, step):
        os.kill(os.getpid(), signal.SIGTERM)
        return real_update(self, learner, groups, step)

    monkeypatch.setattr(Trainer, "_update", signal_in_update)
    with pytest.raises(TrainingStopped):
        train(forced_world, tmp_path / "stopped", steps=2)
    assert events == ["close", "close"]


def test_a_stop_signal_saves_where_the_step_stands_and_the_resume_ends_as_the_uninterrupted_run(
    forced_world, tmp_path, uninterrupted, monkeypatch
):
    """A stop signal (graft.train.stop) during step 0's update: the step ends and the state after it is saved as an
    interim checkpoint; during step 1's rollouts, before the models change: the step is dropped and the state it
    started from is saved. Both write the same checkpoint, file for file; the run raises TrainingStopped with the
    handlers restored, and a resume ends as the uninterrupted run."""
    real_update, real_publish = Trainer._update, Trainer._publish

    def signal_in_update(self, learner, groups, step):
        if step == 0:
            os.kill(os.getpid(), signal.SIGURG)  # as Slurm's warning before the time limit
        return real_update(self, learner, groups, step)

    def signal_after_rollouts(self, records, infos, batches):  # what follows the step's rollouts
        if {r.step for r in records.values()} == {1}:
            os.kill(os.getpid(), signal.SIGTERM)  # as preemption
        return real_publish(self, records, infos, batches)

    stopped = {}
    for name, patch in (("update", signal_in_update), ("rollouts", signal_after_rollouts)):
        out = tmp_path / name
        with monkeypatch.context() as patched:
            patched.setattr(Trainer, f"_{name}" if name == "update" else "_publish", patch)
            with pytest.raises(TrainingStopped) as stop:
                train(forced_world, out)
        stopped[name] = stop.value
        assert stop.value.next_step == 1 and stop.value.checkpoint == RunDir(out).interim_root / "step_00001"
        assert [r["step"] for r in metrics(out)] == [0, 0] and not (out / "done.json").exists()
    assert stopped["update"].received == signal.SIGURG and stopped["rollouts"].received == signal.SIGTERM
    assert signal.getsignal(signal.SIGURG) == signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    manifests = [json.loads((stop.checkpoint / "manifest.json").read_text()) for stop in stopped.values()]
    assert manifests[0] == manifests[1]
    out = tmp_path / "rollouts"
    train(forced_world, out, resume=True)
    assert metrics(out) == metrics(uninterrupted)
    assert same_weights(weights(out, 3), weights(uninterrupted, 3))


def test_a_rollout_that_dies_of_the_stop_signal_ends_the_step_as_abandoned_and_saves_where_it_started(
    forced_world, tmp_path, uninterrupted, monkeypatch
):
    """SIGTERM reaches vLLM's engine cores too, which exit on it, so the rollout under way raises: after a stop
    signal that failure drops the step and saves the state it started from, and the resume ends as the
    uninterrupted run; without a stop signal the same failure is an error."""
    import graft.train.trainer as trainer_module

    real = trainer_module.rollout_step

    def engine_dies(learner, step, *args, **kwargs):
        if step == 1:
            os.kill(os.getpid(), signal.SIGTERM)
            raise RuntimeError("EngineCore died unexpectedly")
        return real(learner, step, *args, **kwargs)

    out = tmp_path / "preempted"
    with monkeypatch.context() as patched:
        patched.setattr(trainer_module, "rollout_step", engine_dies)
        with pytest.raises(TrainingStopped) as stop:
            train(forced_world, out)
    assert stop.value.received == signal.SIGTERM and stop.value.next_step == 1
    assert stop.value.checkpoint == RunDir(out).interim_root / "step_00001"
    train(forced_world, out, resume=True)
    assert metrics(out) == metrics(uninterrupted)
    assert same_weights(weights(out, 3), weights(uninterrupted, 3))

    def engine_fails(learner, step, *args, **kwargs):
        raise RuntimeError("EngineCore died unexpectedly")

    monkeypatch.setattr(trainer_module, "rollout_step", engine_fails)
    with pytest.raises(RuntimeError, match="EngineCore died"):
        train(forced_world, tmp_path / "failed")
