"""How long each kind of job of the workflow runs, from its work, and what that costs in GPU-hours.

``graft plan`` prints these beside the Slurm profile's limits before anything is submitted. Training jobs are
their steps times the step time of their cell under ``scale.placement`` (graft.planning.step_time: generation,
scoring, the update and the sync); evaluation jobs the tokens they generate (problems x samples x mean response
tokens) at ``workflow.generation_tokens_per_s`` of each model. The figures are the config's, stated with their
source there, and a GPU check's where ``workflow.gpu_check`` names one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from graft.config import RunConfig
from graft.data.benchmarks import DATASET_SIZES
from graft.data.problems import record_count
from graft.errors import ConfigError
from graft.methods import get_method
from graft.planning.step_time import cell_steps, gpu_rates, recomputes, step_rows, step_seconds, tokens_scale
from graft.typed_config import load_yaml


@dataclass(frozen=True)
class JobKind:
    """One rule's jobs."""

    rule: str
    kind: str
    """training, evaluation or re-evaluation: the GPU-hours are summed per kind."""
    lengths: list[float | None]
    """Estimated hours of each job; None where a figure it rests on is missing."""
    gpus: int
    """GPUs per job."""
    split: str
    """The setting that makes these jobs shorter."""

    @property
    def longest(self) -> float | None:
        known = [h for h in self.lengths if h is not None]
        return max(known) if known and len(known) == len(self.lengths) else None

    @property
    def gpu_hours(self) -> float | None:
        if any(h is None for h in self.lengths):
            return None
        return sum(self.lengths) * self.gpus


def problem_count(path: str) -> int | None:
    """Problems in a benchmark file: its records when it exists, else the published size of the dataset it is
    fetched as (named by its file name, as in the paper config), else None."""
    file = Path(path)
    if file.is_file():
        return record_count(file)
    return DATASET_SIZES.get(file.stem)


def evaluation_hours(cfg: RunConfig, model: str) -> float | None:
    """One evaluation of one checkpoint of ``model`` (every benchmark and the validation set, eval.k samples
    each): generated tokens / the model's tokens per second on one of the jobs' GPUs."""
    if cfg.eval is None or model not in cfg.workflow.generation_tokens_per_s:
        return None
    files = [*cfg.eval.benchmarks.values(), *([cfg.eval.validation] if cfg.eval.validation else [])]
    counts = [problem_count(f) for f in files]
    if any(c is None for c in counts):
        return None
    tokens = cfg.workflow.mean_response_tokens or cfg.eval_response_tokens()
    rate = cfg.workflow.generation_tokens_per_s[model] * tokens_scale(cfg)
    seconds = sum(counts) * cfg.eval.k * tokens / rate
    return seconds / 3600


def evaluation_parts(steps: list[int], per_job: int | None) -> list[list[int]]:
    """The checkpoint steps of a cell, cut into the groups that one evaluation job each evaluates."""
    size = per_job or len(steps)
    return [steps[i : i + size] for i in range(0, len(steps), size)]


def job_hours(cfg: RunConfig, cells, steps: list[int]) -> dict[str, dict[tuple, float | None]]:
    """Each GPU job's estimated hours, per rule, by its wildcards: ``train`` and ``reevaluate_selected`` by (method,
    cell, seed), ``evaluate_checkpoints`` by (method, cell, seed, part), ``evaluate_base`` by (model,); for
    ``cells`` (graft.planning.plan.TrainingCell) with checkpoint ``steps``. None where a figure a job's length
    rests on is missing."""
    rates = gpu_rates(cfg)
    placement = cfg.scale.placement

    def train_hours(cell) -> float | None:
        parts = None if rates is None else cell_steps(cfg, rates, cell.method, cell.models, placement)
        return None if parts is None else cfg.train.steps * step_seconds(parts, placement) / 3600

    each = {model: evaluation_hours(cfg, model) for model in cfg.models}  # reads the benchmark files once

    def cell_eval(cell, evaluations: int) -> float | None:
        hours = [each[m] for m in cell.models]
        return None if None in hours else evaluations * sum(hours)

    hours: dict[str, dict[tuple, float | None]] = {"train": {(c.method, c.cell, c.seed): train_hours(c) for c in cells}}
    if cfg.eval is None:
        return hours
    hours["evaluate_base"] = {(model,): each[model] for model in cfg.models}
    if not cfg.workflow.eval_in_train:
        parts = evaluation_parts(steps, cfg.workflow.eval_checkpoints_per_job)
        hours["evaluate_checkpoints"] = {
            (c.method, c.cell, c.seed, index): cell_eval(c, len(part))
            for c in cells
            for index, part in enumerate(parts)
        }
    if cfg.eval.selection_runs:
        hours["reevaluate_selected"] = {
            (c.method, c.cell, c.seed): cell_eval(c, cfg.eval.selection_runs) for c in cells
        }
    return hours


def training_work(cfg: RunConfig, cells) -> dict[tuple, int]:
    """Each training job's work, by (method, cell, seed): the rows its models sample, score and train on over the
    run (graft.planning.step_time.step_rows, times ``train.steps``). It ranks the jobs where no step time is
    predicted (CPU jobs) as where one is: the workflow starts the longest first, so that short jobs fill the end
    rather than one long job running alone there."""
    train = cfg.train

    def work(cell) -> int:
        rows = step_rows(
            get_method(cell.method, cfg.methods), train.prompts_per_step, cfg.workflow.exchange_share, recomputes(cfg)
        )
        return round(train.steps * len(cell.models) * (rows.generated + rows.scored + rows.trained))

    return {(c.method, c.cell, c.seed): work(c) for c in cells}


def job_kinds(
    cfg: RunConfig, cells, steps: list[int], base_evaluations: list[str], evaluated=None, reevaluated=None
) -> list[JobKind]:
    """Every kind of GPU job ``snakemake all`` submits for ``cells`` (graft.planning.plan.TrainingCell) with checkpoint
    ``steps``, their lengths from ``job_hours``; ``base_evaluations``: the model of each evaluation of a base model.
    ``evaluated`` and ``reevaluated``: the cells whose checkpoints are evaluated, and whose selected ones are
    evaluated again (every one of ``cells`` where None; fewer where the targets ask for less, such as a cell's
    ``done.json``)."""
    evaluated = cells if evaluated is None else evaluated
    reevaluated = cells if reevaluated is None else reevaluated
    # CPU jobs (slurm.gpus false) hold no GPU, so they count no GPU-hours
    gpus, eval_gpus = (cfg.scale.processes * cfg.scale.nodes, 1) if cfg.slurm.gpus else (0, 0)
    hours = job_hours(cfg, [*dict.fromkeys([*cells, *evaluated, *reevaluated])], steps)
    kinds = [
        JobKind(
            "train",
            "training",
            [hours["train"][(c.method, c.cell, c.seed)] for c in cells],
            gpus,
            "train.checkpoint_minutes (a job killed at its limit resumes from its last checkpoint when retried)",
        )
    ]
    if cfg.eval is None:
        return kinds
    base = [hours["evaluate_base"][(model,)] for model in base_evaluations]
    kinds.append(JobKind("evaluate_base", "evaluation", base, eval_gpus, "the rule's runtime"))
    if "evaluate_checkpoints" in hours:
        parts = len(evaluation_parts(steps, cfg.workflow.eval_checkpoints_per_job))
        lengths = [
            hours["evaluate_checkpoints"][(c.method, c.cell, c.seed, i)] for c in evaluated for i in range(parts)
        ]
        kinds.append(
            JobKind("evaluate_checkpoints", "evaluation", lengths, eval_gpus, "workflow.eval_checkpoints_per_job")
        )
    if "reevaluate_selected" in hours:
        lengths = [hours["reevaluate_selected"][(c.method, c.cell, c.seed)] for c in reevaluated]
        kinds.append(JobKind("reevaluate_selected", "re-evaluation", lengths, eval_gpus, "the rule's runtime"))
    return kinds


def _profile_settings(profile: Path) -> dict:
    """A Snakemake profile's ``config.yaml``."""
    path = profile / "config.yaml"
    try:
        return load_yaml(path.read_text(), f"--profile: {str(path)!r}") or {}
    except OSError as err:
        raise ConfigError(f"--profile: cannot read {str(path)!r} ({err.__class__.__name__})") from None


def profile_retries(profile: Path | None) -> int:
    """How often a Snakemake profile has a failed job retried (``retries``); 0 where it says nothing, or with no
    profile."""
    retries = _profile_settings(profile).get("retries") if profile is not None else None
    return retries if isinstance(retries, int) and retries >= 0 else 0


def profile_runtimes(profile: Path) -> dict[str, float]:
    """Each rule's Slurm time limit in hours from a Snakemake profile's ``config.yaml`` (``set-resources`` over
    ``default-resources``; runtime in minutes); ``"*"``: the default."""
    data = _profile_settings(profile)
    limits = {}
    default = _runtime(data.get("default-resources"))
    if default is not None:
        limits["*"] = default / 60
    for rule, resources in (data.get("set-resources") or {}).items():
        minutes = _runtime(resources)
        if minutes is not None:
            limits[rule] = minutes / 60
    return limits


def _runtime(resources) -> float | None:
    """A resources entry's runtime in minutes: a mapping, or Snakemake's list of ``name=value`` strings."""
    if isinstance(resources, list):
        resources = dict(item.split("=", 1) for item in resources if "=" in item)
    value = (resources or {}).get("runtime")
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def job_lines(kinds: list[JobKind], limits: dict[str, float] | None, profile: str | None) -> list[str]:
    """The table ``graft plan`` prints, GPU-hours per kind of job, and one warning per rule whose longest job
    exceeds its limit."""

    def hours(value: float | None, digits: int = 1) -> str:
        return "?" if value is None else f"{value:,.{digits}f}"

    where = f"limits from {profile}" if profile else "no Slurm profile read (--profile)"
    lines = [f"jobs per rule (hours; {where}; ? where a figure it rests on is missing):"]
    lines.append(f"  {'rule':<22}{'jobs':>6}{'GPUs/job':>10}{'longest job':>13}{'limit':>8}{'GPU-hours':>11}")
    for k in kinds:
        limit = None if limits is None else limits.get(k.rule, limits.get("*"))
        lines.append(
            f"  {k.rule:<22}{len(k.lengths):>6}{k.gpus:>10}{hours(k.longest):>13}{hours(limit):>8}"
            f"{hours(k.gpu_hours, 0):>11}"
        )
    totals = {}
    for k in kinds:
        if k.lengths:
            known = totals.get(k.kind, 0.0)
            totals[k.kind] = None if known is None or k.gpu_hours is None else known + k.gpu_hours
    lines.append("GPU-hours: " + ", ".join(f"{kind} {hours(total, 0)}" for kind, total in totals.items()))
    return lines + [f"warning: {line}" for line in over_limits(kinds, limits or {})]


def over_limits(kinds: list[JobKind], limits: dict[str, float]) -> list[str]:
    """One line per rule whose longest job exceeds its limit (hours; ``"*"``: every other rule's)."""
    lines = []
    for k in kinds:
        limit = limits.get(k.rule, limits.get("*"))
        if limit is not None and k.longest is not None and k.longest > limit:
            lines.append(
                f"{k.rule} jobs take up to {k.longest:.1f} h, more than their limit of {limit:.1f} h; "
                f"shorten them with {k.split}"
            )
    return lines
