"""The paper's evaluation of a selected checkpoint (Appendix B): pick each run's checkpoint by the report's rule
from the evaluations that every checkpoint got, then evaluate that checkpoint ``eval.selection_runs`` more times
with fresh sampling seeds. The report scores a selected checkpoint by the mean of these runs, so the noise that
made it win the selection does not inflate its score.

Output, per model: ``selected.json`` (the rule, the step and the selecting score) and ``run_NN.json`` (one
evaluation JSON each, as ``graft evaluate`` writes them).
"""

from __future__ import annotations

import json
from pathlib import Path

from graft.config import RunConfig
from graft.errors import ConfigError
from graft.eval.evaluate import Evaluator, check_checkpoint, evaluate_kept
from graft.eval.matching import check_evaluations
from graft.eval.selection import selected_step
from graft.results import RunDir, eval_file, is_pruned, selection_run_file, write_text
from graft.seeding import derive


def reevaluate_selected(
    config: RunConfig,
    run: RunDir,
    eval_dir: Path,
    out_dir: Path,
    evaluate_one: Evaluator,
    models: list[str] | None = None,
) -> list[Path]:
    """Evaluate each model's selected checkpoint of ``run`` ``eval.selection_runs`` times; returns the files.

    ``evaluate_one``: a graft.eval.evaluate.Evaluator; each run is kept beside the training run as it finishes, so a
    retried job redoes only the runs not yet done.
    Run r samples with seed derive(<cell seed>, "selection_run", r), none of which is the seed of the
    checkpoint evaluations (0), so no run repeats the one that selected the checkpoint.
    """
    if config.eval is None or config.eval.selection_runs < 1:
        raise ConfigError("eval.selection_runs: 0 re-evaluates nothing; set it to the number of runs (5 in the paper)")
    meta = json.loads(run.run_json.read_text())
    rule = config.report.selection
    selected = {}  # every model's checkpoint is checked before any is evaluated
    for model in models or meta["models"]:
        check_evaluations(run, eval_dir, model, "nothing re-evaluated")
        step, score = selected_step(eval_dir, model, rule)
        checkpoint = run.checkpoint(step) / model if step else None
        if checkpoint is None or not checkpoint.is_dir():
            why = (
                " (pruned after the cell's evaluations: workflow.keep_checkpoints)"
                if step and is_pruned(checkpoint)
                else ""
            )
            raise ConfigError(f"--run: {str(run.root)!r} has no checkpoint of {model!r} at step {step}{why}")
        selected[model] = step, score, check_checkpoint(config, model, checkpoint, "--run")
    written = []
    for model, (step, score, checkpoint) in selected.items():
        for r in range(config.eval.selection_runs):
            out = selection_run_file(out_dir, model, r)
            kept = run.kept_evaluation(model, step, selection_run=r)
            seed = derive(int(meta["seed"]), "selection_run", r)
            # the benchmarks only: the validation set serves the selection, which these runs come after
            evaluate_kept(evaluate_one, model, checkpoint, out, kept, seed, validation=False)
            written.append(out)
        record = {
            "rule": rule,
            "step": step,
            "selecting_score": score,
            "selecting_file": str(eval_file(eval_dir, model, step)),
            "runs": config.eval.selection_runs,
        }
        written.append(write_text(out_dir / model / "selected.json", json.dumps(record, indent=2) + "\n"))
    return written
