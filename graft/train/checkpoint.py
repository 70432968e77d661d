"""Checkpoints of a training run: save, find the newest resumable one, restore, prune.

Checkpoints are saved every ``train.checkpoint_every`` steps and, with ``train.checkpoint_minutes``, also by wall
time in between, and when a stop signal ends the run early (graft.train.stop) (``checkpoints/interim``:
resumable, never evaluated, only the newest kept). A checkpoint holds
each model as a ``from_pretrained`` directory (what evaluation reads), and in the newest
``train.resumable_checkpoints`` ones also the state a resume needs: the optimizer (``optimizer.pt``, or a sharded
run's model and optimizer shards under ``sharded/``), the HACPO capability trackers and the RNG states
(``state.json``). It is written to a temporary directory and renamed, so it is complete or absent, and its
``manifest.json`` (every file's size and sha256), written last, lets a resume detect damage done later (a
truncated or deleted file) and fall back to the newest intact checkpoint. A resumed run ends as an uninterrupted
one would.

Pruning bounds the disk (``graft plan`` prints it): the resume state goes once the run is done (unless
``train.keep_resume_state``), and once the cell is evaluated graft.train.prune removes the model directories that
nothing reads any more (unless ``workflow.keep_checkpoints``), keeping each checkpoint's manifest.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from graft.algo import CapabilityTracker
from graft.engine import deepspeed_engine
from graft.engine.distributed import SINGLE, World, load_sharded, save_sharded
from graft.engine.policy import DTYPES
from graft.errors import ConfigError
from graft.results import (
    MANIFEST,
    RunDir,
    begin_dir,
    commit_dir,
    damage,
    failed_write_removes,
    parse_step,
    resume_state,
    sha256_file,
    step_name,
    temp_dir,
    trajectory_file,
    write_text,
)
from graft.train.learner import Learner


def rng_state() -> dict:
    """The random generators' states a checkpoint keeps (torch's CPU generator, Python's, NumPy's)."""
    py = random.getstate()
    return {
        "torch_rng": torch.get_rng_state().tolist(),
        "python_rng": [py[0], list(py[1]), py[2]],
        "numpy_rng": [v.tolist() if isinstance(v, np.ndarray) else v for v in np.random.get_state()],
    }


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(torch.tensor(state["torch_rng"], dtype=torch.uint8))
    version, internal, gauss = state["python_rng"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy_rng"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))


def write_manifest(ckpt: Path, world: World = SINGLE) -> None:
    """Every file of the checkpoint with its size and sha256, written last by process 0. The processes hash a
    share of the files each (collective), so none waits on one process hashing the whole checkpoint (about 70
    GB for a pair at the paper's scale) longer than its own share takes."""
    names = sorted(str(f.relative_to(ckpt)) for f in ckpt.rglob("*") if f.is_file() and f.name != MANIFEST)
    mine = [
        (name, {"size": (ckpt / name).stat().st_size, "sha256": sha256_file(ckpt / name)})
        for name in world.share(names)
    ]
    files = dict(sorted(pair for share in world.gather(mine) for pair in share))
    if world.is_main:
        (ckpt / MANIFEST).write_text(json.dumps({"files": files}, indent=1) + "\n")


def _engine(learners: list[Learner]) -> str:
    """The sharded engine a run's resume state is written in."""
    return "deepspeed" if any(learner.engine is not None for learner in learners) else "fsdp2"


def save(
    run: RunDir,
    next_step: int,
    learners: list[Learner],
    world: World,
    dtypes: dict[str, str],
    capabilities: dict[str, CapabilityTracker],
    model_processes: dict[str, int],
    keep_resumable: int = 2,
    interim: bool = False,
    with_resume_state: bool = True,
    check_held: Callable[[], None] = lambda: None,
) -> Path:
    """Write the checkpoint of ``next_step`` and drop the resume state of all but the newest ``keep_resumable``;
    ``interim``: a checkpoint saved by wall time or on a stop signal, which replaces the previous interim one;
    ``with_resume_state``: false for a policy checkpoint between two resume saves, which holds only the models that
    evaluation reads (the resume state, 12 bytes a parameter, is written as often as ``train.checkpoint_minutes``
    asks, not at every checkpoint). A checkpoint with resume state replaces every older interim one.
    ``learners``: this process's models (each saved by the processes it is sharded over); ``world``: the whole
    job; ``dtypes``: each model's configured dtype, in which a sharded run exports its float32 master weights;
    ``capabilities``: every model's HACPO tracker; ``model_processes``: how many processes each model is sharded
    over (the placement's), so that a resume can tell a sharded model from a whole one; ``check_held``: raises
    when the run's lock is no longer this run's (graft.train.lock), on every process (collective), asked before
    anything of the run directory changes and again before the checkpoint is put in place, since a save of a
    large model takes minutes. Returns the checkpoint's directory."""
    check_held()
    final = run.interim_root / step_name(next_step) if interim else run.checkpoint(next_step)
    tmp = begin_dir(final) if world.is_main else temp_dir(final)
    world.barrier()
    for learner in learners:
        home = learner.world
        single, sharded = resume_state(tmp, learner.name)
        if home.distributed:
            if with_resume_state and learner.engine is not None:
                deepspeed_engine.save(learner.engine, sharded)
            elif with_resume_state:
                save_sharded(learner.policy.model, learner.optimizer, sharded, home)
            weights = learner.main_weights()
            if home.is_main:  # in the configured dtype, as a single process writes it
                weights = _cast(weights, DTYPES[dtypes[learner.name]])
                with failed_write_removes(tmp):
                    _save_pretrained(learner.policy.model, tmp / learner.name, state_dict=weights)
        else:
            export = DTYPES[dtypes[learner.name]]
            masters = learner.policy.model.state_dict()
            with failed_write_removes(tmp):  # torch.save and safetensors raise no OSError on a full disk
                _save_pretrained(learner.policy.model, tmp / learner.name, state_dict=_cast(masters, export))
            # the float32 masters beside the optimizer when the export rounds them (a bfloat16 model)
            kept = {"masters": masters} if any(v.dtype != export for v in masters.values()) else {}
            if with_resume_state:
                with failed_write_removes(tmp):
                    torch.save({"optimizer": learner.optimizer.state_dict(), **kept}, single)
        if home.is_main:
            learner.policy.tokenizer.save_pretrained(tmp / learner.name)
    if world.is_main and with_resume_state:
        state = {
            "next_step": next_step,
            "processes": world.size,
            "model_processes": model_processes,
            "engine": _engine(learners),
            "capability": {name: tracker.state_dict() for name, tracker in capabilities.items()},
            **rng_state(),
        }
        (tmp / "state.json").write_text(json.dumps(state))
    world.barrier()  # every process's shards are on disk before the manifest lists them
    write_manifest(tmp, world)
    check_held()
    if world.is_main:
        commit_dir(tmp, final)
        if with_resume_state:
            for older in run.interim_checkpoints():
                if older != final:
                    shutil.rmtree(older)
            resumable = [c for c in run.checkpoints() if (c / "state.json").is_file()]
            remove_resume_state(resumable[:-keep_resumable], list(capabilities))
    world.barrier()
    return final


def _cast(weights: dict[str, torch.Tensor], dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """Floating-point tensors in ``dtype`` (a checkpoint's Hugging Face copy is in the model's configured dtype)."""
    return {k: v.to(dtype) if v.is_floating_point() else v for k, v in weights.items()}


def _save_pretrained(model: torch.nn.Module, directory: Path, **kwargs) -> None:
    """``save_pretrained`` on whichever process calls it. Once torch.distributed is initialized transformers writes
    only on the job's first process (``should_save_on_this_rank``); under the split placement each model is
    written by the first process of its own group."""
    model.should_save_on_this_rank = lambda is_main_process: is_main_process
    try:
        model.save_pretrained(directory, safe_serialization=True, **kwargs)
    finally:
        del model.should_save_on_this_rank


def remove_resume_state(checkpoints: list[Path], models: list[str]) -> None:
    """Drop the optimizer state (with the float32 weights; at the paper's scale 12 bytes a parameter, about 37 GB
    for a 3B model) of ``checkpoints``, which keep their models for evaluation: while a run lasts all but the
    newest ``train.resumable_checkpoints`` (so that a resume can fall back when the newest is damaged), and every
    one once it is done."""
    for ckpt in checkpoints:
        for model in models:
            single, sharded = resume_state(ckpt, model)
            single.unlink(missing_ok=True)
            shutil.rmtree(sharded, ignore_errors=True)


def latest(run: RunDir, models: list[str], say=lambda line: None) -> Path | None:
    """The newest checkpoint that holds the state a resume needs and matches its manifest; each newer one that
    does not is named with the reason through ``say``."""
    skipped = None
    for ckpt in reversed(run.saved_checkpoints()):
        resumable = (ckpt / "state.json").is_file() and all(
            any(path.exists() for path in resume_state(ckpt, model)) for model in models
        )
        problem = damage(ckpt) if resumable else "no resume state (pruned)"
        if problem is None:
            if skipped is not None:
                say(f"resume: falling back to {ckpt.name}")
            return ckpt
        say(f"resume: checkpoint {ckpt.name} is not usable: {problem}")
        skipped = ckpt
    if skipped is not None:
        say("resume: no intact checkpoint; starting over")
    return None


def restore(
    run: RunDir,
    learners: list[Learner],
    world: World,
    models: list[str],
    capabilities: dict[str, CapabilityTracker],
    start_over: bool = True,
) -> int:
    """Load the newest intact resumable checkpoint of the run's ``models`` into this process's ``learners``,
    ``capabilities`` and the RNGs; returns the step to continue from (0 with none: the run starts over, unless
    ``start_over`` is false: a finished run asked for more steps is never redone from step 0 by implication).
    Process 0 checks the checkpoints against their manifests (hashing them) and says on stderr what it falls back
    from; the others take its answer."""
    found = refusal = None
    if world.is_main:
        found = latest(run, models, lambda line: print(line, file=sys.stderr, flush=True))
        if found is None and not start_over:
            refusal = (
                f"--resume: {str(run.root)!r} has no intact resumable checkpoint to continue its finished run "
                "from; --overwrite retrains it from step 0"
            )
    answer, refusal = world.gather((None if found is None else str(found), refusal))[0]
    if refusal:  # on every process, so that none waits for the others
        raise ConfigError(refusal)
    if answer is None:
        return 0
    ckpt = Path(answer)
    state = json.loads((ckpt / "state.json").read_text())
    written = state.get("model_processes") or {name: state.get("processes", 1) for name in models}
    for learner in learners:
        if (written[learner.name] > 1) != learner.world.distributed:
            raise ConfigError(
                f"--resume: checkpoint {str(ckpt)!r} holds model {learner.name!r} from "
                f"{written[learner.name]} process(es), this run shards it over {learner.world.size}; resume a "
                "sharded model with a sharded run and a whole one with one process per model"
            )
    engine = _engine(learners)
    if any(size > 1 for size in written.values()) and state.get("engine", "fsdp2") != engine:
        raise ConfigError(
            f"--resume: checkpoint {str(ckpt)!r} was written with scale.engine {state.get('engine', 'fsdp2')!r}; "
            f"resume it with that engine, not {engine!r}"
        )
    for learner in learners:
        if learner.world.distributed and learner.engine is not None:
            deepspeed_engine.load(learner.engine, resume_state(ckpt, learner.name)[1])
        elif learner.world.distributed:
            path = resume_state(ckpt, learner.name)[1]
            load_sharded(learner.policy.model, learner.optimizer, path, learner.world)
        else:
            _load_single(learner, ckpt)
        if learner.separate_rollout:
            learner.sync_rollout()
    for name, tracker in capabilities.items():
        tracker.load_state_dict(state["capability"][name])
    set_rng_state(state)
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
    state = torch.load(resume_state(ckpt, learner.name)[0], weights_only=True)
    if "masters" in state:  # the float32 weights the Hugging Face copy rounded
        learner.policy.model.load_state_dict(state["masters"])
    learner.optimizer.load_state_dict(state["optimizer"])


def _step_of(line: str, default: int) -> int:
    """A metric row's step; a torn last line (the process was killed while appending) counts as ``default``."""
    try:
        return int(json.loads(line)["step"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
        return default


def trim_after(run: RunDir, next_step: int, models: list[str]) -> None:
    """Drop what was written for steps at or after ``next_step`` (they will be redone): metric rows, trajectory
    records and newer (damaged or unusable) checkpoints, so that no step appears twice."""
    if run.metrics.exists():
        kept = [line for line in run.metrics.read_text().splitlines() if _step_of(line, next_step) < next_step]
        write_text(run.metrics, "".join(line + "\n" for line in kept))
    for model in models:
        for path in sorted(run.trajectories(model).glob("*.parquet")):
            step = parse_step(path.name)
            if step is not None and step >= next_step and path == trajectory_file(run.trajectories(model), step):
                path.unlink()
    for ckpt in run.saved_checkpoints():
        if parse_step(ckpt.name) > next_step:
            shutil.rmtree(ckpt)
