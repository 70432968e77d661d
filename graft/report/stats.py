"""Statistics over seeds and problems: a table cell's mean and std over seeds, and the paired bootstrap."""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass

from graft.report.load import EvalPoint


@dataclass
class SeedAggregate:
    """A table cell aggregated over seeds: mean, std and the selected points."""

    values: list[float]
    points: list[EvalPoint]

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.values) if self.values else None

    @property
    def std(self) -> float | None:
        return statistics.stdev(self.values) if len(self.values) > 1 else None


def aggregate(runs, method: str, cell: str, model: str, rule: str, benchmark: str | None = None) -> SeedAggregate:
    values, points = [], []
    for (m, c, _seed, mod), run in sorted(runs.items()):
        if (m, c, mod) != (method, cell, model):
            continue
        point = run.select(rule)
        if point is None:
            continue
        points.append(point)
        values.append(point.average if benchmark is None else point.benchmarks.get(benchmark, math.nan))
    return SeedAggregate(values, points)


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
