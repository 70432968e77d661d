"""What ``graft train`` does with what ``--out`` holds: each case decided on directories built by hand, before any
model would load."""

from __future__ import annotations

import json

import pytest

from graft.config import load_config
from graft.errors import ConfigError
from graft.results import RunDir
from graft.train.run_state import RUN_ENTRIES, describe, plan_out, replace, run_settings

IDENTITY = {
    "method": {"name": "graft", "delta": 0.8},
    "models": ["A", "B"],
    "seed": 0,
    "peers": None,
    "settings": {"train": {"lr": 1e-6}, "models": {}, "reward": {"kind": "math", "timeout": 5.0}},
}


def make_run(root, steps_done=3, finished=None, resumable=(), keep_done=True, **changed):
    """A run directory as the trainer leaves it: run.json, metrics of ``steps_done`` steps, a checkpoint per
    step (with resume state at the steps in ``resumable``), and, when ``finished``, done.json and run.json's
    copy of it (done.json dropped unless ``keep_done``, as Snakemake drops it before rerunning a job)."""
    run = RunDir(root)
    root.mkdir(parents=True, exist_ok=True)
    record = {**IDENTITY, "steps": finished or 40, **changed}
    rows = [{"step": s, "model": m} for s in range(steps_done) for m in record["models"]]
    run.metrics.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for step in range(1, steps_done + 1):
        for model in record["models"]:
            (run.checkpoint(step) / model).mkdir(parents=True)
            (run.checkpoint(step) / model / "model.safetensors").write_bytes(b"w")
            if step in resumable:
                (run.checkpoint(step) / model / "optimizer.pt").write_bytes(b"o")
        if step in resumable:
            (run.checkpoint(step) / "state.json").write_text("{}")
    if finished:
        done = {"models": record["models"], "steps": finished}
        record["finished"] = done
        if keep_done:
            run.done.write_text(json.dumps(done))
    run.run_json.write_text(json.dumps(record))
    return run


def test_an_empty_or_new_out_starts(tmp_path):
    assert plan_out(RunDir(tmp_path / "new"), IDENTITY, 40, resume=False, overwrite=False).action == "start"
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("a user's file is not a run")
    assert plan_out(RunDir(tmp_path / "mine"), IDENTITY, 40, resume=False, overwrite=False).action == "start"


@pytest.mark.parametrize("finished", [None, 3])
def test_a_run_there_without_resume_or_overwrite_is_refused_naming_both(tmp_path, finished):
    run = make_run(tmp_path / "run", finished=finished)
    with pytest.raises(ConfigError) as refused:
        plan_out(run, IDENTITY, 3, resume=False, overwrite=False)
    line = str(refused.value)
    assert "\n" not in line and "--resume continues it" in line and "--overwrite replaces it" in line
    assert ("finished at 3 steps" if finished else "3 of 40 steps done, not finished") in line
    assert "models A,B, seed 0" in line


def test_resume_of_a_finished_run_with_the_steps_asked_does_nothing(tmp_path):
    for keep_done in (True, False):
        run = make_run(tmp_path / f"run{keep_done}", finished=3, keep_done=keep_done)
        assert plan_out(run, IDENTITY, 3, resume=True, overwrite=False).action == "finished"


def test_resume_of_an_unfinished_run_continues(tmp_path):
    run = make_run(tmp_path / "run", resumable=(2, 3))
    plan = plan_out(run, IDENTITY, 40, resume=True, overwrite=False)
    assert plan.action == "resume" and plan.extend_from is None


def test_more_steps_continue_a_finished_run_from_its_resume_state_or_are_refused(tmp_path):
    kept = make_run(tmp_path / "kept", finished=3, resumable=(3,))
    plan = plan_out(kept, IDENTITY, 5, resume=True, overwrite=False)
    assert plan.action == "resume" and plan.extend_from == 3
    assert plan_out(kept, IDENTITY, 5, resume=True, overwrite=True).action == "resume"
    pruned = make_run(tmp_path / "pruned", finished=3)
    with pytest.raises(ConfigError, match=r"resume state was removed .*--overwrite retrains it from step 0 to 5"):
        plan_out(pruned, IDENTITY, 5, resume=True, overwrite=False)
    assert plan_out(pruned, IDENTITY, 5, resume=True, overwrite=True).action == "replace"


def test_fewer_steps_than_an_unfinished_run_has_done_are_refused(tmp_path):
    run = make_run(tmp_path / "run", steps_done=6, resumable=(6,))
    with pytest.raises(ConfigError, match="has done 6 steps, more than the 4 asked"):
        plan_out(run, IDENTITY, 4, resume=True, overwrite=False)
    assert plan_out(run, IDENTITY, 4, resume=True, overwrite=True).action == "replace"


def test_fewer_steps_than_a_finished_run_are_refused(tmp_path):
    run = make_run(tmp_path / "run", finished=3, resumable=(3,))
    with pytest.raises(ConfigError, match="finished at 3 steps, more than the 2 asked"):
        plan_out(run, IDENTITY, 2, resume=True, overwrite=False)


@pytest.mark.parametrize(
    ("changed", "named"),
    [
        ({"seed": 1}, "another seed (1 there, 0 now)"),
        ({"models": ["A", "C"]}, 'another models (["A", "C"] there, ["A", "B"] now)'),
        ({"method": {"name": "graft", "delta": 0.85}}, "another method.delta (0.85 there, 0.8 now)"),
        ({"settings": {**IDENTITY["settings"], "train": {"lr": 1e-5}}}, "another settings.train.lr (1e-05 there"),
    ],
)
def test_resume_of_another_run_is_refused_naming_the_difference_unless_overwrite(tmp_path, changed, named):
    run = make_run(tmp_path / "run", resumable=(3,), **changed)
    with pytest.raises(ConfigError) as refused:
        plan_out(run, IDENTITY, 40, resume=True, overwrite=False)
    assert named in str(refused.value) and "--overwrite replaces it" in str(refused.value)
    assert plan_out(run, IDENTITY, 40, resume=True, overwrite=True).action == "replace"


def test_the_workflows_resume_and_overwrite_retrains_a_finished_run_and_resumes_an_unfinished_one(tmp_path):
    finished = make_run(tmp_path / "finished", finished=3, keep_done=False)
    assert plan_out(finished, IDENTITY, 3, resume=True, overwrite=True).action == "replace"
    unfinished = make_run(tmp_path / "unfinished", resumable=(3,))
    assert plan_out(unfinished, IDENTITY, 40, resume=True, overwrite=True).action == "resume"


def test_overwrite_removes_what_a_run_wrote_and_nothing_else(tmp_path):
    run = make_run(tmp_path / "run", finished=3, resumable=(3,))
    for name in ("tensorboard", "evaluated", "trajectories"):
        (run.root / name).mkdir()
    (run.root / "notes.txt").write_text("mine")
    (run.root / ".lock").write_text("{}")
    assert plan_out(run, IDENTITY, 3, resume=False, overwrite=True).action == "replace"
    replace(run)
    assert sorted(p.name for p in run.root.iterdir()) == [".lock", "notes.txt"]
    assert not any((run.root / name).exists() for name in RUN_ENTRIES)


def test_an_unreadable_run_json_is_named(tmp_path):
    run = make_run(tmp_path / "run")
    run.run_json.write_bytes(b"\xff{ torn")
    with pytest.raises(ConfigError, match=r"run\.json' is not readable JSON"):
        plan_out(run, IDENTITY, 40, resume=True, overwrite=False)


def test_describe_counts_steps_past_a_torn_metrics_line(tmp_path):
    run = make_run(tmp_path / "run", steps_done=2)
    with run.metrics.open("a") as handle:
        handle.write('{"step": 2, "mod')
    assert describe(run, json.loads(run.run_json.read_text()), 40).endswith("2 of 40 steps done, not finished")


def test_run_settings_leave_out_where_models_live_and_how_a_run_is_saved(tmp_path):
    config = load_config("config/smoke.yaml")
    settings = run_settings(config, list(config.models)[:1])
    assert "lr" in settings["train"] and "steps" not in settings["train"]
    assert "checkpoint_every" not in settings["train"] and "micro_batch" not in settings["train"]
    assert all("path" not in spec for spec in settings["models"].values())
    assert json.loads(json.dumps(settings)) == settings


def test_checkpoints_without_their_run_json_are_refused_not_adopted(tmp_path):
    """With run.json gone, nothing says whose checkpoints these are: another seed's or method's run would be
    resumed and its record rewritten."""
    run = make_run(tmp_path / "run", resumable=(3,))
    run.run_json.unlink()
    with pytest.raises(ConfigError) as refused:
        plan_out(run, IDENTITY, 40, resume=True, overwrite=False)
    assert "no run.json" in str(refused.value) and "--overwrite" in str(refused.value)
    assert plan_out(run, IDENTITY, 40, resume=True, overwrite=True).action == "replace"


def test_other_training_prompts_at_the_same_path_are_another_run(tmp_path):
    data = {"train": "0" * 64}
    run = make_run(tmp_path / "run", data=data)
    with pytest.raises(ConfigError, match=r"data\.train"):
        plan_out(run, {**IDENTITY, "data": {"train": "1" * 64}}, 40, resume=True, overwrite=False)
    assert plan_out(run, {**IDENTITY, "data": data}, 40, resume=True, overwrite=False).action == "resume"
    older = make_run(tmp_path / "older")  # a record from before prompts were recorded: compared on what it has
    assert plan_out(older, {**IDENTITY, "data": data}, 40, resume=True, overwrite=False).action == "resume"


def test_a_peer_archive_counts_by_content_not_by_where_it_is(tmp_path):
    from graft.train.run_state import archive_identity

    first, moved, other = (tmp_path / name for name in ("first", "moved", "other"))
    for directory, content in ((first, b"steps"), (moved, b"steps"), (other, b"other steps")):
        directory.mkdir()
        (directory / "step_00000.parquet").write_bytes(content)
    assert archive_identity([first]) == archive_identity([moved]) != archive_identity([other])
    assert archive_identity([tmp_path / "not-yet"]) == [None] and archive_identity([]) is None
