"""What one Snakemake invocation asks of the workflow (graft/planning/targets.py): the cells its targets need and
how far, the summary printed before its jobs, and ``graft cells``'s list of every cell with its target."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from graft.cli import main
from graft.config import config_from_dict, load_config
from graft.planning.plan import base_evaluations, checkpoint_steps, disk_turns, main_cells, training_cells
from graft.planning.targets import (
    Invocation,
    Stage,
    cell_lines,
    cell_rows,
    cell_target,
    needed_cells,
    runs_jobs,
    summary,
)
from graft.results import ResultsTree, eval_file

PAPER = Path("config/paper.yaml")
SLURM_RUN = Invocation([], "slurm", [Path("workflow/profiles/slurm")], retries=2)


def paper(tmp_path: Path, **workflow):
    """The paper config with its results under ``tmp_path``; ``workflow``: fields of its workflow section."""
    raw = yaml.safe_load(PAPER.read_text())
    raw["results"] = str(tmp_path / "results")
    raw["workflow"].update(workflow)
    return config_from_dict(raw)


def key(cell) -> str:
    return f"{cell.method}/{cell.cell}/seed{cell.seed}"


def test_rule_all_needs_its_main_cells_and_full_every_cell_with_their_base_evaluations(tmp_path):
    cfg = load_config("config/config.yaml")
    cells = training_cells(cfg)
    tree = ResultsTree(tmp_path)
    default = needed_cells(cfg, cells, [], tree, {})
    assert default.stages == {c: Stage.EVALUATED for c in main_cells(cfg, cells)}  # no re-evaluation there
    assert len(default.cells()) < len(cells) and default.base == ["smol"] * 3 + ["qwen"] * 3  # one per seed
    every = needed_cells(cfg, cells, ["full", "all", str(tree.base_eval("octo", 0))], tree, {})
    assert every.cells() == cells and every.base == base_evaluations(cfg)


def test_a_cells_paths_ask_for_it_up_to_that_output_and_for_what_its_training_reads(tmp_path):
    cfg = paper(tmp_path)
    cells = training_cells(cfg)
    tree = ResultsTree(cfg.results)
    by_key = {key(c): c for c in cells}

    def stages(target: Path) -> dict[str, Stage]:
        found = needed_cells(cfg, cells, [str(target)], tree, {})
        assert found.base == []  # only a report reads the base models' evaluations
        return {key(c): s for c, s in found.stages.items()}

    graft = by_key["graft/P1/seed0"]
    assert stages(cell_target(cfg, tree, graft)) == {"graft/P1/seed0": Stage.REEVALUATED}
    assert stages(graft.run_dir(tree).done) == {"graft/P1/seed0": Stage.TRAINED}
    assert stages(tree.eval_part_dir("graft", "P1", 0, 3)) == {"graft/P1/seed0": Stage.EVALUATED}
    assert stages(graft.run_dir(tree).pruned) == {"graft/P1/seed0": Stage.REEVALUATED}  # after the last evaluation
    # a replay cell trains from its peer's stored GRPO n=8 run: that run's training only
    assert stages(tree.eval_dir("replay", "smollm3_from_qwen3", 0)) == {
        "grpo_n8/qwen3/seed0": Stage.TRAINED,
        "replay/smollm3_from_qwen3/seed0": Stage.EVALUATED,
    }
    assert stages(tree.methods) == {} and stages(tmp_path / "elsewhere" / "runs" / "graft" / "P1" / "seed0") == {}


def test_a_cell_waiting_its_disk_turn_needs_the_cells_before_it_until_one_is_pruned(tmp_path):
    cfg = paper(tmp_path, disk_budget_gb=5000)
    cells = training_cells(cfg)
    tree = ResultsTree(cfg.results)
    _, turns = disk_turns(cfg, cells)
    last = next(c for c in reversed(cells) if c in turns)
    chain = [last]
    while chain[-1] in turns:
        chain.append(turns[chain[-1]])
    found = needed_cells(cfg, cells, [str(last.run_dir(tree).done)], tree, turns)
    assert set(found.stages) == set(chain) and len(chain) > 2
    assert found.stages[last] == Stage.TRAINED and all(found.stages[c] == Stage.REEVALUATED for c in chain[1:])
    before = chain[1].run_dir(tree).pruned
    before.parent.mkdir(parents=True)
    before.write_text("{}")  # its pruning is recorded: the cells before it are not needed again
    assert set(needed_cells(cfg, cells, [str(last.run_dir(tree).done)], tree, turns).stages) == {last}


def test_the_summary_of_one_cell_counts_its_jobs_and_names_the_executor_and_profile(tmp_path):
    """A one-cell dry run on the paper config: one training job's GPU-hours and its peak, not the config's 56 cells;
    its done.json alone asks for no evaluation."""
    cfg = paper(tmp_path)
    cells = training_cells(cfg)
    tree = ResultsTree(cfg.results)
    target = str(tree.selected_eval_dir("graft", "P1", 0))
    one = Invocation([target], "slurm", [Path("workflow/profiles/slurm")])
    lines = summary(cfg, cells, needed_cells(cfg, cells, [target], tree, {}), one).splitlines()
    assert lines[0] == f"graft: targets {target}; executor slurm; profile workflow/profiles/slurm"
    assert lines[1].startswith("graft: they need 1 of the config's 56 training cells: graft/P1/seed0;")
    assert "limits from the config's slurm section and workflow/profiles/slurm" in lines[2]
    rows = {line.split()[0]: line.split()[1] for line in lines[4:] if line.startswith("  ") and "peak" not in line}
    assert rows == {"train": "1", "evaluate_checkpoints": "7", "reevaluate_selected": "1"}
    assert "GPU-hours: training 30, evaluation 42, re-evaluation 6" in lines
    assert any(line.startswith("  peak:") and "its one cell in flight" in line for line in lines)
    trained = summary(cfg, cells, needed_cells(cfg, cells, [str(tree.run("graft", "P1", 0).done)], tree, {}), one)
    assert "GPU-hours: training 30\n" in trained and "evaluate_checkpoints" not in trained
    every = summary(cfg, cells, needed_cells(cfg, cells, [], tree, {}), SLURM_RUN)
    assert "they need 56 of the config's 56 training cells;" in every and "training 1,601" in every


def test_graft_cells_lists_each_cells_target_status_and_needs(tmp_path, capsys):
    cfg = paper(tmp_path)
    cells = training_cells(cfg)
    tree = ResultsTree(cfg.results)
    replay = next(c for c in cells if c.method == "replay" and c.seed == 0)
    graft = next(c for c in cells if c.method == "graft" and c.seed == 0)
    # the replay cell trained and re-evaluated for each model, GRAFT trained only, its peer's run begun
    for c in (replay, graft):
        c.run_dir(tree).root.mkdir(parents=True)
        c.run_dir(tree).done.write_text("{}")
    for model in replay.models:
        record = cell_target(cfg, tree, replay) / model / "selected.json"
        record.parent.mkdir(parents=True)
        record.write_text(json.dumps({"step": 5}))
    tree.run("grpo_n8", replay.peer, 0).root.mkdir(parents=True)
    rows = {key(r.cell): r for r in cell_rows(cfg, cells, tree, {})}
    assert [rows[key(c)].status for c in (replay, graft)] == ["done", "trained"]
    assert rows[f"grpo_n8/{replay.peer}/seed0"].status == "started"
    assert rows["grpo_n8/smollm3/seed1"].status == "pending"
    assert rows[key(replay)].needs == [(f"grpo_n8/{replay.peer}/seed0", "trajectories")]
    # Table 1's Δ: each model's GRPO n=8 run of its first seed; none for GRPO n=8 itself
    assert rows[key(graft)].baseline == ["grpo_n8/smollm3/seed0", "grpo_n8/qwen3/seed0"]
    assert rows["grpo_n8/smollm3/seed1"].baseline == []
    text = cell_lines(list(rows.values()), tsv=False)
    assert text[0].split() == ["cell", "status", "target", "needs"] and len(text) == 1 + len(cells) + 4
    tsv_path = tmp_path / "paper.yaml"
    tsv_path.write_text(yaml.safe_dump({**yaml.safe_load(PAPER.read_text()), "results": cfg.results}))
    assert main(["cells", "--config", str(tsv_path), "--format", "tsv"]) == 0
    tsv = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert tsv[0] == ["method", "cell", "seed", "status", "target", "needs", "baseline"] and len(tsv) == 1 + len(cells)
    line = next(row for row in tsv if row[:3] == ["replay", replay.cell, "0"])
    waited = disk_turns(cfg, cells)[1].get(replay)  # its turn under the paper config's disk budget
    assert line[3:] == [
        "done",
        str(cell_target(cfg, tree, replay)),
        ",".join([f"grpo_n8/{replay.peer}/seed0", *([key(waited)] if waited else [])]),
        f"grpo_n8/{replay.models[0]}/seed0",
    ]


@pytest.mark.parametrize("every", [True, False])
def test_a_cell_evaluated_in_training_is_done_once_every_checkpoint_of_each_model_is_evaluated(tmp_path, every):
    cfg = load_config("config/config.yaml")  # the embedded default: no re-evaluation, training evaluates
    tree = ResultsTree(tmp_path)
    cell = training_cells(cfg)[0]
    cell.run_dir(tree).root.mkdir(parents=True)
    cell.run_dir(tree).done.write_text("{}")
    steps = checkpoint_steps(cfg)
    for model in cell.models:
        for step in steps if every else steps[:-1]:
            path = eval_file(tree.eval_dir(cell.method, cell.cell, cell.seed), model, step)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("{}")
    (row,) = cell_rows(cfg, [cell], tree, {})
    assert row.target == tree.eval_dir(cell.method, cell.cell, cell.seed)
    assert row.status == ("done" if every else "trained")


@pytest.mark.parametrize(
    ("words", "runs"),
    [
        ([], True),
        (["--dry-run"], True),
        (["--report", "r.html", "--report-after-run"], True),
        (["--unlock"], False),
        (["--summary"], False),
        (["--report", "r.html"], False),
        (["--touch"], False),
        (["--dag"], False),
        (["--list-changes", "code"], False),
        (["--delete-all-output"], False),
        (["--cleanup-metadata", "x"], False),
    ],
)
def test_a_command_line_runs_jobs_unless_it_asks_snakemake_for_something_else(words, runs):
    """What the workflow does before its jobs (retiring runs whose settings changed, stopping on them) waits for a
    command that plans or runs jobs; Snakemake's own parser reads the words."""
    from snakemake.cli import get_argument_parser

    assert runs_jobs(get_argument_parser().parse_args(words)) is runs
