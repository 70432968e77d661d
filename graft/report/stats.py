"""Statistics of the report: checkpoint selection, means over seeds, and the paired bootstrap over problems."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from graft.scores import AVERAGE, RUN, VALIDATION


@dataclass
class SeedAggregate:
    """A table cell: one method x cell x model over its seeds, at the selected checkpoints."""

    selected: pd.DataFrame
    """The selected checkpoint of each seed (its rows of ``select``)."""
    column: str = AVERAGE

    @property
    def values(self) -> list[float]:
        if self.column not in self.selected:
            return [float("nan")] * len(self.selected)
        return self.selected[self.column].astype(float).tolist()

    @property
    def mean(self) -> float | None:
        return float(np.mean(self.values)) if len(self.selected) else None

    @property
    def std(self) -> float | None:
        return float(np.std(self.values, ddof=1)) if len(self.selected) > 1 else None


def on_common_seeds(a: SeedAggregate, b: SeedAggregate) -> tuple[SeedAggregate, SeedAggregate]:
    """Two cells cut to the RL seeds both ran, so that a difference of their means pairs the same runs (same prompt
    order and sampling seed) instead of setting one run against another cell's mean over three."""
    common = set(a.selected.seed) & set(b.selected.seed)
    cut = [SeedAggregate(x.selected[x.selected.seed.isin(common)], x.column) for x in (a, b)]
    return cut[0], cut[1]


def aggregate(selected: pd.DataFrame, method: str, cell: str, model: str, column: str = AVERAGE) -> SeedAggregate:
    rows = selected[(selected.method == method) & (selected.cell == cell) & (selected.model == model)]
    return SeedAggregate(rows.sort_values("seed"), column)


def _problem_rates(samples: pd.DataFrame, selected: pd.DataFrame) -> pd.Series:
    """Per (benchmark, problem): pass rate over samples, averaged over the selected seeds; only problems that
    every seed evaluated."""
    keys = selected[[*RUN, "step"]]
    rows = samples.merge(keys, on=[*RUN, "step"])
    rows = rows[rows.benchmark != VALIDATION]
    by_seed = rows.groupby(["seed", "benchmark", "problem"])["correct"].mean()
    per_problem = by_seed.groupby(["benchmark", "problem"]).agg(["mean", "count"])
    return per_problem.loc[per_problem["count"] == len(keys), "mean"]


def paired_bootstrap(
    samples: pd.DataFrame, a: pd.DataFrame, b: pd.DataFrame, resamples: int = 2000, seed: int = 0
) -> tuple[float, float] | None:
    """95% interval of mean(a) - mean(b) in average score (points), resampling problems within each benchmark.

    ``a``, ``b``: the selected checkpoints of two cells (rows of ``select``). Per-problem pass rates are averaged
    over each side's seeds and the difference is paired by problem; each resample draws every benchmark's
    problems with replacement, averages within benchmarks, then over benchmarks (as the score does).
    """
    if a.empty or b.empty:
        return None
    diffs = 100.0 * (_problem_rates(samples, a) - _problem_rates(samples, b)).dropna()
    if diffs.empty:
        return None
    rng = np.random.default_rng(seed)
    per_benchmark = []
    for _, values in diffs.groupby(level="benchmark"):
        v = values.to_numpy()
        per_benchmark.append(v[rng.integers(0, len(v), size=(resamples, len(v)))].mean(axis=1))
    stats = np.sort(np.mean(per_benchmark, axis=0))
    return float(stats[int(0.025 * resamples)]), float(stats[int(0.975 * resamples) - 1])


def with_reevaluations(selected: pd.DataFrame, reeval_scores: pd.DataFrame) -> pd.DataFrame:
    """The selected checkpoints, each re-evaluated one (``eval.selection_runs``) scored by the mean over its
    re-evaluation runs instead of by the run that selected it, with ``eval_runs`` (1 where not re-evaluated) and
    ``<benchmark>_std`` (the sample std over runs, where there are two or more) beside every score column."""
    out = selected.copy()
    out["eval_runs"] = 1
    if reeval_scores.empty or out.empty:
        return out
    keys = [*RUN, "step"]
    wide = reeval_scores.pivot_table(index=[*keys, "run"], columns="benchmark", values="score").reset_index()
    grouped = wide.drop(columns="run").groupby(keys)
    means, stds, runs = grouped.mean(), grouped.std(ddof=1), grouped.size()
    index = out.set_index(keys).index
    hit = index.isin(means.index)
    for column in means.columns:
        if column not in out:
            out[column] = float("nan")
        out.loc[hit, column] = means.loc[index[hit], column].to_numpy()
        out[f"{column}_std"] = float("nan")
        out.loc[hit, f"{column}_std"] = stds.loc[index[hit], column].to_numpy()
    out.loc[hit, "eval_runs"] = runs.loc[index[hit]].to_numpy()
    return out


def with_reevaluated_samples(samples: pd.DataFrame, reeval_samples: pd.DataFrame) -> pd.DataFrame:
    """Per-sample grades in which a re-evaluated checkpoint's samples are those of its re-evaluation runs (all of
    them), not of the run that selected it; every other checkpoint keeps its own."""
    if reeval_samples.empty:
        return samples
    keys = [*RUN, "step"]
    again = pd.MultiIndex.from_frame(reeval_samples[keys].drop_duplicates())
    keep = ~pd.MultiIndex.from_frame(samples[keys]).isin(again)
    return pd.concat([samples[keep], reeval_samples], ignore_index=True)
