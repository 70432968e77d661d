"""The paper's tables from the collected results (Table 1, Table 2, stored trajectories, checkpoint selection,
clipped-token fractions), with the paper's numbers beside ours."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from graft.methods import PRESETS
from graft.report.load import read_metrics
from graft.report.paper import paper_average
from graft.report.stats import SeedAggregate, aggregate, paired_bootstrap
from graft.report.table import Table
from graft.results import replay_cell


def _pm(cell: SeedAggregate) -> str | None:
    if cell.mean is None:
        return None
    return f"{cell.mean:.2f}" + (f" ± {cell.std:.2f}" if cell.std is not None else "")


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


@dataclass
class ReportContext:
    runs: dict
    models: list[str]
    pairs: dict[str, list[str]]
    paper_models: dict[str, str]
    benchmarks: list[str]
    rule: str = "test_best"

    def paper(self, model: str) -> str | None:
        return self.paper_models.get(model)

    def pair_of(self, a: str, b: str) -> str | None:
        return next((name for name, members in self.pairs.items() if set(members) == {a, b}), None)


def table1(ctx: ReportContext) -> Table:
    header = ["updated", "peer", "method", *ctx.benchmarks, "avg", "Δ vs GRPO n=8", "Δ 95% CI", "paper avg", "paper Δ"]
    rows = []
    for model in ctx.models:
        base = aggregate(ctx.runs, "grpo_n8", model, model, ctx.rule)
        paper_base = paper_average(ctx.paper(model), "grpo_n8")
        blocks = [(None, [(m, model) for m in ("grpo_n8", "grpo_n16", "grpo_n32")])]
        for peer in ctx.models:
            pair = ctx.pair_of(model, peer) if peer != model else None
            if pair is None:
                continue
            blocks.append(
                (peer, [("hacpo", pair), ("sgt", pair), ("graft", pair), ("replay", replay_cell(model, peer))])
            )
        for peer, entries in blocks:
            for method, cell_name in entries:
                cell = aggregate(ctx.runs, method, cell_name, model, ctx.rule)
                per_bench = [aggregate(ctx.runs, method, cell_name, model, ctx.rule, b).mean for b in ctx.benchmarks]
                paper_value = paper_average(ctx.paper(model), method, ctx.paper(peer) if peer else None)
                ci = paired_bootstrap(cell.points, base.points) if method != "grpo_n8" else None
                rows.append(
                    [
                        model,
                        peer or "",
                        PRESETS[method].label,
                        *per_bench,
                        _pm(cell),
                        _delta(cell.mean, base.mean) if method != "grpo_n8" else None,
                        ci,
                        paper_value,
                        _delta(paper_value, paper_base) if method != "grpo_n8" else None,
                    ]
                )
    return Table(
        "table1", "Table 1: five-benchmark pass@1 (%) by updated model and peer; paper values beside ours", header, rows
    )


ABLATION_ROWS = [name for name, p in PRESETS.items() if p.table in ("2a", "2b", "F")]


def table2(ctx: ReportContext) -> Table:
    pair_name, members = next(iter(ctx.pairs.items()))
    header = ["variant", "table"]
    for model in members:
        header += [f"{model} avg", f"{model} Δ vs GRAFT", f"{model} paper avg", f"{model} paper Δ"]
    rows = []
    full = {m: aggregate(ctx.runs, "graft", pair_name, m, ctx.rule) for m in members}
    for method in ["graft", *ABLATION_ROWS, "hacpo", "sgt", "grpo_n8"]:
        row: list[object] = [PRESETS[method].label, PRESETS[method].table]
        for model in members:
            peer = next(m for m in members if m != model)
            cell_name = model if method == "grpo_n8" else pair_name
            cell = aggregate(ctx.runs, method, cell_name, model, ctx.rule)
            paper_value = paper_average(ctx.paper(model), method, ctx.paper(peer))
            paper_full = paper_average(ctx.paper(model), "graft", ctx.paper(peer))
            row += [
                _pm(cell),
                _delta(cell.mean, full[model].mean) if method != "graft" else None,
                paper_value,
                _delta(paper_value, paper_full) if method != "graft" else None,
            ]
        rows.append(row)
    return Table(
        "table2_ablations", f"Table 2: ablations and alternative designs on {pair_name}; Δ vs full GRAFT", header, rows
    )


def table_stored(ctx: ReportContext) -> Table:
    header = [
        "updated",
        "peer",
        "GRPO n=8",
        "GRAFT online",
        "stored",
        "Δ online",
        "Δ stored",
        "paper online",
        "paper stored",
        "paper Δ stored",
    ]
    rows = []
    for model in ctx.models:
        base = aggregate(ctx.runs, "grpo_n8", model, model, ctx.rule)
        pb = paper_average(ctx.paper(model), "grpo_n8")
        for peer in ctx.models:
            pair = ctx.pair_of(model, peer) if peer != model else None
            if pair is None:
                continue
            online = aggregate(ctx.runs, "graft", pair, model, ctx.rule)
            stored = aggregate(ctx.runs, "replay", replay_cell(model, peer), model, ctx.rule)
            p_on = paper_average(ctx.paper(model), "graft", ctx.paper(peer))
            p_st = paper_average(ctx.paper(model), "replay", ctx.paper(peer))
            rows.append(
                [
                    model,
                    peer,
                    _pm(base),
                    _pm(online),
                    _pm(stored),
                    _delta(online.mean, base.mean),
                    _delta(stored.mean, base.mean),
                    p_on,
                    p_st,
                    _delta(p_st, pb),
                ]
            )
    return Table("table_stored", "Stored peer trajectories (archive replay) vs online co-training", header, rows)


def table_selection(ctx: ReportContext) -> Table:
    header = ["method", "cell", "model", "best on test (paper rule)", "best on validation", "final", "test - val"]
    rows = []
    for method, cell_name, model in sorted({(m, c, mod) for (m, c, _s, mod) in ctx.runs}):
        values = [
            aggregate(ctx.runs, method, cell_name, model, rule).mean for rule in ("test_best", "val_best", "final")
        ]
        rows.append([method, cell_name, model, *values, _delta(values[0], values[1])])
    return Table(
        "table_selection",
        "Checkpoint selection: how much picking the best test checkpoint inflates scores",
        header,
        rows,
    )


def table_clipping(ctx: ReportContext, results: Path, seeds: list[int]) -> Table:
    pair_name, members = next(iter(ctx.pairs.items()))
    header = ["position", "model", "clipped own tokens (%)", "clipped peer tokens (%)"]
    rows = []
    for method in ("graft", "graft_peer_first", "graft_uniform"):
        for model in members:
            own, peer = [], []
            for seed in seeds:
                for row in read_metrics(results, method, pair_name, seed):
                    if row["model"] == model:
                        if row.get("clip_frac_own") is not None:
                            own.append(100 * row["clip_frac_own"])
                        if row.get("clip_frac_peer") is not None:
                            peer.append(100 * row["clip_frac_peer"])
            rows.append(
                [
                    PRESETS[method].label,
                    model,
                    statistics.fmean(own) if own else None,
                    statistics.fmean(peer) if peer else None,
                ]
            )
    return Table(
        "table_clipping", f"Clipped-token fractions by peer minibatch position ({pair_name}, appendix H)", header, rows
    )
