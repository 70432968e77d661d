"""Which checkpoints the selection rules (graft.scores.RULES) pick among a run's evaluations: the one a
re-evaluation reads (graft.eval.reevaluate), and every one a prune keeps (graft.train.prune). Without torch."""

from __future__ import annotations

from pathlib import Path

from graft.errors import ConfigError
from graft.results import parse_step
from graft.scores import AVERAGE, RULES, VALIDATION, checkpoint_scores, evaluation_frames, select


def _checkpoint_scores(eval_dir: Path, model: str):
    """One row per checkpoint of ``model`` evaluated in ``eval_dir`` (graft.scores.checkpoint_scores)."""
    files = [p for p in sorted((eval_dir / model).glob("step_*.json")) if parse_step(p.name) is not None]
    if not files:
        raise ConfigError(f"--evals: {str(eval_dir)!r} holds no evaluations of model {model!r}")
    _, scores = evaluation_frames(("", "", 0, model, 0, path) for path in files)
    return checkpoint_scores(scores)


def selection_steps(eval_dir: Path, model: str) -> set[int]:
    """The steps of ``model``'s checkpoints that some selection rule (graft.scores.RULES) picks among its
    evaluations in ``eval_dir``: every checkpoint a re-evaluation may read, whichever rule it is run under."""
    scores = _checkpoint_scores(eval_dir, model)
    return {int(step) for rule in RULES for step in select(scores, rule)["step"]}


def selected_step(eval_dir: Path, model: str, rule: str) -> tuple[int, float | None]:
    """(step, selecting score) of ``model``'s checkpoint under ``rule`` among its evaluations in ``eval_dir``; the
    rule is graft.scores.select's, so the report and the re-evaluation pick the same checkpoint."""
    chosen = select(_checkpoint_scores(eval_dir, model), rule)
    if chosen.empty:
        raise ConfigError(f"report.selection: {rule!r} selects nothing in {str(eval_dir)!r} (no validation scores?)")
    row = chosen.iloc[0]
    column = VALIDATION if rule == "val_best" else AVERAGE
    return int(row["step"]), float(row[column]) if column in row and row[column] == row[column] else None
