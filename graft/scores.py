"""What an evaluation's scores mean, for the evaluation that writes them and the report that reads them.

- pass@k, unbiased, from n graded samples per problem (Chen et al. 2021, the estimator HumanEval introduced):
  pass@k = 1 - C(n - c, k) / C(n, k) for a problem with c correct of n samples, the chance that k of the n samples
  drawn without replacement hold at least one correct one. It is unbiased for the pass@k of k fresh samples, unlike
  1 - (1 - c/n)^k. pass@1 reduces to c / n, the paper's pass@1.
- The evaluation files of a run as tidy frames: samples (one row per graded sample) and scores (one row per
  checkpoint and benchmark, pass@1 in %, and the average over the test benchmarks).
- The rules that select a run's checkpoint from those scores (``RULES``), so that the re-evaluation of a selected
  checkpoint (graft.eval.reevaluate) and the report's tables pick the same one.
"""

from __future__ import annotations

import json
from math import comb

import pandas as pd

PASS_K = (1, 2, 4, 8)
"""The k reported wherever n allows (k <= n)."""


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem with ``c`` correct of ``n`` samples; needs 1 <= k <= n and 0 <= c <= n."""
    if not 1 <= k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n, got k={k}, n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n, got c={c}, n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def mean_pass_at_k(correct: list[list[int]], ks: tuple[int, ...] = PASS_K) -> dict[str, float]:
    """{"k": mean over problems of pass@k} for every k in ``ks`` that every problem's sample count allows;
    ``correct`` holds one list of 0/1 grades per problem."""
    if not correct:
        return {}
    n = min(len(row) for row in correct)
    return {str(k): sum(pass_at_k(len(row), sum(row), k) for row in correct) / len(correct) for k in ks if k <= n}


RUN = ["method", "cell", "seed", "model"]
"""The columns that name one model's evaluations in one training run."""
VALIDATION = "validation"
AVERAGE = "average"
COLUMN_TYPES = {
    **dict.fromkeys(("method", "cell", "model", "benchmark", "problem"), "str"),
    **dict.fromkeys(("seed", "step", "run", "sample", "correct"), "int64"),
    **dict.fromkeys(("score", AVERAGE), "float64"),
}
"""The type of each column of the frames below, so that an empty frame (a tree with no evaluations yet) joins and
compares as a full one does."""


def typed_frame(data: dict[str, list] | None = None, columns: list[str] | None = None) -> pd.DataFrame:
    """A frame of ``data`` (or of no rows in ``columns``) with the column types of ``COLUMN_TYPES``."""
    frame = pd.DataFrame(data, columns=columns)
    return frame.astype({c: COLUMN_TYPES[c] for c in frame.columns if c in COLUMN_TYPES})


def _sets(data: dict) -> dict[str, dict]:
    sets = dict(data["benchmarks"])
    if VALIDATION in data:
        sets[VALIDATION] = data[VALIDATION]
    return sets


SAMPLE_COLUMNS = [*RUN, "step", "benchmark", "problem", "sample", "correct"]


def evaluation_frames(files, runs: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(samples, scores) of evaluation JSONs; ``files`` yields (method, cell, seed, model, run, path). With
    ``runs`` (re-evaluations) scores get a ``run`` column and run r's sample i is numbered r * k + i."""
    samples: dict[str, list] = {c: [] for c in SAMPLE_COLUMNS}
    scores: dict[str, list] = {c: [] for c in [*RUN, "step", *(["run"] if runs else []), "benchmark", "score"]}
    for *names, run, path in files:
        data = json.loads(path.read_text())
        key = (*names, int(data["step"]))
        extra = (run,) if runs else ()
        entries = [(name, s["pass@1"]) for name, s in _sets(data).items()] + [(AVERAGE, data["average"])]
        for name, value in entries:
            for column, v in zip(scores, (*key, *extra, name, 100.0 * value), strict=True):
                scores[column].append(v)
        offset = run * int(data.get("k", 0)) if runs else 0
        for name, s in _sets(data).items():
            for problem, values in s.get("per_problem", {}).items():
                for i, correct in enumerate(values):
                    for column, v in zip(samples, (*key, name, problem, offset + i, int(correct)), strict=True):
                        samples[column].append(v)
    return typed_frame(samples), typed_frame(scores)


RULES = ("test_best", "val_best", "final")
"""test_best: the paper's rule (best average on the test benchmarks); val_best: best on the validation set;
final: the last checkpoint. Ties go to the earlier checkpoint."""


def checkpoint_scores(scores: pd.DataFrame) -> pd.DataFrame:
    """One row per evaluated checkpoint (method, cell, seed, model, step), one column per benchmark."""
    if scores.empty:
        return typed_frame(columns=[*RUN, "step", AVERAGE])
    wide = scores.pivot(index=[*RUN, "step"], columns="benchmark", values="score")
    return wide.rename_axis(columns=None).reset_index()


def select(checkpoints: pd.DataFrame, rule: str) -> pd.DataFrame:
    """The checkpoint each run keeps under ``rule``: one row per (method, cell, seed, model)."""
    if rule == "test_best":
        ordered = checkpoints.sort_values([AVERAGE, "step"], ascending=[False, True])
    elif rule == "val_best":
        scored = checkpoints.dropna(subset=[VALIDATION]) if VALIDATION in checkpoints else checkpoints.iloc[0:0]
        ordered = scored.sort_values([VALIDATION, "step"], ascending=[False, True])
    elif rule == "final":
        ordered = checkpoints.sort_values("step", ascending=False)
    else:
        raise ValueError(f"unknown selection rule {rule!r}; rules: {', '.join(RULES)}")
    return ordered.groupby(RUN, sort=True).head(1).sort_values(RUN).reset_index(drop=True)
