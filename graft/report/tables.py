"""The paper's tables from the collected results (Table 1, Table 2, stored trajectories, checkpoint selection,
clipped-token fractions), with the paper's numbers beside ours."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from graft.methods import PRESETS
from graft.report.load import AVERAGE, Results, load
from graft.report.paper import paper_average
from graft.report.stats import SeedAggregate, aggregate, checkpoint_scores, paired_bootstrap, select
from graft.report.table import Table
from graft.results import replay_cell


@dataclass
class ReportContext:
    """The loaded results and the config's view of them (models, pairs, benchmarks, selection rule)."""

    results: Results
    models: list[str]
    pairs: dict[str, list[str]]
    paper_models: dict[str, str]
    benchmarks: list[str]
    rule: str = "test_best"
    pair_methods: list[str] = field(default_factory=lambda: ["graft"])
    """The co-training methods of the workflow (transfer table)."""
    checkpoints: pd.DataFrame = field(init=False)
    _selected: dict[str, pd.DataFrame] = field(init=False, default_factory=dict)

    def __post_init__(self):
        self.checkpoints = checkpoint_scores(self.results.scores)

    @classmethod
    def from_results(cls, results: Path, *args, **kwargs) -> ReportContext:
        return cls(load(results), *args, **kwargs)

    def selected(self, rule: str | None = None) -> pd.DataFrame:
        """The kept checkpoint of every run under ``rule`` (the config's rule by default)."""
        rule = rule or self.rule
        if rule not in self._selected:
            self._selected[rule] = select(self.checkpoints, rule)
        return self._selected[rule]

    def cell(self, method: str, cell: str, model: str, column: str = AVERAGE, rule: str | None = None):
        return aggregate(self.selected(rule), method, cell, model, column)

    def run_cells(self) -> list[tuple[str, str, str]]:
        """Every (method, cell, model) with at least one evaluated checkpoint."""
        return sorted(set(self.checkpoints[["method", "cell", "model"]].itertuples(index=False, name=None)))

    def metrics(self, method: str, cell: str, seeds: list[int] | None = None, model: str | None = None) -> pd.DataFrame:
        """A training cell's metric rows, of some seeds and one model when given."""
        m = self.results.metrics
        keep = (m.method == method) & (m.cell == cell)
        if seeds is not None:
            keep &= m.seed.isin(seeds)
        if model is not None:
            keep &= m.model == model
        return m[keep]

    def bootstrap(self, a: SeedAggregate, b: SeedAggregate) -> tuple[float, float] | None:
        return paired_bootstrap(self.results.samples, a.selected, b.selected)

    def paper(self, model: str) -> str | None:
        return self.paper_models.get(model)

    def pair_of(self, a: str, b: str) -> str | None:
        return next((name for name, members in self.pairs.items() if set(members) == {a, b}), None)

    def peers(self, model: str) -> list[tuple[str, str]]:
        """(peer, pair) for every pair that ``model`` belongs to, in the config's model order."""
        found = [(peer, self.pair_of(model, peer)) for peer in self.models if peer != model]
        return [(peer, pair) for peer, pair in found if pair is not None]


def _pm(cell: SeedAggregate) -> str | None:
    if cell.mean is None:
        return None
    return f"{cell.mean:.2f}" + (f" ± {cell.std:.2f}" if cell.std is not None else "")


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def table1(ctx: ReportContext) -> Table:
    header = ["updated", "peer", "method", *ctx.benchmarks, "avg", "Δ vs GRPO n=8", "Δ 95% CI", "paper avg", "paper Δ"]
    rows = []
    for model in ctx.models:
        base = ctx.cell("grpo_n8", model, model)
        paper_base = paper_average(ctx.paper(model), "grpo_n8")
        blocks = [(None, [(m, model) for m in ("grpo_n8", "grpo_n16", "grpo_n32")])]
        for peer, pair in ctx.peers(model):
            blocks.append(
                (peer, [("hacpo", pair), ("sgt", pair), ("graft", pair), ("replay", replay_cell(model, peer))])
            )
        for peer, entries in blocks:
            for method, cell_name in entries:
                cell = ctx.cell(method, cell_name, model)
                per_bench = [ctx.cell(method, cell_name, model, b).mean for b in ctx.benchmarks]
                paper_value = paper_average(ctx.paper(model), method, ctx.paper(peer) if peer else None)
                own = method == "grpo_n8"
                rows.append(
                    [
                        model,
                        peer or "",
                        PRESETS[method].label,
                        *per_bench,
                        _pm(cell),
                        None if own else _delta(cell.mean, base.mean),
                        None if own else ctx.bootstrap(cell, base),
                        paper_value,
                        None if own else _delta(paper_value, paper_base),
                    ]
                )
    caption = "Table 1: five-benchmark pass@1 (%) by updated model and peer; paper values beside ours"
    return Table.from_rows("table1", caption, header, rows)


ABLATION_ROWS = [name for name, p in PRESETS.items() if p.table in ("2a", "2b", "F")]


def table2(ctx: ReportContext) -> Table:
    pair_name, members = next(iter(ctx.pairs.items()))
    header = ["variant", "table"]
    for model in members:
        header += [f"{model} avg", f"{model} Δ vs GRAFT", f"{model} paper avg", f"{model} paper Δ"]
    rows = []
    full = {m: ctx.cell("graft", pair_name, m) for m in members}
    for method in ["graft", *ABLATION_ROWS, "hacpo", "sgt", "grpo_n8"]:
        row: list[object] = [PRESETS[method].label, PRESETS[method].table]
        for model in members:
            peer = next(m for m in members if m != model)
            cell = ctx.cell(method, model if method == "grpo_n8" else pair_name, model)
            paper_value = paper_average(ctx.paper(model), method, ctx.paper(peer))
            paper_full = paper_average(ctx.paper(model), "graft", ctx.paper(peer))
            row += [
                _pm(cell),
                _delta(cell.mean, full[model].mean) if method != "graft" else None,
                paper_value,
                _delta(paper_value, paper_full) if method != "graft" else None,
            ]
        rows.append(row)
    caption = f"Table 2: ablations and alternative designs on {pair_name}; Δ vs full GRAFT"
    return Table.from_rows("table2_ablations", caption, header, rows)


def table_stored(ctx: ReportContext) -> Table:
    header = ["updated", "peer", "GRPO n=8", "GRAFT online", "stored", "Δ online", "Δ stored"]
    header += ["paper online", "paper stored", "paper Δ stored"]
    rows = []
    for model in ctx.models:
        base = ctx.cell("grpo_n8", model, model)
        paper_base = paper_average(ctx.paper(model), "grpo_n8")
        for peer, pair in ctx.peers(model):
            online = ctx.cell("graft", pair, model)
            stored = ctx.cell("replay", replay_cell(model, peer), model)
            paper_online = paper_average(ctx.paper(model), "graft", ctx.paper(peer))
            paper_stored = paper_average(ctx.paper(model), "replay", ctx.paper(peer))
            rows.append(
                [
                    model,
                    peer,
                    _pm(base),
                    _pm(online),
                    _pm(stored),
                    _delta(online.mean, base.mean),
                    _delta(stored.mean, base.mean),
                    paper_online,
                    paper_stored,
                    _delta(paper_stored, paper_base),
                ]
            )
    caption = "Stored peer trajectories (archive replay) vs online co-training"
    return Table.from_rows("table_stored", caption, header, rows)


def table_selection(ctx: ReportContext) -> Table:
    header = ["method", "cell", "model", "best on test (paper rule)", "best on validation", "final", "test - val"]
    rows = []
    for method, cell_name, model in ctx.run_cells():
        values = [ctx.cell(method, cell_name, model, rule=rule).mean for rule in ("test_best", "val_best", "final")]
        rows.append([method, cell_name, model, *values, _delta(values[0], values[1])])
    caption = "Checkpoint selection: how much picking the best test checkpoint inflates scores"
    return Table.from_rows("table_selection", caption, header, rows)


def table_clipping(ctx: ReportContext, seeds: list[int]) -> Table:
    pair_name, members = next(iter(ctx.pairs.items()))
    header = ["position", "model", "clipped own tokens (%)", "clipped peer tokens (%)"]
    rows = []
    for method in ("graft", "graft_peer_first", "graft_uniform"):
        if ctx.metrics(method, pair_name, seeds).empty:
            continue  # not run (the CPU default leaves the order ablations out)
        for model in members:
            mine = ctx.metrics(method, pair_name, seeds, model)
            means = [
                100 * float(mine[column].dropna().mean()) if column in mine and mine[column].notna().any() else None
                for column in ("clip_frac_own", "clip_frac_peer")
            ]
            rows.append([PRESETS[method].label, model, *means])
    caption = f"Clipped-token fractions by peer minibatch position ({pair_name}, appendix H)"
    return Table.from_rows("table_clipping", caption, header, rows)


def table_transfers(ctx: ReportContext, methods: list[str], seeds: list[int]) -> Table:
    """One line per direction of every co-training cell: peer responses transferred and admitted over the run
    (per seed), and how many of the admitted ones were correct."""
    header = ["method", "pair", "receiver", "seeds", "transferred", "admitted", "admitted correct (%)"]
    header += ["gate pass correct (%)", "gate pass wrong (%)"]
    rows = []
    for method in methods:
        for pair, members in ctx.pairs.items():
            for model in members:
                mine = ctx.metrics(method, pair, seeds, model)
                runs = mine.seed.nunique()
                if not runs:
                    continue  # a cell the workflow did not run (workflow.baseline_pairs)
                total = {c: float(mine[c].sum()) if c in mine else 0.0 for c in _TRANSFER_COUNTS}
                rows.append(
                    [
                        PRESETS[method].label,
                        pair,
                        model,
                        runs,
                        total["transferred"] / runs,
                        total["admitted"] / runs,
                        _percent(total["correct_admitted"], total["admitted"]),
                        _percent(total["correct_admitted"], total["correct_transferred"]),
                        _percent(
                            total["admitted"] - total["correct_admitted"],
                            total["transferred"] - total["correct_transferred"],
                        ),
                    ]
                )
    caption = "Transfers per direction over a run (mean over seeds): admitted responses and the share correct"
    return Table.from_rows("table_transfers", caption, header, rows)


_TRANSFER_COUNTS = ("transferred", "admitted", "correct_transferred", "correct_admitted")


def _percent(part: float, whole: float) -> float | None:
    return 100.0 * part / whole if whole else None


# (finding, method and cell kind, baseline and cell kind): "pair", "model" or "replay" cells of the first pair
FINDINGS = (
    ("GRAFT above GRPO n=8", ("graft", "pair"), ("grpo_n8", "model")),
    ("stored trajectories above GRPO n=8", ("replay", "replay"), ("grpo_n8", "model")),
    ("w/o compatibility gate below GRAFT", ("graft_no_gate", "pair"), ("graft", "pair")),
    ("success-only below GRAFT", ("graft_success_only", "pair"), ("graft", "pair")),
    ("HACPO below GRAFT", ("hacpo", "pair"), ("graft", "pair")),
    ("GRAFT against GRPO n=32", ("graft", "pair"), ("grpo_n32", "model")),
)


def table_findings(ctx: ReportContext) -> Table:
    """The paper's claims on the first pair, each as ours (difference, interval) beside the paper's difference,
    and whether the two point the same way; an interval that holds 0 does not count as agreeing."""
    pair, members = next(iter(ctx.pairs.items()))
    header = ["finding", "model", "ours Δ", "Δ 95% CI", "paper Δ", "same direction"]
    rows = []
    for finding, (method, kind), (base_method, base_kind) in FINDINGS:
        for model in members:
            peer = next(m for m in members if m != model)
            cells = {"pair": pair, "model": model, "replay": replay_cell(model, peer)}
            ours, base = ctx.cell(method, cells[kind], model), ctx.cell(base_method, cells[base_kind], model)
            paper_delta = _delta(
                paper_average(ctx.paper(model), method, ctx.paper(peer)),
                paper_average(ctx.paper(model), base_method, ctx.paper(peer)),
            )
            delta = _delta(ours.mean, base.mean)
            ci = ctx.bootstrap(ours, base) if delta is not None else None
            rows.append([finding, model, delta, ci, paper_delta, _agrees(ci, paper_delta)])
    caption = f"The paper's findings on {pair}: our difference and interval beside the paper's"
    return Table.from_rows("table_findings", caption, header, rows)


def _agrees(ci: tuple[float, float] | None, paper_delta: float | None) -> str | None:
    if ci is None or paper_delta is None:
        return None
    if ci[0] > 0 or ci[1] < 0:
        return "yes" if (ci[0] > 0) == (paper_delta > 0) else "no (opposite)"
    return "no (interval holds 0)"
