"""The paper's tables from the collected results (Table 1, Table 2, stored trajectories, checkpoint selection,
clipped-token fractions), with the paper's numbers beside ours."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from graft.config import WorkflowSpec
from graft.methods import PRESETS
from graft.report.load import Results, load
from graft.report.paper import GPU_HOURS_PAIR1, paper_average, paper_table4
from graft.report.stats import (
    SeedAggregate,
    aggregate,
    on_common_seeds,
    paired_bootstrap,
    with_reevaluated_samples,
    with_reevaluations,
)
from graft.report.table import Table
from graft.results import replay_cell
from graft.scores import AVERAGE, PASS_K, RUN, VALIDATION, checkpoint_scores, mean_pass_at_k, select


@dataclass
class ReportContext:
    """The loaded results and the config's view of them (models, pairs, benchmarks, selection rule)."""

    results: Results
    models: list[str]
    pairs: dict[str, list[str]]
    paper_models: dict[str, str]
    benchmarks: list[str]
    rule: str = "test_best"
    workflow: WorkflowSpec = field(default_factory=lambda: WorkflowSpec(pair_methods=["graft"], main_seeds=[0]))
    """The config's workflow: which co-training methods ran (transfer table) and which seeds each cell trained
    (``WorkflowSpec.seeds_of``; the first is the paper's "first run" of Table 1)."""
    selection_runs: int = 0
    """eval.selection_runs: re-evaluations of each selected checkpoint (0: scored by the selecting run)."""
    groups: dict[str, list[str]] = field(default_factory=dict)
    """Groups of three or more models co-trained in one cell."""
    checkpoints: pd.DataFrame = field(init=False)
    samples: pd.DataFrame = field(init=False)
    """Per-sample grades, re-evaluated checkpoints' from their re-evaluation runs (the bootstrap reads these)."""
    _selected: dict[str, pd.DataFrame] = field(init=False, default_factory=dict)

    def __post_init__(self):
        # selection reads the checkpoint evaluations; scores of what it selects come from the re-evaluations
        self.checkpoints = checkpoint_scores(self.results.scores)
        self.samples = with_reevaluated_samples(self.results.samples, self.results.reeval_samples)

    @classmethod
    def from_results(cls, results: Path, *args, **kwargs) -> ReportContext:
        return cls(load(results), *args, **kwargs)

    def selected(self, rule: str | None = None) -> pd.DataFrame:
        """The kept checkpoint of every run under ``rule`` (the config's rule by default)."""
        rule = rule or self.rule
        if rule not in self._selected:
            self._selected[rule] = with_reevaluations(select(self.checkpoints, rule), self.results.reeval_scores)
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
        return paired_bootstrap(self.samples, a.selected, b.selected)

    def protocol(self) -> str:
        """How a table's scores were obtained, for its caption: the selection rule and the evaluation runs."""
        names = {"test_best": "best test average", "val_best": "best validation score", "final": "final"}
        chosen = f"checkpoint: {names.get(self.rule, self.rule)} (report.selection: {self.rule})"
        if self.selection_runs:
            return f"{chosen}, scored by the mean of {self.selection_runs} re-evaluations with fresh seeds"
        return f"{chosen}, scored by the evaluation that selected it (eval.selection_runs: 0, biased upward)"

    def seed_plan(self) -> str:
        """Which cells train which seeds (workflow.main_seeds, other_seeds, method_seeds, cell_seeds), the later
        entries overriding the earlier."""
        w = self.workflow
        main, other = list(w.main_seeds), list(w.other_seeds)
        plan = f"every cell seeds {main}" if main == other else f"GRPO n=8 and GRAFT seeds {main}, other cells {other}"
        plan += "".join(f"; {method} seeds {list(seeds)}" for method, seeds in w.method_seeds.items())
        return plan + "".join(f"; cells of {cell} seeds {list(seeds)}" for cell, seeds in w.cell_seeds.items())

    def seed_note(self) -> str:
        """Which cells average which seeds, for captions of tables that set them side by side."""
        w = self.workflow
        lists = (w.main_seeds, w.other_seeds, *w.method_seeds.values(), *w.cell_seeds.values())
        counts = {len(seeds) for seeds in lists}
        if len(counts) == 1:
            return f"each cell averages its seeds ({self.seed_plan()})"
        return f"each cell averages its seeds ({self.seed_plan()}): means of {sorted(counts)} seeds stand side by side"

    def first_seed(self, method: str, cell: str, model: str) -> int:
        """The seed of a cell's first training run (the first of the seeds the workflow trains it with): the
        paper's Table 1 run, and the run that the figures draw."""
        return self.workflow.seeds_of(method, cell, tuple(self.pairs.get(cell, [model])))[0]

    def first_run(self, method: str, cell: str, model: str, column: str = AVERAGE) -> SeedAggregate:
        """One cell's first training run (``first_seed``) at its selected checkpoint, as the paper's Table 1 shows
        it; empty when that run has no evaluation."""
        agg = self.cell(method, cell, model, column)
        return SeedAggregate(agg.selected[agg.selected.seed == self.first_seed(method, cell, model)], column)

    def ablation_pair(self) -> tuple[str, list[str]]:
        """The pair the workflow trained the ablations on (``WorkflowSpec.ablations_pair``), with its members: the
        paper's Pair 1, which Table 2, the clipping and cost tables, the findings and Figure 3a read."""
        pair = self.workflow.ablations_pair(self.pairs)
        return pair, self.pairs[pair]

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


def _pm_runs(cell: SeedAggregate) -> str | None:
    """mean ± std over the evaluation runs of one training run's selected checkpoint (no ± for one run)."""
    if cell.mean is None:
        return None
    std_column = f"{cell.column}_std"
    std = cell.selected[std_column].iloc[0] if std_column in cell.selected else float("nan")
    return f"{cell.mean:.2f}" + (f" ± {std:.2f}" if std == std else "")


def table1(ctx: ReportContext) -> Table:
    """Table 1 as the paper builds it: each cell's first training run, its selected checkpoint, the mean (± std)
    of that checkpoint's evaluation runs; the paper's first-run values beside ours."""
    header = ["updated", "peer", "method", *ctx.benchmarks, "avg", "Δ vs GRPO n=8", "Δ 95% CI", "paper avg", "paper Δ"]
    rows = []
    for model in ctx.models:
        base = ctx.first_run("grpo_n8", model, model)
        paper_base = paper_average(ctx.paper(model), "grpo_n8")
        blocks = [(None, [(m, model) for m in ("grpo_n8", "grpo_n16", "grpo_n32")])]
        for peer, pair in ctx.peers(model):
            blocks.append(
                (peer, [("hacpo", pair), ("sgt", pair), ("graft", pair), ("replay", replay_cell(model, peer))])
            )
        for peer, entries in blocks:
            for method, cell_name in entries:
                cell = ctx.first_run(method, cell_name, model)
                per_bench = [ctx.first_run(method, cell_name, model, b).mean for b in ctx.benchmarks]
                paper_value = paper_average(ctx.paper(model), method, ctx.paper(peer) if peer else None)
                own = method == "grpo_n8"
                rows.append(
                    [
                        model,
                        peer or "",
                        PRESETS[method].label,
                        *per_bench,
                        _pm_runs(cell),
                        None if own else _delta(cell.mean, base.mean),
                        None if own else ctx.bootstrap(cell, base),
                        paper_value,
                        None if own else _delta(paper_value, paper_base),
                    ]
                )
    caption = (
        "Table 1: five-benchmark pass@1 (%) by updated model and peer, the first training run (first seed) of every "
        f"cell ({ctx.seed_plan()}), as the paper's main table; ± is the std over evaluation runs; {ctx.protocol()}; "
        "the paper's first-run values beside ours"
    )
    return Table.from_rows("table1", caption, header, rows)


def table4(ctx: ReportContext) -> Table:
    """Table 4 as the paper builds it: GRPO n=8 and GRAFT over their seeds, each run scored by the mean of its
    selected checkpoint's evaluation runs; mean and sample std over runs, the paper's Table 4 beside ours."""
    header = ["pair", "updated", "method", "runs", *ctx.benchmarks, "avg", "Δ vs GRPO n=8", "paper avg", "paper Δ"]
    rows = []
    for pair, members in ctx.pairs.items():
        for model in members:
            peer = next(m for m in members if m != model)
            base = ctx.cell("grpo_n8", model, model)
            paper_base = paper_table4(ctx.paper(model), "grpo_n8")
            for method, cell_name in (("grpo_n8", model), ("graft", pair)):
                cell = ctx.cell(method, cell_name, model)
                paper = paper_table4(ctx.paper(model), method, ctx.paper(peer))
                own = method == "grpo_n8"
                rows.append(
                    [
                        pair,
                        model,
                        PRESETS[method].label,
                        len(cell.selected),
                        *[_pm(ctx.cell(method, cell_name, model, b)) for b in ctx.benchmarks],
                        _pm(cell),
                        None if own else _delta(cell.mean, base.mean),
                        None if paper is None else f"{paper[0]:.2f} ± {paper[1]:.2f}",
                        None if own or paper is None or paper_base is None else paper[0] - paper_base[0],
                    ]
                )
    caption = (
        f"Table 4: training stability over each cell's training runs ({ctx.seed_plan()}): mean ± sample std over runs, "
        f"each run the mean of its evaluation runs; {ctx.protocol()}; the paper's Table 4 beside ours"
    )
    return Table.from_rows("table4", caption, header, rows)


def table_passk(ctx: ReportContext) -> Table:
    """Unbiased pass@k (k = 1, 2, 4, 8 up to the samples per problem) of every evaluated cell at its selected
    checkpoints, averaged over benchmarks, then over the cell's seeds."""
    keys = [*RUN, "step"]
    rows_in = ctx.samples.merge(ctx.selected()[keys], on=keys)
    rows_in = rows_in[rows_in.benchmark != VALIDATION]
    grades = rows_in.groupby([*keys, "benchmark", "problem"])["correct"].agg(list)
    n = min((len(g) for g in grades), default=0)
    ks = tuple(k for k in PASS_K if k <= max(n, 1))  # pass@1 stays a column, empty, before any evaluation
    per_benchmark = grades.groupby(level=[*keys, "benchmark"]).agg(lambda g: mean_pass_at_k(list(g), ks))
    columns = [f"pass@{k}" for k in ks]
    scores = pd.DataFrame(
        [[100.0 * passk[str(k)] for k in ks] for passk in per_benchmark], index=per_benchmark.index, columns=columns
    )
    per_run = scores.groupby(level=keys).mean().reset_index()
    header = ["method", "cell", "model", "seeds", *columns]
    rows = []
    for (method, cell, model), group in per_run.groupby(["method", "cell", "model"], sort=True):
        rows.append([method, cell, model, len(group), *[float(group[c].mean()) for c in columns]])
    samples = f"the {n} samples per problem" if n else "the samples per problem (no checkpoint evaluated yet)"
    caption = f"Unbiased pass@k (%) from {samples}, mean over benchmarks then seeds; {ctx.protocol()}"
    return Table.from_rows("table_passk", caption, header, rows)


ABLATION_ROWS = [name for name, p in PRESETS.items() if p.table in ("2a", "2b", "F")]


def table2(ctx: ReportContext) -> Table:
    pair_name, members = ctx.ablation_pair()
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
    caption = (
        f"Table 2: ablations and alternative designs on {pair_name}; Δ vs full GRAFT; {ctx.seed_note()}; "
        f"{ctx.protocol()}"
    )
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
    caption = f"Stored peer trajectories (archive replay) vs online co-training; {ctx.seed_note()}; {ctx.protocol()}"
    return Table.from_rows("table_stored", caption, header, rows)


def table_selection(ctx: ReportContext) -> Table:
    header = ["method", "cell", "model", "best on test (paper rule)", "best on validation", "final", "test - val"]
    rows = []
    for method, cell_name, model in ctx.run_cells():
        values = [ctx.cell(method, cell_name, model, rule=rule).mean for rule in ("test_best", "val_best", "final")]
        rows.append([method, cell_name, model, *values, _delta(values[0], values[1])])
    caption = (
        "Checkpoint selection: how much picking the best test checkpoint inflates scores (mean over each cell's "
        "seeds; a re-evaluated checkpoint is scored by its re-evaluations)"
    )
    return Table.from_rows("table_selection", caption, header, rows)


def table_clipping(ctx: ReportContext, seeds: list[int]) -> Table:
    pair_name, members = ctx.ablation_pair()
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


def table_groups(ctx: ReportContext, seeds: list[int]) -> Table:
    """One line per model of every group cell: its score beside GRPO n=8's and its best pair's, and how many of its
    all-fail prompts it took from each peer over a run (mean over seeds)."""
    header = ["method", "group", "model", "seeds", "score", "GRPO n=8", "best pair", "taken from each peer"]
    rows = []
    for method in ctx.workflow.group_methods:
        for group, members in ctx.groups.items():
            for model in members:
                mine = ctx.metrics(method, group, seeds, model)
                runs = mine.seed.nunique()
                if not runs:
                    continue
                pairs = [(p, ctx.cell(method, p, model).mean) for p, m in ctx.pairs.items() if model in m]
                pairs = [(p, score) for p, score in pairs if score is not None]
                best = max(pairs, key=lambda pair: pair[1], default=None)
                taken = ", ".join(
                    f"{peer} {mine[f'received_from_{peer}'].sum() / runs:.1f}"
                    for peer in members
                    if peer != model and f"received_from_{peer}" in mine
                )
                rows.append(
                    [
                        PRESETS[method].label if method in PRESETS else method,
                        group,
                        model,
                        runs,
                        _pm(ctx.cell(method, group, model)),
                        _pm(ctx.cell("grpo_n8", model, model)),
                        None if best is None else f"{best[1]:.2f} ({best[0]})",
                        taken,
                    ]
                )
    caption = (
        "Groups of models: each model's score (mean ± std over seeds) beside GRPO n=8's and its best pair's "
        f"(by the same {ctx.protocol()}), and the all-fail prompts it took from each peer over a run"
    )
    return Table.from_rows("table_groups", caption, header, rows)


def _percent(part: float, whole: float) -> float | None:
    return 100.0 * part / whole if whole else None


# (finding, method and cell kind, baseline and cell kind): "pair", "model" or "replay" cells of the ablation pair
FINDINGS = (
    ("GRAFT above GRPO n=8", ("graft", "pair"), ("grpo_n8", "model")),
    ("stored trajectories above GRPO n=8", ("replay", "replay"), ("grpo_n8", "model")),
    ("w/o compatibility gate below GRAFT", ("graft_no_gate", "pair"), ("graft", "pair")),
    ("success-only below GRAFT", ("graft_success_only", "pair"), ("graft", "pair")),
    ("HACPO below GRAFT", ("hacpo", "pair"), ("graft", "pair")),
    ("SGT below GRAFT", ("sgt", "pair"), ("graft", "pair")),
    ("GRAFT against GRPO n=32", ("graft", "pair"), ("grpo_n32", "model")),
)


def table_findings(ctx: ReportContext) -> Table:
    """The paper's claims on the ablation pair (the paper's Pair 1), each as ours (difference, interval) beside
    the paper's difference, and whether the two point the same way; an interval that holds 0 does not count as
    agreeing. Each difference is over the seeds both of its cells ran (``on_common_seeds``)."""
    pair, members = ctx.ablation_pair()
    header = ["finding", "model", "ours Δ", "Δ 95% CI", "paper Δ", "same direction"]
    rows = []
    for finding, (method, kind), (base_method, base_kind) in FINDINGS:
        for model in members:
            peer = next(m for m in members if m != model)
            cells = {"pair": pair, "model": model, "replay": replay_cell(model, peer)}
            ours, base = on_common_seeds(
                ctx.cell(method, cells[kind], model), ctx.cell(base_method, cells[base_kind], model)
            )
            paper_delta = _delta(
                paper_average(ctx.paper(model), method, ctx.paper(peer)),
                paper_average(ctx.paper(model), base_method, ctx.paper(peer)),
            )
            delta = _delta(ours.mean, base.mean)
            ci = ctx.bootstrap(ours, base) if delta is not None else None
            rows.append([finding, model, delta, ci, paper_delta, _agrees(ci, paper_delta)])
    caption = (
        f"The paper's findings on {pair}: our difference and interval beside the paper's, each over the seeds that "
        f"both of its cells ran ({ctx.seed_plan()}); {ctx.protocol()}"
    )
    return Table.from_rows("table_findings", caption, header, rows)


def _agrees(ci: tuple[float, float] | None, paper_delta: float | None) -> str | None:
    if ci is None or paper_delta is None:
        return None
    if ci[0] > 0 or ci[1] < 0:
        return "yes" if (ci[0] > 0) == (paper_delta > 0) else "no (opposite)"
    return "no (interval holds 0)"


def cost_to(rows: pd.DataFrame, step: int) -> float:
    """Hours spent on training steps before ``step`` (GPU-hours when the job had GPUs, else wall hours); a
    co-training step is one job for both models, so each step counts once."""
    steps = rows[rows.step < step].drop_duplicates("step")
    gpu = float(steps.get("gpu_hours", pd.Series(dtype=float)).fillna(0).sum())
    wall = float(steps.get("step_time_s", pd.Series(dtype=float)).fillna(0).sum()) / 3600
    return gpu if gpu > 0 else wall


COST_ROWS = ("grpo_n8", "grpo_n16", "grpo_n32", "grpo_n8_ds", "hacpo", "sgt", "graft", "replay")


def table_cost(ctx: ReportContext) -> Table:
    """The paper's Table 5 on the ablation pair (the paper's Pair 1): each model's score and the hours to its
    selected checkpoint and to the end of the run, both models' cost (the later checkpoint of a joint run; the sum
    of two single-model runs), and the responses sampled, beside the paper's both-model cost. First training runs;
    hours are GPU-hours where the jobs had GPUs, else wall hours."""
    pair, (a, b) = ctx.ablation_pair()
    header = ["method"]
    for model in (a, b):
        header += [f"{model} avg", f"{model} h to ckpt", f"{model} h full"]
    header += ["both h to ckpts", "both h full", "responses sampled", "paper both GPU-h to ckpts"]
    rows = []
    for method in COST_ROWS:
        joint = PRESETS[method].method.peer == "live"
        cells = {m: pair if joint else (replay_cell(m, p) if method == "replay" else m) for m, p in ((a, b), (b, a))}
        row: list[object] = [PRESETS[method].label]
        steps, runs = {}, {}
        for model in (a, b):
            cell = ctx.first_run(method, cells[model], model)
            metrics = ctx.metrics(method, cells[model], [ctx.first_seed(method, cells[model], model)])
            if cell.mean is None or metrics.empty:
                row += [None, None, None]
                continue
            step = int(cell.selected["step"].iloc[0])
            steps[model], runs[model] = step, metrics
            row += [cell.mean, cost_to(metrics, step), cost_to(metrics, int(metrics.step.max()) + 1)]
        if len(steps) == 2:
            if joint:
                both = cost_to(runs[a], max(steps.values()))
                full = cost_to(runs[a], int(runs[a].step.max()) + 1)
                sampled = runs[a]["rollouts"].sum() if "rollouts" in runs[a] else None
            else:
                both = sum(cost_to(runs[m], steps[m]) for m in (a, b))
                full = sum(cost_to(runs[m], int(runs[m].step.max()) + 1) for m in (a, b))
                has = all("rollouts" in runs[m] for m in (a, b))
                sampled = sum(runs[m]["rollouts"].sum() for m in (a, b)) if has else None
            row += [both, full, None if sampled is None else float(sampled)]
        else:
            row += [None, None, None]
        rows.append([*row, GPU_HOURS_PAIR1.get(method)])
    caption = (
        f"Table 5: score and training cost on {pair}, first training runs; {ctx.protocol()}; hours are GPU-hours "
        "where the jobs had GPUs, else wall hours; the paper's both-model GPU-hours beside ours"
    )
    return Table.from_rows("table_cost", caption, header, rows)
