"""``graft report`` on a results tree that holds any part of its cells: no runs, runs without evaluations, some
evaluations, re-evaluations missing. Each writes every file the workflow declares, whole, with "—" where a cell
has no result, and raises nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from graft.cli import main
from graft.config import load_config
from graft.planning.plan import main_cells, training_cells
from graft.report.build import report_outputs
from graft.report.table import MISSING

ROOT = Path(__file__).resolve().parents[3]
BENCHMARKS = ("add", "sub", "add3", "sub3", "mul")
STEPS = (5, 10)


def write_config(tmp_path: Path, selection_runs: int) -> Path:
    """The embedded default with a group of its three models, so that every table and figure is declared."""
    data = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    data["results"] = str(tmp_path / "results")
    data["groups"] = {"G": ["smol", "qwen", "octo"]}
    data["eval"]["selection_runs"] = selection_runs
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def evaluation(step: int, right: int) -> dict:
    """An evaluation JSON as graft evaluate writes it: ``right`` of 4 problems solved on every benchmark."""
    problems = {f"p{i}": [int(i < right)] for i in range(4)}
    benchmark = {"pass@1": right / 4, "per_problem": problems}
    return {
        "step": step,
        "average": right / 4,
        "k": 1,
        "benchmarks": dict.fromkeys(BENCHMARKS, benchmark),
        "validation": {"pass@1": right / 4},
    }


def write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def write_run(results: Path, cell) -> None:
    rows = [
        {"step": step, "model": model, "all_fail": 2, "peer_solved_all_fail": 1, "admitted": 1, "step_time_s": 1.0}
        for step in range(STEPS[-1])
        for model in cell.models
    ]
    path = results / "runs" / cell.method / cell.cell / f"seed{cell.seed}" / "metrics.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    write(path.with_name("done.json"), {"steps": STEPS[-1]})


def write_evaluations(results: Path, cell, models) -> None:
    for model in models:
        for step in STEPS:
            write(
                results / "eval" / cell.method / cell.cell / f"seed{cell.seed}" / model / f"step_{step:05d}.json",
                evaluation(step, 1 + step // 5),
            )


def write_reevaluations(results: Path, cell) -> None:
    for model in cell.models:
        for run in range(2):
            where = results / "eval_selected" / cell.method / cell.cell / f"seed{cell.seed}" / model
            write(where / f"run_{run:02d}.json", evaluation(STEPS[-1], 2 + run))


def build(tmp_path: Path, tree: str) -> tuple[Path, Path]:
    """(config, results) of one kind of partial tree."""
    config_path = write_config(tmp_path, selection_runs=2 if tree == "reevaluations_missing" else 0)
    results = tmp_path / "results"
    results.mkdir()
    cells = training_cells(load_config(config_path))
    if tree == "no_runs":
        return config_path, results
    for cell in cells:
        write_run(results, cell)
    if tree == "runs_only":
        return config_path, results
    for model in ("smol", "qwen", "octo"):
        write(results / "eval" / "base" / model / "seed0" / model / "step_00000.json", evaluation(0, 0))
    # GRPO n=8 and GRAFT on P1 evaluated; of GRAFT on P2 only qwen, the rest not at all
    for cell in cells:
        if (cell.method, cell.cell) in {("grpo_n8", "smol"), ("grpo_n8", "qwen"), ("graft", "P1")}:
            write_evaluations(results, cell, cell.models)
            if tree == "reevaluations_missing" and cell.seed == 0 and cell.method == "grpo_n8":
                write_reevaluations(results, cell)
        if (cell.method, cell.cell) == ("graft", "P2"):
            write_evaluations(results, cell, ["qwen"])
    return config_path, results


@pytest.mark.parametrize("tree", ["no_runs", "runs_only", "some_evaluations", "reevaluations_missing"])
def test_the_report_of_any_partial_tree_writes_every_declared_file(tmp_path, tree):
    config_path, results = build(tmp_path, tree)
    out = tmp_path / "report"
    # rule all's report (workflow.main_cells) on one tree, rule full's on the others
    cells = "main" if tree == "some_evaluations" else "every"
    args = ["report", "--config", str(config_path), "--results", str(results), "--out", str(out), "--cells", cells]
    assert main(args) == 0
    config = load_config(config_path)
    planned = training_cells(config)
    declared = report_outputs(config, main_cells(config, planned) if cells == "main" else planned, out)
    expected = {declared.summary, *declared.tables, *declared.figures}
    assert {p for p in out.rglob("*") if p.is_file()} == expected  # no other file, no temporary left behind
    for path in declared.tables:
        assert path.stat().st_size > 0, path
    for path in declared.figures:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path
    rows = table_rows(out / "tables" / "table1.md")
    never = rows[("octo", "smol", "GRAFT")]  # never evaluated: every score missing, never zero
    assert [never[b] for b in (*BENCHMARKS, "avg")] == [MISSING] * (len(BENCHMARKS) + 1)
    graft, grpo = rows[("smol", "qwen", "GRAFT")]["avg"], rows[("smol", "", "GRPO (n=8)")]["avg"]
    if tree in ("no_runs", "runs_only"):
        assert (graft, grpo) == (MISSING, MISSING)
    elif tree == "some_evaluations":
        assert (graft, grpo) == ("75.00", "75.00")  # the best of the evaluated checkpoints: 3 of 4 solved
    else:  # GRPO n=8's first run re-evaluated (2 and 3 of 4 solved), GRAFT's not: scored by its evaluation
        assert (graft, grpo) == ("75.00", "62.50 ± 17.68")
    summary = (out / "summary.md").read_text()
    assert all(f"**{caption}" in summary for caption in ("Table 1:", "Table 2:", "Table 5:", "Groups of models"))


def table_rows(path: Path) -> dict[tuple[str, str, str], dict[str, str]]:
    """Table 1's Markdown rows by (updated, peer, method), each cell by its column's name."""
    lines = [line for line in path.read_text().splitlines() if line.startswith("|")]
    split = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    header, body = split[0], split[2:]
    return {tuple(row[:3]): dict(zip(header, row, strict=True)) for row in body}
