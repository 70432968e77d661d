"""Results read back from a results tree as tidy pandas DataFrames.

- ``samples``: one row per graded evaluation sample: method, cell, seed, model, step, benchmark, problem, sample,
  correct (the validation set is the benchmark named ``validation``).
- ``scores``: one row per checkpoint and benchmark: the pass@1 (%) the evaluation recorded, and the average over
  the test benchmarks (benchmark ``average``).
- ``metrics``: one row per training step and model of every training cell, with its method, cell and seed.

A cell with no results is simply absent; the tables show it as missing, never as zero.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from graft.results import ResultsTree

RUN = ["method", "cell", "seed", "model"]
"""The columns that name one model's evaluations in one training run."""
VALIDATION = "validation"
AVERAGE = "average"


@dataclass(frozen=True)
class Results:
    samples: pd.DataFrame
    scores: pd.DataFrame
    metrics: pd.DataFrame


def _sets(data: dict) -> dict[str, dict]:
    sets = dict(data["benchmarks"])
    if VALIDATION in data:
        sets[VALIDATION] = data[VALIDATION]
    return sets


def load_evaluations(results: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(samples, scores) of every evaluation JSON under ``results/eval``."""
    samples: dict[str, list] = {c: [] for c in [*RUN, "step", "benchmark", "problem", "sample", "correct"]}
    scores: dict[str, list] = {c: [] for c in [*RUN, "step", "benchmark", "score"]}
    for method, cell, seed, model, path in ResultsTree(results).eval_files():
        data = json.loads(path.read_text())
        key = (method, cell, seed, model, int(data["step"]))
        entries = [(name, s["pass@1"]) for name, s in _sets(data).items()] + [(AVERAGE, data["average"])]
        for name, value in entries:
            for column, v in zip(scores, (*key, name, 100.0 * value), strict=True):
                scores[column].append(v)
        for name, s in _sets(data).items():
            for problem, values in s.get("per_problem", {}).items():
                for i, correct in enumerate(values):
                    for column, v in zip(samples, (*key, name, problem, i, int(correct)), strict=True):
                        samples[column].append(v)
    return pd.DataFrame(samples), pd.DataFrame(scores)


def load_metrics(results: Path) -> pd.DataFrame:
    """Every training cell's metric rows, with method, cell and seed columns in front."""
    frames = []
    for method, cell, seed, path in ResultsTree(results).metrics_files():
        rows = [json.loads(line) for line in path.read_text().splitlines() if line]
        if rows:
            frames.append(pd.DataFrame(rows).assign(method=method, cell=cell, seed=seed))
    if not frames:
        return pd.DataFrame(columns=["method", "cell", "seed", "step", "model"])
    return pd.concat(frames, ignore_index=True)


def load(results: Path) -> Results:
    samples, scores = load_evaluations(results)
    return Results(samples, scores, load_metrics(results))
