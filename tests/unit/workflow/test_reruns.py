"""Which jobs a config edit reruns, and which finished runs it would change (graft.workflow.reruns)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from helpers.config_walk import walk

from graft.config import config_from_dict
from graft.config.run import apply_settings
from graft.planning.plan import training_cells
from graft.results import ResultsTree, resume_state
from graft.train.run_state import REPLACED, retire
from graft.workflow import reruns
from graft.workflow.reruns import cell_identity, changed_runs, changed_runs_message, train_params

ROOT = Path(__file__).resolve().parents[3]
SMOKE = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())
DOC = ROOT / "docs" / "operations.md"


def documented_reruns() -> dict[str, set[str]]:
    """The table of docs/operations.md: each field that reruns a rule, and the rules."""
    text = DOC.read_text().split("<!-- reruns table -->", 2)[1]
    rows = re.findall(r"^\| `([^`]+)` \| ([^|]+) \|$", text, re.M)
    return {field: {r.strip() for r in rules.split(",")} for field, rules in rows}


def test_every_config_field_reruns_exactly_the_rules_the_docs_table_names():
    """Each field of the config changed alone to another valid value: the rules whose params change are the ones
    docs/operations.md lists for it, and a field it does not list reruns nothing."""
    table, stuck = walk(SMOKE)
    assert stuck == []
    assert len(table) > 100  # every section walked, entries of models and toy.models included
    found = {field: rules for field, rules in table.items() if rules}
    lines = "\n".join(f"| `{f}` | {', '.join(sorted(r))} |" for f, r in found.items())
    assert found == documented_reruns(), f"docs/operations.md's table should read:\n{lines}"
    for operational in ("scale.vllm_memory", "train.checkpoint_every", "train.micro_batch", "logging.backends"):
        assert table[operational] == set()


def _cells(cfg):
    return {(c.method, c.cell, c.seed): c for c in training_cells(cfg)}


def _changed_cells(before_raw: dict, settings: list[tuple[str, object]]) -> set[tuple[str, str, int]]:
    before, after = config_from_dict(before_raw), config_from_dict(apply_settings(before_raw, settings))
    tree = ResultsTree(before.results)
    cells = _cells(before)
    return {key for key, c in cells.items() if train_params(before, c, tree) != train_params(after, c, tree)}


def test_a_models_entry_reruns_only_the_cells_that_train_it():
    """qwen's learning rate: every cell that trains qwen, not the replay cell that only reads qwen's archive."""
    assert _changed_cells(SMOKE, [("models.qwen.lr", 1e-3)]) == {
        ("grpo_n8", "qwen", 0),
        ("grpo_n8_ds", "qwen", 0),
        ("graft", "P1", 0),
        ("graft_no_gate", "P1", 0),
        ("replay", "qwen_from_smol", 0),
    }


def test_a_user_preset_reruns_only_its_own_cells():
    raw = apply_settings(
        SMOKE, [("methods", {"mine": {"base": "graft", "delta": 0.5}}), ("workflow.pair_methods", ["graft", "mine"])]
    )
    assert _changed_cells(raw, [("methods.mine.delta", 0.6)]) == {("mine", "P1", 0)}


def _finish(cfg, cell, tree, steps: int, resumable: bool = True) -> None:
    """A finished run as graft train leaves it, built by hand: its record, its metrics and its last checkpoint."""
    run = cell.run_dir(tree)
    run.root.mkdir(parents=True)
    identity = cell_identity(cfg, cell, tree)
    done = {"steps": steps}
    run.run_json.write_text(json.dumps({**identity, "steps": steps, "finished": done}))
    run.done.write_text(json.dumps(done))
    run.metrics.write_text("".join(json.dumps({"step": s}) + "\n" for s in range(steps)))
    ckpt = run.checkpoint(steps)
    ckpt.mkdir(parents=True)
    if resumable:
        (ckpt / "state.json").write_text("{}")
        for model in cell.models:
            optimizer, _ = resume_state(ckpt, model)
            optimizer.parent.mkdir(parents=True)
            optimizer.write_text("")


@pytest.fixture
def finished(tmp_path):
    raw = apply_settings(SMOKE, [("results", str(tmp_path / "results"))])
    cfg = config_from_dict(raw)
    tree = ResultsTree(cfg.results)
    cell = _cells(cfg)[("grpo_n8", "smol", 0)]
    _finish(cfg, cell, tree, cfg.train.steps)
    return raw, tree, cell


def test_an_unchanged_config_changes_no_run(finished):
    raw, tree, _ = finished
    cfg = config_from_dict(raw)
    assert changed_runs(cfg, list(_cells(cfg).values()), tree) == {}


def test_an_edited_setting_names_each_changed_run_with_its_fields_old_and_new(finished):
    raw, tree, cell = finished
    cfg = config_from_dict(apply_settings(raw, [("train.lr", 4e-4), ("train.top_p", 0.9)]))
    changed = changed_runs(cfg, list(_cells(cfg).values()), tree)
    assert changed == {cell: ["settings.train.lr: 0.0002 -> 0.0004", "settings.train.top_p: 1.0 -> 0.9"]}
    message = changed_runs_message(changed, tree)
    assert "grpo_n8/smol/seed0: settings.train.lr: 0.0002 -> 0.0004" in message
    assert "changed_runs: keep" in message and "changed_runs: retrain" in message and "results=" in message


def test_operational_fields_change_no_run(finished):
    raw, tree, _ = finished
    cfg = config_from_dict(
        apply_settings(raw, [("train.micro_batch", 8), ("scale.vllm_memory", 0.5), ("train.checkpoint_every", 2)])
    )
    assert changed_runs(cfg, list(_cells(cfg).values()), tree) == {}


def test_more_steps_continue_a_finished_run_unless_its_resume_state_is_gone(finished, tmp_path):
    raw, tree, cell = finished
    cfg = config_from_dict(apply_settings(raw, [("train.steps", 5)]))
    assert changed_runs(cfg, list(_cells(cfg).values()), tree) == {}
    for ckpt in cell.run_dir(tree).checkpoints():
        for model in cell.models:
            resume_state(ckpt, model)[0].unlink()
    changed = changed_runs(cfg, list(_cells(cfg).values()), tree)
    assert list(changed) == [cell] and "resume state was removed" in changed[cell][0]


def test_retiring_a_run_keeps_its_records_and_evaluations_and_removes_only_its_checkpoints(finished, tmp_path):
    _, tree, cell = finished
    run = cell.run_dir(tree)
    other = run.root / "notes.txt"  # a file of the user's: no part of the run
    other.write_text("mine")
    evals = tmp_path / "evals"
    (evals / "smol").mkdir(parents=True)
    (evals / "smol" / "step_00002.json").write_text("{}")
    records = {name: (run.root / name).read_text() for name in ("run.json", "metrics.jsonl", "done.json")}
    kept = retire(run, (evals, tmp_path / "absent"), now=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    assert kept == run.root / REPLACED / "20260102T030405Z"
    assert {name: (kept / name).read_text() for name in records} == records
    assert (kept / "evaluations" / "smol" / "step_00002.json").is_file() and not evals.exists()
    assert not (run.root / "checkpoints").exists() and not run.run_json.exists()
    assert other.read_text() == "mine"


def test_each_setting_is_a_param_of_its_own_named_by_its_config_field():
    settings = json.dumps(
        {"run": {"settings": {"train": {"lr": 1e-5}, "models": {"b": {"lr": None}, "a": {"lr": 2e-5}}}, "steps": 3}}
    )
    assert reruns.param_fields(settings, ("a", "b")) == {
        "run_settings_train_lr": "train.lr=1e-05",
        "run_settings_models_model1_lr": "models.b.lr=null",
        "run_settings_models_model0_lr": "models.a.lr=2e-05",
        "run_steps": "train.steps=3",
    }
    # another cell's models fill the same slots, so every job of a rule has the same params
    assert reruns.param_fields(json.dumps({"models": {"c": {"lr": 1}}}), ("c",)) == {
        "models_model0_lr": "models.c.lr=1"
    }
    assert reruns.param_fields(json.dumps({"k": 1}), within="eval") == {"eval_k": "eval.k=1"}
    assert reruns.param_fields(json.dumps([{"x": 1}, 2]), ("m",), ("toy.models.m", "toy.seed")) == {
        "toy_models_model0_x": "toy.models.m.x=1",
        "toy_seed": "toy.seed=2",
    }


def test_a_change_of_one_setting_changes_one_param_of_the_cells_that_use_it_and_none_of_another():
    """What Snakemake compares: the set of a job's param values."""
    before = config_from_dict(SMOKE)
    after = config_from_dict(apply_settings(SMOKE, [("models.qwen.template", "{problem} =")]))
    tree = ResultsTree(before.results)

    def values(cfg, cell):
        return set(reruns.param_fields(train_params(cfg, cell, tree), cell.models).values())

    cells = training_cells(before)
    alone = next(c for c in cells if c.models == ("smol",))
    pair = next(c for c in cells if set(c.models) == {"smol", "qwen"})
    assert values(before, alone) == values(after, alone)
    changed = values(before, pair) ^ values(after, pair)
    names = {"models.qwen.template"} | ({"eval.models.qwen.template"} if before.workflow.eval_in_train else set())
    assert {v.split("=", 1)[0] for v in changed} == names
