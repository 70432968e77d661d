"""The record of a training job that failed for good (graft/workflow/failures.py): written on the last attempt only,
the first failure kept, read back as its time (graft.planning.turns), refused in one line where unreadable."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from graft.errors import ConfigError
from graft.planning.turns import failure_time
from graft.results import RunDir
from graft.train.stop import EXIT_CODE
from graft.workflow.failures import ATTEMPTS_ENV, main, record_failure


def test_only_the_last_attempts_failure_is_recorded_and_the_first_one_kept(tmp_path):
    run = RunDir(tmp_path)
    assert not record_failure(run, attempt=2, attempts=3, code=1)
    assert not record_failure(run, attempt=3, attempts=3, code=EXIT_CODE)  # a stopped trainer's exit is no failure
    assert not record_failure(run, attempt=3, attempts=None, code=1)  # retries unknown: never the last
    assert failure_time(run) is None
    first = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert record_failure(run, attempt=3, attempts=3, code=137, now=first)
    assert not record_failure(run, attempt=3, attempts=3, code=1, now=datetime(2026, 12, 2, tzinfo=UTC))
    assert failure_time(run) == "2026-12-01T12:00:00.000000Z"
    assert json.loads(run.failed.read_text())["exit"] == 137


def test_the_training_rules_shell_records_through_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(ATTEMPTS_ENV, "2")
    main(["--run", str(tmp_path), "--attempt", "1", "--exit", "1"])
    assert failure_time(RunDir(tmp_path)) is None
    main(["--run", str(tmp_path), "--attempt", "2", "--exit", "1"])
    assert failure_time(RunDir(tmp_path)) is not None


def test_an_unreadable_record_is_one_line(tmp_path):
    Path(tmp_path, "failed.json").write_text("{")
    with pytest.raises(ConfigError, match=r"failed.json' is not readable JSON \(JSONDecodeError\); expected") as err:
        failure_time(RunDir(tmp_path))
    assert "\n" not in str(err.value)
