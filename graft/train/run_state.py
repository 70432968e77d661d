"""What ``graft train --out`` finds there, and what the trainer does with it, decided before any model loads.

A run directory is a user's work (at the paper's scale a cell is about 16 hours on 4 GPUs), so nothing in it is
removed or redone by implication, as verl's and TRL's users expect of a resume:

- an empty ``--out``: the run starts;
- a run there, neither ``--resume`` nor ``--overwrite``: refused in one line naming what is there and both ways on;
- ``--resume`` of the same run (method, models, seed, peer archives and the settings that change what it computes):
  an unfinished run continues from its newest intact resumable checkpoint; a finished one with the steps asked does
  nothing; asked for more steps it continues from its newest resumable checkpoint, or is refused when the finished
  run's resume state was removed (``train.keep_resume_state: false``);
- ``--overwrite``: what is there is replaced, except, when ``--resume`` is given too, a run of the same settings
  that is unfinished or asked for more steps than it finished, which continues;
- ``--resume --retrain``: as ``--resume``, but a run it would refuse (other settings, or steps it cannot continue
  to) is retrained, its records and evaluations kept under ``<out>/replaced/<UTC time>/`` (``retire``).

Snakemake's training rule passes ``--resume`` alone, so a retry or a requeue continues or finds its run finished;
it adds ``--retrain`` only where the user chose it (``workflow.changed_runs: retrain``, graft.workflow.reruns).
Replacing removes only the entries a run writes (``RUN_ENTRIES``), never other files under ``--out``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from graft.config import RunConfig
from graft.errors import ConfigError
from graft.results import RunDir, resume_state, trajectory_file

RUN_ENTRIES = (
    "run.json",
    "metrics.jsonl",
    "done.json",
    "pruned.json",
    "checkpoints",
    "trajectories",
    "evaluated",
    "tensorboard",
    "wandb",
)
"""What a training run writes under ``--out`` (graft.results.RunDir, the trackers): all that ``--overwrite`` removes."""

REPLACED = "replaced"
"""Under ``--out``: the records of runs that ``--retrain`` replaced, one directory each, named by UTC time."""

OPERATIONAL = frozenset(
    {
        "steps",  # compared on its own: more steps continue a finished run
        "checkpoint_every",
        "checkpoint_minutes",
        "resumable_checkpoints",
        "keep_resume_state",
        "step_deadline_factor",
        "step_deadline_minutes",
        "micro_batch",
        "micro_batch_tokens",
        "logits_chunk_mib",
        "rollout_batch",
    }
)
"""Fields of ``train:`` that change how a run is saved, batched for memory or given up on, not what it computes: a
resume may change them (a smaller micro-batch after an out-of-memory kill, a longer step deadline after a slow step
was taken for a hang)."""

IDENTITY = ("method", "models", "seed", "peers", "settings", "data")
"""What a resumed run must share with the run it continues, in the order a refusal names the first difference.
Files count by content, not by where they are (``peers``, ``data``): a results tree moved or copied elsewhere
holds the same runs. ``run.json`` also records the archives' paths (``peer_archive``), for people."""

FROM_FILES = ("peers", "data", "peer_archive")
"""The parts of a run's record read from files (their digests, their paths): files that a workflow's jobs make or
fetch, so they may not exist yet when it is planned (graft.workflow.reruns)."""


def run_settings(cfg: RunConfig, models: list[str]) -> dict:
    """The settings that decide what a run of ``models`` computes, as JSON values: the training section but its
    operational fields, each model's specification but where it is stored, and the reward."""
    train = {k: v for k, v in asdict(cfg.train).items() if k not in OPERATIONAL}
    specs = {m: {k: v for k, v in asdict(cfg.models[m]).items() if k not in ("path", "hub_id")} for m in models}
    reward = {"kind": cfg.reward.kind, "timeout": cfg.reward.timeout}
    return json.loads(json.dumps({"train": train, "models": specs, "reward": reward}))


def archive_identity(archives: list[str] | tuple) -> list[str | None] | None:
    """Each peer archive by content (its first step's file's SHA-256; None while it does not exist yet): a peer
    retrained differently is another peer, the same archive elsewhere is not."""
    if not archives:
        return None
    return [file_digest(f) if (f := trajectory_file(a, 0)).is_file() else None for a in archives]


def data_identity(cfg: RunConfig) -> dict:
    """The training prompts by content (their file's SHA-256), None while the file does not exist yet: the same
    prompts moved elsewhere are the same run, other prompts at the same path are not."""
    path = Path(cfg.data.train)
    return {"train": file_digest(path) if path.is_file() else None}


@functools.lru_cache(maxsize=16)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_digest(path: Path) -> str:
    """A file's SHA-256, read once per version of the file in this process (the workflow asks it for every cell)."""
    stat = path.stat()
    return _digest(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


def run_identity(
    cfg: RunConfig, method: dict, models: list[str], seed: int, steps: int, peer_archives: list[str]
) -> dict:
    """What ``run.json`` records of a run and a resume compares (``IDENTITY``, and the steps asked): the method's
    resolved switches, the models, the seed, the peer archives' paths and digests, ``run_settings`` and the
    training prompts' digest.
    The workflow computes the same record for each cell (graft.workflow.reruns), so that it knows before any job
    which finished runs a config edit would change."""
    return {
        "method": method,
        "models": list(models),
        "seed": seed,
        "steps": steps,
        "peer_archive": [str(a) for a in peer_archives] or None,
        "peers": archive_identity(peer_archives),
        "settings": run_settings(cfg, list(models)),
        "data": data_identity(cfg),
    }


def differences(old, new, path: str = "") -> list[tuple[str, object, object]]:
    """Every dotted key at which two JSON values differ, with both values (a key missing on one side: None)."""
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in sorted(old.keys() | new.keys()):
            found += differences(old.get(key), new.get(key), f"{path}.{key}" if path else key)
        return found
    return [] if old == new else [(path, old, new)]


@dataclass(frozen=True)
class OutPlan:
    """What the trainer does with ``--out``."""

    action: Literal["start", "resume", "finished", "replace", "retrain"]
    extend_from: int | None = None
    """A finished run asked for more steps: the steps it finished (it must continue from a checkpoint, not
    start over)."""


def _read_json(path) -> dict | None:
    try:
        value = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        problem = f"--out: {str(path)!r} is not readable JSON ({err}); move it aside or use --overwrite"
        raise ConfigError(problem) from None
    return value if isinstance(value, dict) else None


def holds_run(run: RunDir) -> bool:
    """Whether ``--out`` holds anything a training run wrote."""
    return any((run.root / name).exists() for name in RUN_ENTRIES)


def finished_steps(run: RunDir) -> int | None:
    """The steps of the finished run in ``--out`` (its ``done.json``, or the copy ``run.json`` keeps for when
    Snakemake removed ``done.json`` before rerunning the job), None when no run finished there."""
    done = _read_json(run.done) or (_read_json(run.run_json) or {}).get("finished")
    return int(done["steps"]) if isinstance(done, dict) and "steps" in done else None


def _steps_done(run: RunDir) -> int:
    if not run.metrics.is_file():
        return 0
    steps = set()
    for line in run.metrics.read_text().splitlines():
        try:
            steps.add(int(json.loads(line)["step"]))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            continue  # a line torn by a kill
    return len(steps)


def newest_resumable(run: RunDir, models: list[str]):
    """The newest checkpoint that still holds the state a resume needs, None when none does (its integrity is
    checked on resume)."""
    found = [
        ckpt
        for ckpt in run.saved_checkpoints()
        if (ckpt / "state.json").is_file() and all(any(p.exists() for p in resume_state(ckpt, m)) for m in models)
    ]
    return found[-1] if found else None


def describe(run: RunDir, old: dict | None, steps: int) -> str:
    """What a run directory holds, in a few words."""
    who = ""
    if old:
        who = f"models {','.join(old.get('models') or [])}, seed {old.get('seed')}, "
    finished = finished_steps(run)
    if finished is not None:
        return f"{who}finished at {finished} steps"
    return f"{who}{_steps_done(run)} of {old.get('steps', steps) if old else steps} steps done, not finished"


def plan_out(run: RunDir, identity: dict, steps: int, resume: bool, overwrite: bool) -> OutPlan:
    """Decide what to do with ``run`` (read only; every process may call it): ``identity`` holds the keys of
    ``IDENTITY`` for the run asked for. Refusals raise ConfigError with one line."""
    root = str(run.root)
    if not holds_run(run):
        return OutPlan("start")
    old = _read_json(run.run_json)
    if not resume:
        if overwrite:
            return OutPlan("replace")
        raise ConfigError(
            f"--out: {root!r} holds a run ({describe(run, old, steps)}); --resume continues it, --overwrite replaces it"
        )
    if old is None and (run.checkpoint_root.exists() or run.metrics.exists()):
        if overwrite:
            return OutPlan("replace")
        raise ConfigError(
            f"--resume: {root!r} holds checkpoints or metrics but no run.json, the record of which run they belong "
            "to; move them aside, or --overwrite replaces them"
        )
    for key in IDENTITY:
        # a record written before a key existed is compared on the keys it has
        if old is None or key not in old or old[key] == identity[key]:
            continue
        if overwrite:
            return OutPlan("replace")
        where, was, now = differences(old[key], identity[key], key)[0]
        raise ConfigError(
            f"--resume: {root!r} holds a run of another {where} ({json.dumps(was)} there, {json.dumps(now)} now); "
            "--overwrite replaces it, or choose another --out"
        )
    finished = finished_steps(run)
    if finished is None:
        done = _steps_done(run)
        if done > steps and not overwrite:
            raise ConfigError(
                f"--resume: {root!r} holds a run that has done {done} steps, more than the {steps} asked; "
                f"--overwrite replaces it with a run of {steps} steps"
            )
        return OutPlan("replace" if done > steps else "resume")
    if finished < steps and newest_resumable(run, identity["models"]) is not None:
        return OutPlan("resume", extend_from=finished)
    if overwrite:  # Snakemake reruns a finished cell only when forced or its output is stale
        return OutPlan("replace")
    if finished == steps:
        return OutPlan("finished")
    if finished > steps:
        raise ConfigError(
            f"--resume: {root!r} holds a run finished at {finished} steps, more than the {steps} asked; "
            f"--overwrite replaces it with a run of {steps} steps"
        )
    raise ConfigError(
        f"--resume: {root!r} holds a run finished at {finished} steps whose resume state was removed "
        f"(train.keep_resume_state: false); --overwrite retrains it from step 0 to {steps}"
    )


def retire(run: RunDir, evals: tuple[Path, ...] = (), now: datetime | None = None) -> Path:
    """Move a replaced run's records (``RUN_ENTRIES`` but its checkpoints, which are removed: retraining writes
    new ones) and its evaluation directories ``evals`` to ``<out>/replaced/<UTC time>/``; returns that directory.
    Each entry is renamed, so a kill leaves it either in the run or in the archive."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    archive = run.root / REPLACED / stamp
    archive.mkdir(parents=True, exist_ok=False)
    for name in RUN_ENTRIES:
        path = run.root / name
        if name != "checkpoints" and (path.exists() or path.is_symlink()):
            path.rename(archive / name)
    for index, directory in enumerate(evals):
        if Path(directory).is_dir():
            shutil.move(str(directory), archive / f"evaluations{index or ''}")
    replace(run)  # what is left: the checkpoints
    return archive


def replace(run: RunDir) -> None:
    """Remove what a run wrote under ``--out`` (``RUN_ENTRIES``); other files there stay."""
    for name in RUN_ENTRIES:
        path = run.root / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
