"""Results read back from a results tree: evaluation JSONs (one per checkpoint) and training metrics.

A cell with no results is simply absent here; the tables show it as missing, never as zero.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from graft.results import ResultsTree


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
    for method, cell, seed, model, path in ResultsTree(results).eval_files():
        run = runs.setdefault((method, cell, seed, model), Run(method, cell, seed, model))
        point = _load_point(path)
        run.points[point.step] = point
    return runs


def read_metrics(results: Path, method: str, cell: str, seed: int) -> list[dict]:
    """One training cell's metric rows (empty when it has not run)."""
    path = ResultsTree(results).run(method, cell, seed).metrics
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]
