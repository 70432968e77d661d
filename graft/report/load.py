"""Results read back from a results tree as tidy pandas DataFrames.

- ``samples``: one row per graded evaluation sample: method, cell, seed, model, step, benchmark, problem, sample,
  correct (the validation set is the benchmark named ``validation``).
- ``scores``: one row per checkpoint and benchmark: the pass@1 (%) the evaluation recorded, and the average over
  the test benchmarks (benchmark ``average``).
- ``metrics``: one row per training step and model of every training cell, with its method, cell and seed.
- ``reeval_samples``, ``reeval_scores``: the same for the re-evaluations of selected checkpoints
  (``eval_selected/``, ``eval.selection_runs``); scores carry a ``run`` column, samples number their samples
  across runs (run r's sample i is r * k + i), so a problem's pass rate averages every run.

A cell with no results is simply absent; the tables show it as missing, never as zero.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from graft.results import ResultsTree
from graft.scores import RUN, evaluation_frames, typed_frame


@dataclass(frozen=True)
class Results:
    samples: pd.DataFrame
    scores: pd.DataFrame
    metrics: pd.DataFrame
    reeval_samples: pd.DataFrame = field(default_factory=lambda: typed_frame(columns=[*RUN, "step"]))
    reeval_scores: pd.DataFrame = field(default_factory=lambda: typed_frame(columns=[*RUN, "step", "run"]))

    def of_runs(self, runs: set[tuple[str, str, int]], models: set[str]) -> Results:
        """Only the training runs ``runs`` (method, cell, seed) and the base evaluations of ``models``: a report of
        some cells stays theirs when the tree holds more."""

        def keep(frame: pd.DataFrame) -> pd.DataFrame:
            if frame.empty:
                return frame
            planned = [(m, c, int(s)) in runs for m, c, s in zip(frame.method, frame.cell, frame.seed, strict=True)]
            base = (frame.method == "base") & frame.cell.isin(models)
            return frame[base | pd.Series(planned, index=frame.index)]

        return Results(
            *(keep(getattr(self, f)) for f in ("samples", "scores", "metrics", "reeval_samples", "reeval_scores"))
        )


def load_evaluations(results: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(samples, scores) of every evaluation JSON under ``results/eval``."""
    return evaluation_frames((*names, 0, path) for *names, path in ResultsTree(results).eval_files())


def load_reevaluations(results: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(samples, scores) of every re-evaluation of a selected checkpoint under ``results/eval_selected``."""
    return evaluation_frames(ResultsTree(results).selected_eval_files(), runs=True)


def load_metrics(results: Path) -> pd.DataFrame:
    """Every training cell's metric rows, with method, cell and seed columns in front."""
    frames = []
    for method, cell, seed, path in ResultsTree(results).metrics_files():
        rows = [json.loads(line) for line in path.read_text().splitlines() if line]
        if rows:
            frames.append(pd.DataFrame(rows).assign(method=method, cell=cell, seed=seed))
    if not frames:
        return typed_frame(columns=["method", "cell", "seed", "step", "model"])
    return pd.concat(frames, ignore_index=True)


def load(results: Path) -> Results:
    samples, scores = load_evaluations(results)
    reeval_samples, reeval_scores = load_reevaluations(results)
    return Results(samples, scores, load_metrics(results), reeval_samples, reeval_scores)
