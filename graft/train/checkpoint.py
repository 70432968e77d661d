"""Checkpoints of a training run: save, find the newest resumable one, restore, prune.

A checkpoint holds each model as a ``from_pretrained`` directory (what evaluation reads), and in the newest one
also the state a resume needs: the optimizer (``optimizer.pt``, or a sharded run's model and optimizer shards
under ``sharded/``), the HACPO capability trackers and the RNG states (``state.json``). It is written to a
temporary directory and renamed, so it is complete or absent; a resumed run ends as an uninterrupted one would.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import torch

from graft.engine.distributed import World, full_state_dict, load_sharded, save_sharded
from graft.engine.policy import DTYPES
from graft.errors import ConfigError
from graft.results import RunDir, begin_dir, commit_dir, temp_dir
from graft.train.learner import Learner


def resume_state(ckpt: Path, model: str) -> tuple[Path, Path]:
    """Where a checkpoint keeps a model's optimizer state: one process's ``optimizer.pt``, or the directory
    of a sharded run's model and optimizer shards."""
    return ckpt / model / "optimizer.pt", ckpt / model / "sharded"


def _rng_state() -> dict:
    py = random.getstate()
    return {
        "torch_rng": torch.get_rng_state().tolist(),
        "python_rng": [py[0], list(py[1]), py[2]],
        "numpy_rng": [v.tolist() if isinstance(v, np.ndarray) else v for v in np.random.get_state()],
    }


def _set_rng_state(state: dict) -> None:
    torch.set_rng_state(torch.tensor(state["torch_rng"], dtype=torch.uint8))
    version, internal, gauss = state["python_rng"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy_rng"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))


def save(run: RunDir, next_step: int, learners: list[Learner], world: World, dtypes: dict[str, str]) -> None:
    """Write the checkpoint of ``next_step`` and drop the resume state of older ones. ``dtypes``: each model's
    configured dtype, in which a sharded run exports its float32 master weights."""
    final = run.checkpoint(next_step)
    tmp = begin_dir(final) if world.is_main else temp_dir(final)
    world.barrier()
    for learner in learners:
        single, sharded = resume_state(tmp, learner.name)
        if world.distributed:
            save_sharded(learner.policy.model, learner.optimizer, sharded)
            weights = full_state_dict(learner.policy.model, world)
            if world.is_main:  # in the configured dtype, as a single process would have written it
                weights = {k: v.to(DTYPES[dtypes[learner.name]]) for k, v in weights.items()}
                learner.policy.model.save_pretrained(tmp / learner.name, state_dict=weights, safe_serialization=True)
        else:
            learner.policy.model.save_pretrained(tmp / learner.name, safe_serialization=True)
            torch.save(learner.optimizer.state_dict(), single)
        if world.is_main:
            learner.policy.tokenizer.save_pretrained(tmp / learner.name)
    if world.is_main:
        state = {
            "next_step": next_step,
            "processes": world.size,
            "capability": {learner.name: learner.capability.state_dict() for learner in learners},
            **_rng_state(),
        }
        (tmp / "state.json").write_text(json.dumps(state))
        commit_dir(tmp, final)
        _prune(run, final, [learner.name for learner in learners])
    world.barrier()


def _prune(run: RunDir, keep: Path, models: list[str]) -> None:
    """Only the newest checkpoint is resumed from, so older ones keep their models (for evaluation) and lose
    their optimizer state: at the paper's scale that is about 50 GB per model and checkpoint."""
    for ckpt in run.checkpoints():
        if ckpt == keep:
            continue
        for model in models:
            single, sharded = resume_state(ckpt, model)
            single.unlink(missing_ok=True)
            shutil.rmtree(sharded, ignore_errors=True)


def latest(run: RunDir, models: list[str]) -> Path | None:
    """The newest complete checkpoint that still holds the state a resume needs."""
    for ckpt in reversed(run.checkpoints()):
        if (ckpt / "state.json").is_file() and all(
            any(path.exists() for path in resume_state(ckpt, model)) for model in models
        ):
            return ckpt
    return None


def restore(run: RunDir, learners: list[Learner], world: World) -> int:
    """Load the newest resumable checkpoint into ``learners`` and the RNGs; returns the step to continue from
    (0 with none: the run starts over)."""
    ckpt = latest(run, [learner.name for learner in learners])
    if ckpt is None:
        return 0
    state = json.loads((ckpt / "state.json").read_text())
    sharded = state.get("processes", 1) > 1
    if sharded != world.distributed:
        raise ConfigError(
            f"--resume: checkpoint {str(ckpt)!r} was written by {state.get('processes', 1)} process(es); "
            "resume it with a sharded run if it was sharded and with one process if not"
        )
    for learner in learners:
        if sharded:
            load_sharded(learner.policy.model, learner.optimizer, resume_state(ckpt, learner.name)[1])
        else:
            _load_single(learner, ckpt)
        learner.capability.load_state_dict(state["capability"][learner.name])
        if learner.separate_rollout:
            learner.rollout.load_weights(full_state_dict(learner.policy.model, world))
    _set_rng_state(state)
    return state["next_step"]


def _load_single(learner: Learner, ckpt: Path) -> None:
    from safetensors.torch import load_file

    weights = {}
    for file in sorted((ckpt / learner.name).glob("*.safetensors")):
        weights.update(load_file(file))
    result = learner.policy.model.load_state_dict(weights, strict=False)
    # Tied weights (lm_head = embeddings) are stored once; anything else missing is a broken checkpoint.
    tied = {k for k in result.missing_keys if "lm_head" in k}
    if result.unexpected_keys or set(result.missing_keys) - tied:
        raise ConfigError(f"--resume: checkpoint {str(ckpt)!r} does not match model {learner.name!r}")
    learner.optimizer.load_state_dict(torch.load(resume_state(ckpt, learner.name)[0], weights_only=True))


def truncate_metrics(run: RunDir, next_step: int) -> None:
    """Drop the metric rows of steps at or after ``next_step`` (they will be redone)."""
    if not run.metrics.exists():
        return
    lines = run.metrics.read_text().splitlines()
    kept = [line for line in lines if line and json.loads(line)["step"] < next_step]
    run.metrics.write_text("".join(line + "\n" for line in kept))
