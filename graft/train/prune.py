"""Pruning a finished, evaluated run: remove the checkpoints' model directories that nothing reads any more,
keeping each checkpoint's manifest (``graft prune``; unless ``workflow.keep_checkpoints``). Without torch, so that
the workflow's prune jobs take a second, not the seconds torch takes to load."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from graft.errors import ConfigError
from graft.eval.matching import check_evaluations
from graft.eval.selection import selection_steps
from graft.results import RunDir, eval_file, is_pruned, parse_step

PRUNING = ".pruning"
"""The suffix of a model directory being removed: renamed first, so that a checkpoint's model is whole or absent
even when a prune is killed midway (the next one finishes it)."""


def prune_run(run: RunDir, eval_dir: Path) -> dict:
    """Once a finished run's checkpoints are all evaluated (``eval_dir``: ``<model>/step_NNNNN.json`` for each),
    remove the model directories (with any resume state inside) that nothing reads any more: each model keeps the
    checkpoints that the selection rules pick (what a re-evaluation reads, whichever rule ``report.selection``
    names now or later) and the last. Every checkpoint keeps its manifest, which evaluations kept beside the run
    are matched by. Everything is checked before anything is removed; returns what was kept and removed, and the
    bytes freed. Evaluations of another run (another seed's, say) are refused: the checkpoints they select are not
    this run's to keep."""
    if not run.done.is_file():
        raise ConfigError(f"--run: {str(run.root)!r} has no done.json (the run is not finished); nothing pruned")
    models = json.loads(run.run_json.read_text())["models"]
    checkpoints = {parse_step(c.name): c for c in run.checkpoints()}
    if not checkpoints:
        raise ConfigError(f"--run: {str(run.root)!r} holds no checkpoints; nothing pruned")
    keep = {}
    for model in models:
        check_evaluations(run, eval_dir, model, "nothing pruned")
        missing = [s for s in checkpoints if not eval_file(eval_dir, model, s).is_file()]
        if missing:
            raise ConfigError(
                f"--evals: {str(eval_dir)!r} has no evaluation of {model!r} at step {missing[0]}; a run is pruned "
                "only once every checkpoint is evaluated; nothing pruned"
            )
        keep[model] = sorted(selection_steps(eval_dir, model) | {max(checkpoints)})
    removed: dict[str, list[int]] = {model: [] for model in models}
    freed = 0
    for step, ckpt in checkpoints.items():
        for leftover in ckpt.glob(f".*{PRUNING}"):
            freed += _remove(leftover)
        for model in models:
            if step not in keep[model] and (ckpt / model).is_dir():
                doomed = ckpt / f".{model}{PRUNING}"
                (ckpt / model).rename(doomed)
                freed += _remove(doomed)
            if is_pruned(ckpt / model):
                removed[model].append(step)
    return {"kept": keep, "removed": removed, "freed_bytes": freed}


def _remove(path: Path) -> int:
    """Remove a directory whole; returns the bytes it held."""
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    shutil.rmtree(path)
    return size
