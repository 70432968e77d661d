"""Tables and figures from a results tree (DESIGN.md section 6), with the paper's numbers beside ours.

Reads only files: ``eval/<method>/<cell>/seed<S>/<model>/step_NNNNN.json`` (one per checkpoint, from
``graft evaluate``) and ``runs/<method>/<cell>/seed<S>/metrics.jsonl`` (from ``graft train``). A cell with no
results shows as missing ("—" in Markdown and LaTeX, empty in CSV), never as zero.
"""

from __future__ import annotations

import csv
import io
import json
import math
import random
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from graft.methods import PRESETS
from graft.paper import paper_average

MISSING = "—"


@dataclass
class EvalPoint:
    step: int
    average: float
    benchmarks: dict[str, float]
    validation: float | None
    per_problem: dict[str, dict[str, float]]
    """benchmark -> problem id -> mean correctness over the k samples."""


@dataclass
class Run:
    """One model's evaluations in one training run (method x cell x seed)."""

    method: str
    cell: str
    seed: int
    model: str
    points: dict[int, EvalPoint] = field(default_factory=dict)

    def select(self, rule: str) -> EvalPoint | None:
        """The paper's rule (best test average), the validation-selected or the final checkpoint."""
        if not self.points:
            return None
        if rule == "test_best":
            return max(self.points.values(), key=lambda p: (p.average, -p.step))
        if rule == "val_best":
            scored = [p for p in self.points.values() if p.validation is not None]
            return max(scored, key=lambda p: (p.validation, -p.step)) if scored else None
        if rule == "final":
            return self.points[max(self.points)]
        raise ValueError(f"unknown selection rule {rule!r}; rules: test_best, val_best, final")


def _load_point(path: Path) -> EvalPoint:
    data = json.loads(path.read_text())
    return EvalPoint(
        step=int(data["step"]),
        average=100.0 * data["average"],
        benchmarks={name: 100.0 * b["pass@1"] for name, b in data["benchmarks"].items()},
        validation=100.0 * data["validation"]["pass@1"] if "validation" in data else None,
        per_problem={
            name: {pid: sum(v) / len(v) for pid, v in b["per_problem"].items()}
            for name, b in data["benchmarks"].items()
        },
    )


def collect(results: Path) -> dict[tuple[str, str, int, str], Run]:
    """Every run with at least one evaluated checkpoint, keyed by (method, cell, seed, model)."""
    runs: dict[tuple[str, str, int, str], Run] = {}
    for path in sorted((results / "eval").glob("*/*/seed*/*/step_*.json")):
        model, seed_dir, cell, method = (
            path.parent.name,
            path.parents[1].name,
            path.parents[2].name,
            path.parents[3].name,
        )
        key = (method, cell, int(seed_dir.removeprefix("seed")), model)
        run = runs.setdefault(key, Run(method, cell, key[2], model))
        point = _load_point(path)
        run.points[point.step] = point
    return runs


@dataclass
class Cell:
    """A table cell aggregated over seeds: mean, std and the selected points."""

    values: list[float]
    points: list[EvalPoint]

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.values) if self.values else None

    @property
    def std(self) -> float | None:
        return statistics.stdev(self.values) if len(self.values) > 1 else None


def aggregate(runs, method: str, cell: str, model: str, rule: str, benchmark: str | None = None) -> Cell:
    values, points = [], []
    for (m, c, _seed, mod), run in sorted(runs.items()):
        if (m, c, mod) != (method, cell, model):
            continue
        point = run.select(rule)
        if point is None:
            continue
        points.append(point)
        values.append(point.average if benchmark is None else point.benchmarks.get(benchmark, math.nan))
    return Cell(values, points)


def paired_bootstrap(a: list[EvalPoint], b: list[EvalPoint], resamples: int = 2000, seed: int = 0):
    """95% interval of mean(a) - mean(b) in average score, resampling problems within each benchmark.

    Per-problem pass rates are averaged over each side's seeds; the difference is paired by problem.
    """
    if not a or not b:
        return None
    benchmarks = sorted(set(a[0].per_problem) & set(b[0].per_problem))
    if not benchmarks:
        return None
    diffs = {}
    for name in benchmarks:
        ids = sorted(set.intersection(*(set(p.per_problem[name]) for p in a + b)))
        diffs[name] = [
            100.0
            * (
                statistics.fmean(p.per_problem[name][i] for p in a)
                - statistics.fmean(p.per_problem[name][i] for p in b)
            )
            for i in ids
        ]
    rng = random.Random(seed)
    stats = []
    for _ in range(resamples):
        per_bench = []
        for values in diffs.values():
            if values:
                per_bench.append(statistics.fmean(rng.choice(values) for _ in values))
        stats.append(statistics.fmean(per_bench))
    stats.sort()
    return stats[int(0.025 * resamples)], stats[int(0.975 * resamples) - 1]


# ----- tables -----


@dataclass
class Table:
    name: str
    caption: str
    header: list[str]
    rows: list[list[object]]

    def cells(self) -> list[list[str]]:
        return [[_fmt(v) for v in row] for row in self.rows]

    def markdown(self) -> str:
        lines = [f"**{self.caption}**", "", "| " + " | ".join(self.header) + " |", "|" + "---|" * len(self.header)]
        lines += ["| " + " | ".join(row) + " |" for row in self.cells()]
        return "\n".join(lines) + "\n"

    def csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(self.header)
        for row in self.rows:
            writer.writerow(["" if v is None else f"{v:.4f}" if isinstance(v, float) else _fmt(v) for v in row])
        return out.getvalue()

    def latex(self) -> str:
        esc = lambda s: s.replace("_", r"\_").replace("%", r"\%").replace("±", r"$\pm$")  # noqa: E731
        lines = [
            r"\begin{table}[t]",
            r"\centering",
            r"\caption{" + esc(self.caption) + "}",
            r"\begin{tabular}{" + "l" + "r" * (len(self.header) - 1) + "}",
            r"\toprule",
            " & ".join(esc(h) for h in self.header) + r" \\",
            r"\midrule",
        ]
        lines += [" & ".join(esc(c) for c in row) + r" \\" for row in self.cells()]
        lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
        return "\n".join(lines) + "\n"

    def write(self, directory: Path) -> list[Path]:
        directory.mkdir(parents=True, exist_ok=True)
        paths = []
        for suffix, text in ((".md", self.markdown()), (".csv", self.csv()), (".tex", self.latex())):
            path = directory / f"{self.name}{suffix}"
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(text)
            tmp.replace(path)
            paths.append(path)
        return paths


def _fmt(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, tuple) and len(value) == 2:
        return f"[{value[0]:+.2f}, {value[1]:+.2f}]"
    return str(value)


def _pm(cell: Cell) -> str | None:
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
            blocks.append((peer, [("hacpo", pair), ("sgt", pair), ("graft", pair), ("replay", f"{model}_from_{peer}")]))
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


def table2(ctx: ReportContext) -> Table | None:
    if not ctx.pairs:
        return None
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
            stored = aggregate(ctx.runs, "replay", f"{model}_from_{peer}", model, ctx.rule)
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


def read_metrics(results: Path, method: str, cell: str, seed: int) -> list[dict]:
    path = results / "runs" / method / cell / f"seed{seed}" / "metrics.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def table_clipping(ctx: ReportContext, results: Path, seeds: list[int]) -> Table | None:
    if not ctx.pairs:
        return None
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
