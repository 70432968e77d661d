"""The report of a results tree: which tables and figures exist, and writing them.

``report_outputs`` is the one list of the report's files; the workflow's report rule reads it, so adding a table
means adding it to ``TABLES`` here (and its builder in graft.report.tables).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from graft.config import RunConfig
from graft.report.figures import figure1, figure3a, figure3b, figure_dynamics
from graft.report.load import load
from graft.report.table import Table
from graft.report.tables import (
    ReportContext,
    table1,
    table2,
    table4,
    table_clipping,
    table_cost,
    table_findings,
    table_groups,
    table_passk,
    table_selection,
    table_stored,
    table_transfers,
)
from graft.results import write_text

TABLE_FORMATS = ("md", "csv", "tex")


@dataclass(frozen=True)
class Job:
    """One table or figure: its name and how to make it from the context and the report's inputs."""

    name: str
    needs: str
    """The config's "pairs" or "groups" this job needs some of, or "" for none."""
    make: Callable[..., object]


# make(ctx, seeds) -> Table, over every seed of the config
TABLES = (
    Job("table1", "", lambda ctx, seeds: table1(ctx)),
    Job("table4", "pairs", lambda ctx, seeds: table4(ctx)),
    Job("table2_ablations", "pairs", lambda ctx, seeds: table2(ctx)),
    Job("table_stored", "", lambda ctx, seeds: table_stored(ctx)),
    Job("table_selection", "", lambda ctx, seeds: table_selection(ctx)),
    Job("table_clipping", "pairs", table_clipping),
    Job("table_transfers", "pairs", lambda ctx, seeds: table_transfers(ctx, ctx.workflow.pair_methods, seeds)),
    Job("table_findings", "pairs", lambda ctx, seeds: table_findings(ctx)),
    Job("table_passk", "", lambda ctx, seeds: table_passk(ctx)),
    Job("table_cost", "pairs", lambda ctx, seeds: table_cost(ctx)),
    Job("table_groups", "groups", table_groups),
)
# make(ctx, path): a figure (of each cell's first run where it draws one run)
FIGURES = (
    Job("fig1_complementarity", "", figure1),
    Job("fig3a_score_vs_cost", "", figure3a),
    Job("fig3b_stored_vs_online", "", figure3b),
)


@dataclass(frozen=True)
class ReportOutputs:
    summary: Path
    tables: list[Path]
    figures: list[Path]


def _dynamics(method: str, pair: str) -> Job:
    return Job(f"dynamics_{method}_{pair}", "pairs", lambda ctx, path: figure_dynamics(ctx, method, pair, path))


def _jobs(jobs: tuple[Job, ...], config: RunConfig, cells: Collection) -> list[Job]:
    """The jobs this config has data for; figures add one training-dynamics figure per co-training cell that
    the workflow runs (pair method x pair, its first seed)."""
    if jobs is FIGURES:
        planned = {(c.method, c.cell) for c in cells}
        pairs = [(m, p) for m in config.workflow.pair_methods for p in config.pairs if (m, p) in planned]
        jobs = jobs + tuple(_dynamics(m, p) for m, p in pairs)
    return [job for job in jobs if not job.needs or getattr(config, job.needs)]


def report_outputs(config: RunConfig, cells: Collection, out: str | Path) -> ReportOutputs:
    """Every file ``write_report`` writes for this config and its training ``cells`` under ``out``."""
    out = Path(out)
    return ReportOutputs(
        summary=out / "summary.md",
        tables=[out / "tables" / f"{job.name}.{ext}" for job in _jobs(TABLES, config, cells) for ext in TABLE_FORMATS],
        figures=[out / "figures" / f"{job.name}.png" for job in _jobs(FIGURES, config, cells)],
    )


def report_context(config: RunConfig, results: Path, cells: Collection | None = None) -> ReportContext:
    """The results tree loaded and seen as ``config`` sees it (its models, pairs, benchmarks, rule and seeds);
    ``cells``: of these training cells only (and the base models), else of every run the tree holds."""
    loaded = load(results)
    if cells is not None:
        loaded = loaded.of_runs({(c.method, c.cell, c.seed) for c in cells}, {m for c in cells for m in c.models})
    return ReportContext(
        loaded,
        list(config.models),
        config.pairs,
        config.report.paper_models,
        list(config.eval.benchmarks) if config.eval else [],
        config.report.selection,
        workflow=config.workflow,
        selection_runs=config.eval.selection_runs if config.eval else 0,
        groups=config.groups,
    )


def write_report(config: RunConfig, cells: Collection, results: Path, out: Path, scope: str = "") -> ReportContext:
    """Tables (Markdown, CSV, LaTeX), figures (PNG) and a Markdown summary of every table, for the workflow's
    training ``cells`` (graft.planning.plan.training_cells: each a method, a cell and a seed). ``scope``: a
    sentence for the summary's head naming which cells these are, where they are not every cell."""
    ctx = report_context(config, results, cells if scope else None)
    seeds = sorted({cell.seed for cell in cells})
    # Every table is made before any file is written: a table that cannot be made leaves no file of this report
    # written. Each file is written aside and renamed, never half written.
    tables: list[Table] = [job.make(ctx, seeds) for job in _jobs(TABLES, config, cells)]
    for job in _jobs(FIGURES, config, cells):
        job.make(ctx, out / "figures" / f"{job.name}.png")
    for table in tables:
        table.write(out / "tables")
    header = f"Scores are pass@1 (%); {ctx.protocol()}. Each table's caption names its seeds.\n\n"
    if scope:
        header = f"{scope}\n\n{header}"
    write_text(out / "summary.md", header + "\n".join(table.markdown() for table in tables))
    return ctx
