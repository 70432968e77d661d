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
  that is unfinished or asked for more steps than it finished, which continues. Snakemake's training rule passes
  both: it runs a job only when its output is missing or stale, so a retry resumes and a ``--forcerun`` (or a
  changed setting) retrains.

Replacing removes only the entries a run writes (``RUN_ENTRIES``), never other files under ``--out``.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from typing import Literal

from graft.config import RunConfig
from graft.errors import ConfigError
from graft.results import RunDir
from graft.train.checkpoint import resume_state

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

IDENTITY = ("method", "models", "seed", "peer_archive", "settings")
"""What a resumed run must share with the run it continues, in the order a refusal names the first difference."""


def run_settings(cfg: RunConfig, models: list[str]) -> dict:
    """The settings that decide what a run of ``models`` computes, as JSON values: the training section but its
    operational fields, each model's specification but where it is stored, and the reward."""
    train = {k: v for k, v in asdict(cfg.train).items() if k not in OPERATIONAL}
    specs = {m: {k: v for k, v in asdict(cfg.models[m]).items() if k not in ("path", "hub_id")} for m in models}
    reward = {"kind": cfg.reward.kind, "timeout": cfg.reward.timeout}
    return json.loads(json.dumps({"train": train, "models": specs, "reward": reward}))


@dataclass(frozen=True)
class OutPlan:
    """What the trainer does with ``--out``."""

    action: Literal["start", "resume", "finished", "replace"]
    extend_from: int | None = None
    """A finished run asked for more steps: the steps it finished (it must continue from a checkpoint, not
    start over)."""


def _first_difference(old, new, path: str) -> tuple[str, object, object] | None:
    """The first dotted key at which two JSON values differ, with both values."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(old.keys() | new.keys()):
            found = _first_difference(old.get(key), new.get(key), f"{path}.{key}")
            if found:
                return found
        return None
    return None if old == new else (path, old, new)


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
    for key in IDENTITY:
        if old is None or key not in old or old[key] == identity[key]:
            continue
        if overwrite:
            return OutPlan("replace")
        where, was, now = _first_difference(old[key], identity[key], key)
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


def replace(run: RunDir) -> None:
    """Remove what a run wrote under ``--out`` (``RUN_ENTRIES``); other files there stay."""
    for name in RUN_ENTRIES:
        path = run.root / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
