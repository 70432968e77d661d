"""What one Snakemake invocation asks of the workflow: the training cells its targets need and how far, each cell's
own target, and the summary the workflow prints before its jobs (a dry run included).

A target is a rule (``all``, ``full``, ``report``, ``report_full``) or a path of the results tree (graft.results);
a cell's path asks for the cell up to that output, and a cell needs what its training reads: a replay cell its
peer's GRPO n=8 run, and under ``workflow.disk_budget_gb`` the pruning of the cell whose turn comes before it.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field
from pathlib import Path

from graft.config import RunConfig
from graft.planning.job_lengths import job_kinds, job_lines
from graft.planning.plan import (
    TrainingCell,
    base_seeds,
    check_gpu_ask,
    checkpoint_steps,
    main_cells,
    peak_lines,
    rule_limits,
)
from graft.results import ResultsTree, eval_file


class Stage(enum.IntEnum):
    """How far a target takes a cell; each stage asks for the ones before it."""

    TRAINED = 1
    """Its training run (``done.json``)."""
    EVALUATED = 2
    """Its checkpoints evaluated (``eval/``)."""
    REEVALUATED = 3
    """Its selected checkpoints evaluated again (``eval_selected/``, ``eval.selection_runs``)."""


def last_stage(cfg: RunConfig) -> Stage:
    """A cell's last evaluation: what its target, the report and its pruning ask for."""
    if cfg.eval is not None and cfg.eval.selection_runs:
        return Stage.REEVALUATED
    return Stage.EVALUATED


def cell_target(cfg: RunConfig, tree: ResultsTree, cell: TrainingCell) -> Path:
    """A cell's own target, which asks for everything before it: its last evaluation (docs/operations.md)."""
    if last_stage(cfg) == Stage.REEVALUATED:
        return tree.selected_eval_dir(cell.method, cell.cell, cell.seed)
    return tree.eval_dir(cell.method, cell.cell, cell.seed)


def cell_name(cell: TrainingCell) -> str:
    """``<method>/<cell>/seed<S>``, as ``graft digest --cell`` takes it."""
    return f"{cell.method}/{cell.cell}/seed{cell.seed}"


@dataclass
class Needed:
    """The cells some targets need, each with how far, and the base models' evaluations they need."""

    stages: dict[TrainingCell, Stage] = field(default_factory=dict)
    base_runs: dict[tuple[str, int], None] = field(default_factory=dict)
    """The evaluations of base models, each its model and seed (an ordered set)."""

    @property
    def base(self) -> list[str]:
        """The model of each evaluation of a base model, as graft.planning.plan.base_evaluations lists them."""
        return [model for model, _ in self.base_runs]

    def cells(self, at_least: Stage = Stage.TRAINED) -> list[TrainingCell]:
        return [c for c, stage in self.stages.items() if stage >= at_least]

    def add(self, cell: TrainingCell, stage: Stage) -> bool:
        """Ask for ``cell`` up to ``stage``; whether that asks for more than before."""
        if self.stages.get(cell, 0) >= stage:
            return False
        self.stages[cell] = stage
        return True


REPORTS = {"all": "main", "report": "main", "full": "every", "report_full": "every"}
"""The rules that ask for a report, and the report directories, with the cells that report reads: rule all's
(``workflow.main_cells``) or every one."""

STAGE_DIRS = {
    "runs": Stage.TRAINED,
    "eval": Stage.EVALUATED,
    "eval_parts": Stage.EVALUATED,
    "eval_selected": Stage.REEVALUATED,
}
"""The first directory of a cell's outputs in the results tree, and how far a path in it asks for the cell."""


def needed_cells(
    cfg: RunConfig,
    cells: list[TrainingCell],
    targets: list[str],
    tree: ResultsTree,
    turns: dict[TrainingCell, TrainingCell],
) -> Needed:
    """The cells of ``cells`` that ``targets`` need (none given: rule all, the default target), in the order of
    ``cells``, with the base evaluations of the reports they ask for. ``turns``: the cell whose pruning each cell
    waits for (graft.planning.plan.disk_turns); a pruning already recorded is not needed again."""
    by_key = {(c.method, c.cell, c.seed): c for c in cells}
    last = last_stage(cfg)
    needed = Needed()
    reported: list[TrainingCell] = []
    for target in targets or ["all"]:
        parts = _tree_parts(target, tree)
        scope = REPORTS.get(target) or (REPORTS.get(parts[0]) if parts[:1] in (["report"], ["report_full"]) else None)
        if scope is not None:
            chosen = main_cells(cfg, cells) if scope == "main" else cells
            reported += chosen
            for c in chosen:
                needed.add(c, last)
        elif len(parts) >= 4 and parts[:2] == ["eval", "base"] and _seed(parts[3]) is not None:
            needed.base_runs[(parts[2], _seed(parts[3]))] = None
        elif len(parts) >= 4 and parts[0] in STAGE_DIRS and (cell := by_key.get((*parts[1:3], _seed(parts[3])))):
            pruned = parts[0] == "runs" and parts[4:5] == ["pruned.json"]  # after the cell's last evaluation
            needed.add(cell, last if pruned else STAGE_DIRS[parts[0]])
    models = [m for m in cfg.models if any(m in c.models for c in reported)]
    needed.base_runs.update(dict.fromkeys((m, seed) for m in models for seed in base_seeds(cfg, m)))
    _add_inputs(needed, by_key, tree, turns, last)
    # in the config's order, as graft plan counts them
    needed.stages = {c: needed.stages[c] for c in cells if c in needed.stages}
    order = list(cfg.models)
    runs = sorted((run for run in needed.base_runs if run[0] in order), key=lambda run: (order.index(run[0]), run[1]))
    needed.base_runs = dict.fromkeys(runs)
    return needed


def _seed(text: str) -> int | None:
    digits = text.removeprefix("seed")
    return int(digits) if digits.isdigit() else None


def _tree_parts(target: str, tree: ResultsTree) -> list[str]:
    """A target path's parts below the results tree's root (Snakemake reads a relative target from its working
    directory, as this process's); none for a path outside it."""
    path, root = os.path.abspath(target), os.path.abspath(tree.root)
    if os.path.commonpath([path, root]) != root:
        return []
    return list(Path(os.path.relpath(path, root)).parts)


def _add_inputs(needed: Needed, by_key: dict, tree: ResultsTree, turns: dict, last: Stage) -> None:
    """Add what the training of each needed cell reads from other cells, until nothing more is asked for."""
    queue = list(needed.stages)
    while queue:
        cell = queue.pop()
        inputs = []
        if cell.peer is not None:
            inputs.append((by_key[("grpo_n8", cell.peer, cell.seed)], Stage.TRAINED))
        turn = turns.get(cell)
        if turn is not None and not turn.run_dir(tree).pruned.exists():
            inputs.append((turn, last))
        queue += [c for c, stage in inputs if needed.add(c, stage)]


JOBLESS_OPTIONS = (
    "archive",
    "cleanup_metadata",
    "cleanup_shadow",
    "conda_cleanup_envs",
    "conda_create_envs_only",
    "container_cleanup_images",
    "containerize",
    "d3dag",
    "dag",
    "delete_all_output",
    "delete_temp_output",
    "detailed_summary",
    "filegraph",
    "generate_unit_tests",
    "list_changes",
    "list_conda_envs",
    "list_input_changes",
    "list_params_changes",
    "list_untracked",
    "rulegraph",
    "summary",
    "touch",
    "unlock",
)
"""Snakemake's options (as its parser names them) with which it parses the workflow and runs no job: each takes
another branch than running the workflow in ``snakemake.cli.args_to_api``."""


def runs_jobs(args) -> bool:
    """Whether a Snakemake command line (its parsed ``args``) runs the workflow's jobs, a dry run's plan included;
    False for ``--unlock``, ``--summary``, ``--report`` (without ``--report-after-run``), ``--touch``, a graph ..."""
    if getattr(args, "report", None) is not None and not getattr(args, "report_after_run", False):
        return False
    return all(getattr(args, name, None) in (None, False) for name in JOBLESS_OPTIONS)


@dataclass(frozen=True)
class Invocation:
    """What Snakemake was asked, as the workflow reads it while it is parsed (rules/common.smk)."""

    targets: list[str]
    """The targets on the command line; none: the default target, rule all."""
    executor: str | None
    """The executor it runs the jobs with (``slurm``, ``local``); None where no command line tells it (Snakemake's
    API)."""
    profiles: list[Path] = field(default_factory=list)
    """The profiles it read, each its directory (below the working directory, relative to it)."""
    retries: int = 0
    """How often it retries a failed job (``--retries``): the jobs a training run may chain."""
    command: list[str] | None = None
    """Its command line (``sys.argv``), which the next round of a ``--keep-going`` invocation runs again
    (graft.workflow.rounds); None under Snakemake's API."""
    started: Path = field(default_factory=Path.cwd)
    """Where it started: ``--directory`` changes to the working directory before the workflow is parsed."""
    runs_jobs: bool = True
    """Whether it runs the jobs (a dry run plans them): not with ``--unlock``, ``--summary``, ``--report`` and the
    like (``runs_jobs``), which nothing the workflow does before its jobs may act on."""

    @property
    def profile(self) -> Path | None:
        """The profile whose runtimes are the rules' time limits: the last read, as Snakemake's later profiles win."""
        return self.profiles[-1] if self.profiles else None

    def describe(self) -> str:
        """The targets, the executor and the profiles, for the summary's first line."""
        targets = ", ".join(self.targets) if 0 < len(self.targets) <= 2 else f"{len(self.targets)} targets"
        executor = self.executor or "unknown (no command line)"
        profiles = ", ".join(map(str, self.profiles)) or "none"
        return f"{targets if self.targets else 'all, the default'}; executor {executor}; profile {profiles}"


def summary(cfg: RunConfig, cells: list[TrainingCell], needed: Needed, invocation: Invocation) -> str:
    """What a person reads before the jobs are submitted, which the workflow prints when it starts (a dry run
    included): the cells the invocation's targets need with their jobs per rule and GPU-hours, the disk's peak,
    and the executor and profile it read. ``graft plan`` prints the whole config's plan. GPU work whose jobs ask
    Slurm for no GPU is refused here (graft.planning.plan.check_gpu_ask), so that a dry run never plans it."""
    check_gpu_ask(cfg)
    trained = needed.cells()
    kinds = job_kinds(
        cfg,
        trained,
        checkpoint_steps(cfg),
        needed.base,
        evaluated=needed.cells(Stage.EVALUATED),
        reevaluated=needed.cells(Stage.REEVALUATED),
    )
    named = f": {', '.join(cell_name(c) for c in trained)}" if 0 < len(trained) <= 3 else ""
    lines = [
        f"graft: targets {invocation.describe()}",
        f"graft: they need {len(trained)} of the config's {len(cells)} training cells{named}; "
        "graft plan --config <config> prints the whole config's plan",
    ]
    kinds = [k for k in kinds if k.lengths]  # a rule none of whose jobs the targets need
    lines += job_lines(kinds, *rule_limits(cfg, kinds, invocation.profile))
    lines += [line for line in peak_lines(cfg, trained, needed.base) if "peak" in line or "free" in line]
    return "\n".join(lines)


def evaluations_present(cfg: RunConfig, tree: ResultsTree, cell: TrainingCell) -> bool:
    """Whether a cell's last evaluation is in the tree for every model of it: each checkpoint's evaluation, or each
    selected checkpoint's re-evaluation record (``selected.json``, written after its runs)."""
    if cfg.eval is None:
        return True
    if last_stage(cfg) == Stage.REEVALUATED:
        target = cell_target(cfg, tree, cell)
        return all((target / m / "selected.json").is_file() for m in cell.models)
    directory = tree.eval_dir(cell.method, cell.cell, cell.seed)
    return all(eval_file(directory, m, step).is_file() for m in cell.models for step in checkpoint_steps(cfg))


CELL_STATUS = {
    "done": "trained, and its last evaluation in the tree",
    "trained": "its done.json, not yet its last evaluation",
    "started": "its run directory, no done.json (a job runs, or stopped and resumes when rerun)",
    "pending": "nothing of it yet",
}
"""What ``graft cells`` says of a cell, from the results tree."""


def cell_status(cfg: RunConfig, tree: ResultsTree, cell: TrainingCell) -> str:
    """A key of ``CELL_STATUS``."""
    run = cell.run_dir(tree)
    if not run.done.is_file():
        return "started" if run.root.is_dir() else "pending"
    return "done" if evaluations_present(cfg, tree, cell) else "trained"


@dataclass(frozen=True)
class CellRow:
    """One line of ``graft cells``."""

    cell: TrainingCell
    status: str
    target: Path
    needs: list[tuple[str, str]]
    """Other cells its target waits for, each with why: a replay's peer run (``trajectories``), the cell whose
    pruning it waits for under ``workflow.disk_budget_gb`` (``disk turn``)."""
    baseline: list[str]
    """The GRPO n=8 runs that Table 1's Δ compares it with, those the config plans: each of its models' first (none
    for GRPO n=8 itself)."""


def cell_rows(
    cfg: RunConfig, cells: list[TrainingCell], tree: ResultsTree, turns: dict[TrainingCell, TrainingCell]
) -> list[CellRow]:
    """Every cell of ``cells`` with its status in ``tree``, its target and what it needs (``turns``: the cell whose
    pruning each cell waits for, graft.planning.plan.disk_turns)."""
    planned = {cell_name(c) for c in cells}
    rows = []
    for c in cells:
        needs = []
        if c.peer is not None:
            needs.append((f"grpo_n8/{c.peer}/seed{c.seed}", "trajectories"))
        if c in turns:
            needs.append((cell_name(turns[c]), "disk turn"))
        firsts = [f"grpo_n8/{m}/seed{base_seeds(cfg, m)[0]}" for m in c.models if c.method != "grpo_n8"]
        baseline = [name for name in firsts if name in planned]
        rows.append(CellRow(c, cell_status(cfg, tree, c), cell_target(cfg, tree, c), needs, baseline))
    return rows


def cell_lines(rows: list[CellRow], tsv: bool) -> list[str]:
    """``graft cells``'s output: a table to read, or tab-separated values with a header (``tsv``)."""
    if tsv:
        header = ["method", "cell", "seed", "status", "target", "needs", "baseline"]
        return [
            "\t".join(header),
            *(
                "\t".join(
                    [
                        r.cell.method,
                        r.cell.cell,
                        str(r.cell.seed),
                        r.status,
                        str(r.target),
                        ",".join(name for name, _ in r.needs),
                        ",".join(r.baseline),
                    ]
                )
                for r in rows
            ),
        ]
    table = [
        (
            cell_name(r.cell),
            r.status,
            str(r.target),
            ", ".join([*(f"{name} ({why})" for name, why in r.needs), *(f"{name} (baseline)" for name in r.baseline)])
            or "-",
        )
        for r in rows
    ]
    table.insert(0, ("cell", "status", "target", "needs"))
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    lines = ["  ".join([*(row[i].ljust(width) for i, width in enumerate(widths)), row[3]]) for row in table]
    return lines + [f"{status}: {meaning}" for status, meaning in CELL_STATUS.items()]
