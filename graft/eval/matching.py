"""Which training checkpoint an evaluation is of: each evaluation records one sha256 of the files it read, which
stays true after the results tree moves and after pruning (every checkpoint keeps its manifest). Without torch, so
that pruning a run (graft.train.prune) does not load it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from graft.errors import ConfigError
from graft.results import MANIFEST, RESUME_STATE, RunDir, listed_files, parse_step, step_name


def listed_model_files(checkpoint: Path) -> dict[str, str] | None:
    """The sha256 of each file of a training checkpoint's model directory (``<model>/<file>``), as its checkpoint's
    manifest lists them; None for a directory without one (a base model)."""
    if not (checkpoint.parent / MANIFEST).is_file():
        return None
    prefix = f"{checkpoint.name}/"
    return {name: sha256 for name, (_, sha256) in listed_files(checkpoint.parent).items() if name.startswith(prefix)}


def checkpoint_sha256(checkpoint: Path) -> str | None:
    """Which training checkpoint an evaluation evaluated, as a path cannot say once a results tree moves: one sha256
    of the files an evaluation reads (as its manifest lists them, the resume state left out), recorded in every
    evaluation and known after pruning too, since every checkpoint keeps its manifest; None for a directory without
    one (a base model)."""
    files = listed_model_files(checkpoint)
    if files is None:
        return None
    read = {name: sha256 for name, sha256 in files.items() if Path(name).parts[1] not in RESUME_STATE}
    return hashlib.sha256(json.dumps(read, sort_keys=True).encode()).hexdigest()


def check_evaluations(run: RunDir, eval_dir: Path, model: str, consequence: str) -> None:
    """Refuse, in one line ending in ``consequence``, an evaluation of ``model`` in ``eval_dir`` that is not of one
    of ``run``'s checkpoints (another seed's or cell's, or of a run since replaced): each names the checkpoint it
    evaluated by ``checkpoint_sha256``, or, written before evaluations recorded that, by its path."""
    for path in sorted((eval_dir / model).glob("step_*.json")):
        step = parse_step(path.name)
        if step is None:
            continue
        try:
            result = json.loads(path.read_bytes().decode("utf-8"))
            evaluated, recorded = str(result["checkpoint"]), result.get("checkpoint_sha256")
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, AttributeError):
            problem = "is not an evaluation (a JSON object naming its checkpoint)"
            raise ConfigError(f"--evals: {str(path)!r} {problem}; {consequence}") from None
        why = _not_of(run.checkpoint(step) / model, evaluated, recorded)
        if why:
            raise ConfigError(
                f"--evals: {str(path)!r} evaluated {evaluated!r}, not checkpoint {step_name(step)}/{model} of --run "
                f"{str(run.root)!r} ({why}): the evaluations are of another run; {consequence}"
            )


def _not_of(checkpoint: Path, evaluated: str, recorded: str | None) -> str | None:
    """Why an evaluation naming ``evaluated`` and ``recorded`` (its ``checkpoint_sha256``) is not one of
    ``checkpoint``; None when it is."""
    if not checkpoint.parent.is_dir():
        return "the run has no such checkpoint"
    found = checkpoint_sha256(checkpoint) if recorded is not None else None
    if found is not None:
        return None if found == recorded else "their model files differ"
    return None if Path(evaluated).resolve() == checkpoint.resolve() else "another path"
