"""Job lengths and GPU-hours that graft plan prints beside the Slurm profile's limits
(graft/planning/job_lengths.py)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graft.config import load_config
from graft.planning import plan
from graft.planning.job_lengths import (
    evaluation_hours,
    evaluation_parts,
    job_kinds,
    job_lines,
    problem_count,
    profile_runtimes,
    training_work,
)
from graft.planning.plan import base_evaluations, checkpoint_steps, describe, training_cells
from graft.planning.step_time import cell_steps, gpu_rates, step_seconds

PAPER = Path("config/paper.yaml")


def lines_file(path: Path, n: int) -> str:
    path.write_text("".join(f'{{"problem": "p{i}", "answer": "{i}"}}\n' for i in range(n)))
    return str(path)


def test_one_evaluation_is_its_generated_tokens_over_the_models_rate(tmp_path):
    cfg = load_config(PAPER)
    evaluation = dataclasses.replace(
        cfg.eval,
        benchmarks={"a": lines_file(tmp_path / "a.jsonl", 3), "b": lines_file(tmp_path / "b.jsonl", 2)},
        validation=lines_file(tmp_path / "v.jsonl", 5),
        k=4,
    )
    workflow = dataclasses.replace(cfg.workflow, generation_tokens_per_s={"qwen3": 50.0}, mean_response_tokens=100)
    cfg = dataclasses.replace(cfg, eval=evaluation, workflow=workflow)
    # (3 + 2 + 5 problems) x 4 samples x 100 tokens / 50 tokens/s = 80 s
    assert evaluation_hours(cfg, "qwen3") == pytest.approx(80 / 3600)
    assert evaluation_hours(cfg, "smollm3") is None  # no rate: no estimate
    # without a mean, the maximum response length: an upper bound
    unbounded = dataclasses.replace(cfg, workflow=dataclasses.replace(workflow, mean_response_tokens=None))
    assert evaluation_hours(unbounded, "qwen3") == pytest.approx(10 * 4 * 4096 / 50 / 3600)


def test_a_benchmark_not_yet_fetched_counts_its_published_size(tmp_path):
    assert problem_count(str(tmp_path / "data" / "math500.jsonl")) == 500
    assert problem_count(str(tmp_path / "data" / "math_validation.jsonl")) == 500
    assert problem_count(str(tmp_path / "data" / "minerva.jsonl")) == 272
    assert problem_count(str(tmp_path / "mine.jsonl")) is None
    assert problem_count(lines_file(tmp_path / "math500.jsonl", 7)) == 7  # a file that exists is counted


def test_the_paper_cells_checkpoints_are_evaluated_in_jobs_of_five():
    steps = checkpoint_steps(load_config(PAPER))
    assert len(steps) == 35 and steps[-1] == 174
    parts = evaluation_parts(steps, 5)
    assert [len(p) for p in parts] == [5] * 7 and parts[-1] == [155, 160, 165, 170, 174]
    assert evaluation_parts(steps, None) == [steps]


@given(st.lists(st.integers(1, 10_000), min_size=1, max_size=60, unique=True), st.integers(1, 20))
def test_evaluation_parts_cover_every_step_once_in_order(steps, per_job):
    steps = sorted(steps)
    parts = evaluation_parts(steps, per_job)
    assert [s for part in parts for s in part] == steps
    assert len(parts) == math.ceil(len(steps) / per_job) and all(1 <= len(p) <= per_job for p in parts)


def test_profile_runtimes_in_hours(tmp_path):
    (tmp_path / "config.yaml").write_text(
        "default-resources:\n  runtime: 60\nset-resources:\n  train:\n    runtime: 4320\n  report: [mem_mb=100]\n"
    )
    assert profile_runtimes(tmp_path) == {"*": 1.0, "train": 72.0}
    (tmp_path / "config.yaml").write_text("default-resources: [runtime=90, mem_mb=1000]\n")
    assert profile_runtimes(tmp_path) == {"*": 1.5}


def test_the_paper_config_fits_every_limit_and_a_cell_in_one_job_does_not(monkeypatch):
    monkeypatch.setattr(plan, "free_bytes", lambda results: 1e15)  # scratch storage, whatever this machine has
    cfg = load_config(PAPER)
    cells = training_cells(cfg)
    out = describe(cfg, str(PAPER), Path("workflow/profiles/slurm"))
    assert "warning" not in out
    table = out[out.index("jobs per rule") :].splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in table[2:6]}
    assert set(rows) == {"train", "evaluate_base", "evaluate_checkpoints", "reevaluate_selected"}
    assert rows["evaluate_checkpoints"][:2] == ["392", "1"]  # 56 cells x 7 jobs, one GPU each
    assert all(float(longest) <= float(limit) for _, _, longest, limit, _ in rows.values())
    # each kind's GPU-hours add up its jobs, counted here by hand from the paper's cells: per model GRPO n=8 at each
    # main seed, n=16, n=32 and n=8 with dynamic sampling (one model each); per pair GRAFT at each main seed, HACPO
    # and SGT (two models each) and a replay of each model (one); 17 ablations on P1 (two models each)
    models, pairs, seeds = len(cfg.models), len(cfg.pairs), len(cfg.workflow.main_seeds)
    model_runs = models * (seeds + 3) + pairs * (2 * (seeds + 2) + 2) + 17 * 2
    # a checkpoint every train.checkpoint_every steps and the last; the base model once per main seed
    checkpoints = cfg.train.steps // cfg.train.checkpoint_every + (cfg.train.steps % cfg.train.checkpoint_every > 0)
    evaluations = model_runs * checkpoints + models * seeds
    reevaluations = model_runs * cfg.eval.selection_runs
    assert (model_runs, checkpoints, evaluations, reevaluations) == (88, 35, 3089, 440)
    assert f"{evaluations} checkpoint evaluations" in out and f"{reevaluations} re-evaluations" in out
    # each of 1,372 problems (MATH500 500, AIME24 30, AIME25 30, AMC23 40, Minerva 272, validation 500) x 8
    # samples x 2,048 tokens at 10,500 tokens/s
    hours = 1372 * 8 * 2048 / 10500 / 3600
    # training: each cell's steps at its step time under the config's placement, on the job's 4 GPUs
    rates = gpu_rates(cfg)
    seconds = [step_seconds(cell_steps(cfg, rates, c.method, c.models, "colocated"), "colocated") for c in cells]
    training = sum(seconds) * cfg.train.steps * 4 / 3600
    expected = (
        f"GPU-hours: training {training:,.0f}, evaluation {evaluations * hours:,.0f}, "
        f"re-evaluation {reevaluations * hours:,.0f}"
    )
    assert next(line for line in table if line.startswith("GPU-hours")) == expected
    one_job = dataclasses.replace(cfg, workflow=dataclasses.replace(cfg.workflow, eval_checkpoints_per_job=None))
    warned = [line for line in describe(one_job, "x", Path("workflow/profiles/slurm")).splitlines() if "warn" in line]
    assert warned == [
        f"warning: evaluate_checkpoints jobs take up to {70 * hours:.1f} h, more than their limit of 12.0 h; "
        "shorten them with workflow.eval_checkpoints_per_job"
    ]


def test_job_lines_without_figures_say_what_is_missing():
    cfg = load_config("config/smoke.yaml")
    cells = training_cells(cfg)
    kinds = job_kinds(cfg, cells, checkpoint_steps(cfg), base_evaluations(cfg))
    lines = job_lines(kinds, None, None)
    assert "no Slurm profile read" in lines[0]
    assert lines[-1] == "GPU-hours: training ?, evaluation ?, re-evaluation ?"


def test_a_training_job_s_work_is_the_rows_its_models_sample_score_and_train_on():
    """Worked by hand for the default: GRPO n=8 samples and trains on 8 rows a prompt; GRAFT's receiver also scores
    a peer's group on exchange_share of its prompts and trains on it in place of its own, on each of two models; a
    group of n=32 four times GRPO n=8's rows."""
    cfg = load_config("config/config.yaml")
    work = training_work(cfg, training_cells(cfg))
    steps, prompts, share = cfg.train.steps, cfg.train.prompts_per_step, cfg.workflow.exchange_share
    assert work[("grpo_n8", "smol", 0)] == steps * (8 * prompts + 8 * prompts)
    assert work[("graft", "P1", 0)] == round(steps * 2 * (8 * prompts + 8 * share * prompts + 8 * prompts))
    assert work[("grpo_n32", "smol", 0)] == 4 * work[("grpo_n8", "smol", 0)]
    # the order the workflow starts them in: the pair's co-training before either model's GRPO
    assert work[("graft", "P1", 0)] > work[("grpo_n8", "qwen", 0)] == work[("grpo_n8", "smol", 0)]
