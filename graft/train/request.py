"""What ``graft train`` is asked to do, and its validation before anything heavy loads."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from graft.config import RunConfig
from graft.data.imports import MANIFEST, follows_prompts, read_manifest
from graft.data.problems import Problem, batch_indices, load_problems
from graft.data.records import archive_prompt_ids
from graft.engine.policy import check_model_dir
from graft.errors import ConfigError
from graft.methods import Method, group_problem
from graft.results import trajectory_file


@dataclass
class TrainRequest:
    """What ``graft train`` was asked to do, validated before any compute."""

    config: RunConfig
    method: Method
    models: list[str]
    seed: int
    out: Path
    steps: int
    peer_archives: tuple[Path, ...] = ()
    """Archive replay: the trajectory directories of the peers' stored GRPO runs (one, or several: then each
    all-fail prompt takes one peer's group, graft.algo.group_selection without balancing)."""
    resume: bool = False
    """Continue the run in ``out`` (graft.train.run_state says what that means for each thing ``out`` may hold)."""
    overwrite: bool = False
    """Replace the run in ``out``; with ``resume``, only a run that cannot be continued (another run's settings,
    or finished)."""
    retrain: bool = False
    """With ``resume``: a run of other settings in ``out`` is retrained, its records kept under
    ``<out>/replaced/<UTC time>/`` (graft.train.run_state.retire), where ``overwrite`` would remove them."""
    keep_evals: tuple[Path, ...] = ()
    """With ``retrain``: the replaced run's evaluation directories, moved beside its records."""
    eval_dir: Path | None = None
    """Evaluate each checkpoint as it is saved, into <eval_dir>/<model>/step_NNNNN.json (saves a process start
    and a model load per checkpoint on a CPU; a cluster evaluates in separate GPU jobs instead)."""
    force_unlock: bool = False
    """Take over a run lock held by a process on another host (which this host cannot see)."""


def validate_request(req: TrainRequest) -> None:
    """Refuse inconsistent requests with one line, before loading anything heavy."""
    if req.retrain and (not req.resume or req.overwrite):
        raise ConfigError("--retrain: goes with --resume and not with --overwrite (which removes what --retrain keeps)")
    if req.keep_evals and not req.retrain:
        raise ConfigError("--keep-evals: only with --retrain, which moves them beside the replaced run's records")
    unknown = [m for m in req.models if m not in req.config.models]
    if unknown:
        raise ConfigError(f"--models: unknown model {unknown[0]!r}; models: {', '.join(req.config.models)}")
    if len(set(req.models)) != len(req.models):
        raise ConfigError("--models: the models of a pair or group must differ")
    live = req.method.peer == "live"
    if live and len(req.models) < 2:
        raise ConfigError(f"--models: method with a live peer needs two or more models A,B,..., got {len(req.models)}")
    problem = group_problem(req.method) if len(req.models) > 2 else None
    if problem:
        raise ConfigError(f"--method: a group of {len(req.models)} models cannot run this method: {problem}")
    if not live and len(req.models) != 1:
        raise ConfigError(f"--models: method with peer {req.method.peer!r} trains one model, got {len(req.models)}")
    if req.method.peer == "archive":
        if not req.peer_archives:
            raise ConfigError("--peer-archive: required by a method that replays stored trajectories")
        for archive in req.peer_archives:
            if not trajectory_file(archive, 0).is_file():
                raise ConfigError(f"--peer-archive: {str(archive)!r} holds no step_00000.parquet")
        if len(req.peer_archives) > 1 and req.method.select != "complementary":
            raise ConfigError(
                f"--peer-archive: several archives need select 'complementary' (one peer per prompt), not "
                f"{req.method.select!r}"
            )
    elif req.peer_archives:
        raise ConfigError(f"--peer-archive: only for archive replay, not for peer {req.method.peer!r}")
    if req.eval_dir is not None and req.config.scale.processes > 1:
        raise ConfigError(
            "--eval-dir: not with scale.processes > 1; evaluate checkpoints in their own jobs "
            "(workflow.eval_in_train: false)"
        )
    if req.eval_dir is not None and req.config.eval is None:
        raise ConfigError("--eval-dir: this config has no 'eval:' section naming the benchmarks")
    if req.steps < 1:
        raise ConfigError(f"--steps: {req.steps} is not allowed; expected an integer >= 1")
    problems = load_problems(req.config.data.train, "data.train", req.config.reward.kind)
    for archive in req.peer_archives:
        ids = check_archive(archive, req.steps, {p.id for p in problems})
        if not follows_prompts(archive):  # replay follows an import's batches, and samples its own otherwise
            check_batches(archive, ids, problems, req.config.train.prompts_per_step, req.seed)
    # the models last: checking one loads it (its weights left unread)
    for name in req.models:
        check_model_dir(req.config.models[name].path, f"models.{name}.path", req.config, name)
    if req.config.scale.rollout == "vllm":
        from graft.engine.vllm import check_available, check_models

        check_available()
        check_models({m: req.config.models[m].path for m in req.models})


def check_archive(archive: Path, steps: int, known: set[str]) -> list[list[str]]:
    """Refuse, before step 0, an archive replay could not read to the end: a step of the run's missing or
    unreadable, a manifest that disagrees with the step files, or a prompt that data.train lacks (an archive of
    another problem set). Another n than the run's is allowed. Returns each step's prompt ids."""
    manifest = read_manifest(archive)
    steps_ids = archive_prompt_ids(archive, steps)
    for step, ids in enumerate(steps_ids):
        missing = next((i for i in ids if i not in known), None)
        if missing is not None:
            raise ConfigError(
                f"--peer-archive: step {step} of {str(archive)!r} holds prompt {missing!r}, which data.train lacks; "
                "replay needs an archive of the same problem set"
            )
        entry = None if manifest is None else manifest["steps"].get(str(step))
        if manifest is not None and (entry is None or entry.get("prompts") != len(ids)):
            listed = "no entry" if entry is None else f"{entry.get('prompts')!r} prompts"
            raise ConfigError(
                f"--peer-archive: {str(archive / MANIFEST)!r} gives step {step} {listed}; its step file holds "
                f"{len(ids)}: the manifest and the step files disagree"
            )
    return steps_ids


def check_batches(archive: Path, steps_ids: list[list[str]], problems: list[Problem], size: int, seed: int) -> None:
    """Refuse, before anything is written, a peer's trajectories whose steps hold other prompts than this run's
    batches (the sampler's, graft.data.problems.batch_indices): the peer's GRPO run had another seed (its run.json,
    beside the trajectories, names it) or other data, and replay would stop at step 0 having written the run's
    records, which the corrected command would then refuse as another run's."""
    if len(problems) < size:
        return  # the trainer refuses train.prompts_per_step
    for step, ids in enumerate(steps_ids):
        batch = [problems[i].id for i in batch_indices(step, size, len(problems), seed)]
        if ids == batch:
            continue
        record = archive.parent.parent / "run.json"  # <run>/trajectories/<model>
        theirs = _recorded_seed(record)
        if theirs is not None and theirs != seed:
            raise ConfigError(
                f"--peer-archive: {str(archive)!r} holds the trajectories of a run of seed {theirs} ({str(record)!r}), "
                f"not of --seed {seed}; replay needs the peer's GRPO run of the same seed"
            )
        raise ConfigError(
            f"--peer-archive: step {step} of {str(archive)!r} holds other prompts than this run's batch (--seed "
            f"{seed}, data.train); replay needs the peer's GRPO run with the same data and seed"
        )


def _recorded_seed(record: Path) -> int | None:
    """The seed a run.json records; None where there is none to read."""
    try:
        seed = json.loads(record.read_text(encoding="utf-8")).get("seed")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        return None
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None
