"""The disk a config's outputs take, kind by kind, from the models' sizes and the config's counts.

``graft plan`` prints it before anything is submitted: checkpoints (each model's ``from_pretrained`` weights in its
dtype, ``checkpoint_steps`` of them per run), resume state (float32 weights and AdamW's two moments in the newest
``train.resumable_checkpoints``, and in an interim checkpoint while a run lasts), trajectories (every response
sampled in training, stored per step) and evaluations (one JSON per checkpoint and model, with its copies). Three
figures each: the largest cell while it runs (nothing of it removed yet), every cell once the workflow is done
with the config's pruning settings, and every cell with nothing removed. Weights and resume state are exact
counts of the models' tensors; the bytes per stored token and per evaluated problem are estimates, stated beside
them. Nothing here is measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from graft.config import RunConfig
from graft.errors import ConfigError
from graft.planning.job_lengths import problem_count
from graft.planning.memory import DTYPE_BYTES, GB, model_sizes, parameters

RESUME_BYTES_PER_PARAMETER = 12
"""The resume state of one model in one checkpoint: float32 weights and AdamW's two float32 moments (one process's
``optimizer.pt`` with the masters, or a sharded run's model and optimizer shards)."""
TRAJECTORY_BYTES_PER_TOKEN = 12
"""A stored response token: its int32 id, its float32 log-prob and about 4 bytes of text, before Parquet's
compression (an upper bound)."""
EVALUATION_BYTES_PER_SAMPLE = 3
"""One graded sample in an evaluation JSON's per-problem list (``0, ``)."""
EVALUATION_BYTES_PER_PROBLEM = 32
"""A problem's id as a key of the per-problem lists (MATH500's ``"test/algebra/1234.json": [``)."""
KEPT_CHECKPOINTS = 3
"""Checkpoints of a model that pruning keeps at most: the one each selection rule picks (test_best, val_best,
final; graft.train.prune.prune_run), the last among them."""


@dataclass(frozen=True)
class DiskUse:
    """One kind of output, in bytes; None where a figure it rests on is unknown (a model's sizes, a benchmark's
    problem count)."""

    kind: str
    cell: float | None
    """The largest cell while it runs (its checkpoints not yet pruned, its resume state not yet removed)."""
    kept: float | None
    """Every cell once the workflow is done, under the config's ``train.keep_resume_state`` and
    ``workflow.keep_checkpoints``."""
    everything: float | None
    """Every cell with nothing removed (both settings true)."""


def checkpoint_bytes(cfg: RunConfig, model: str) -> float | None:
    """A checkpoint's ``from_pretrained`` weights of ``model`` in its dtype (tied embeddings stored once)."""
    sizes = model_sizes(cfg, model)
    return None if sizes is None else float(parameters(sizes) * DTYPE_BYTES[cfg.models[model].dtype])


def resume_bytes(cfg: RunConfig, model: str) -> float | None:
    """The resume state of ``model`` in one checkpoint."""
    sizes = model_sizes(cfg, model)
    return None if sizes is None else float(parameters(sizes) * RESUME_BYTES_PER_PARAMETER)


def trajectory_bytes(cfg: RunConfig, n: int) -> float:
    """One model's stored responses over a run: ``n`` per prompt, ``train.prompts_per_step`` prompts a step, each
    of ``workflow.mean_response_tokens`` (else the maximum)."""
    tokens = cfg.workflow.mean_response_tokens or cfg.train.max_response_tokens
    return float(cfg.train.steps * cfg.train.prompts_per_step * n * tokens * TRAJECTORY_BYTES_PER_TOKEN)


def evaluation_bytes(cfg: RunConfig) -> float | None:
    """One evaluation JSON (a checkpoint of one model on every benchmark and the validation set)."""
    if cfg.eval is None:
        return 0.0
    files = [*cfg.eval.benchmarks.values(), *([cfg.eval.validation] if cfg.eval.validation else [])]
    counts = [problem_count(f) for f in files]
    if any(c is None for c in counts):
        return None
    return float(sum(counts) * (cfg.eval.k * EVALUATION_BYTES_PER_SAMPLE + EVALUATION_BYTES_PER_PROBLEM))


def _total(values) -> float | None:
    values = list(values)
    return None if any(v is None for v in values) else float(sum(values))


def _times(count: float, value: float | None) -> float | None:
    return None if value is None else count * value


def disk_use(
    cfg: RunConfig, cells, steps: list[int], base_evaluations: list[str], footprints: list | None = None
) -> list[DiskUse]:
    """Each kind of output of ``cells`` (graft.planning.plan.TrainingCell) with checkpoint ``steps``, then the total;
    ``base_evaluations``: the model of each evaluation of a base model. ``footprints``, when given, receives each
    cell's (while it runs, kept) total, in the order of ``cells``."""
    from graft.methods import get_method

    t, w = cfg.train, cfg.workflow
    ckpt = {m: checkpoint_bytes(cfg, m) for m in cfg.models}
    resume = {m: resume_bytes(cfg, m) for m in cfg.models}
    evaluation = evaluation_bytes(cfg)
    resumable = min(t.resumable_checkpoints, len(steps))
    interim = 1 if t.checkpoint_minutes is not None else 0
    kept_checkpoints = len(steps) if w.keep_checkpoints else min(KEPT_CHECKPOINTS, len(steps))
    # an evaluation job's result is also in its part directory and kept beside the run; in training, one copy
    copies = 1 if w.eval_in_train else 3
    selection_runs = cfg.eval.selection_runs if cfg.eval else 0

    def cell_kinds(cell) -> dict[str, tuple[float | None, float | None, float | None]]:
        """(while it runs, kept, nothing removed) of each kind for one cell."""
        weights = _total(ckpt[m] for m in cell.models)
        state = _total(resume[m] for m in cell.models)
        n = get_method(cell.method, cfg.methods).n
        stored = _total(trajectory_bytes(cfg, n) for _ in cell.models)
        evaluations = _times(len(cell.models) * (len(steps) * copies + 2 * selection_runs), evaluation)
        return {
            "checkpoints": (
                _times(len(steps) + interim, weights),
                _times(kept_checkpoints, weights),
                _times(len(steps), weights),
            ),
            "resume state": (
                _times(resumable + interim, state),
                _times(resumable if t.keep_resume_state else 0, state),
                _times(resumable, state),
            ),
            "trajectories": (stored, stored, stored),
            "evaluations": (evaluations, evaluations, evaluations),
        }

    per_cell = [cell_kinds(c) for c in cells]
    base = _times(len(base_evaluations), evaluation)
    if footprints is not None:
        footprints.extend((_total(each[k][0] for k in each), _total(each[k][1] for k in each)) for each in per_cell)
    kinds = list(per_cell[0]) if per_cell else []
    peaks = [_total(each[k][0] for k in kinds) for each in per_cell]
    largest = None if not per_cell or None in peaks else per_cell[peaks.index(max(peaks))]
    uses = []
    for k in kinds:
        extra = base if k == "evaluations" else 0.0
        uses.append(
            DiskUse(
                k,
                None if largest is None else largest[k][0],
                _total([*(c[k][1] for c in per_cell), extra]),
                _total([*(c[k][2] for c in per_cell), extra]),
            )
        )
    uses.append(
        DiskUse(
            "total",
            _total(u.cell for u in uses),
            _total(u.kept for u in uses),
            _total(u.everything for u in uses),
        )
    )
    return uses


def disk_lines(cfg: RunConfig, uses: list[DiskUse], steps: list[int]) -> list[str]:
    """The table ``graft plan`` prints, and what its "kept" column assumes."""

    def gb(value: float | None) -> str:
        return "?" if value is None else f"{value / GB:,.1f}"

    t, w = cfg.train, cfg.workflow
    lines = [
        "disk (GB; graft/planning/disk.py says what each output holds; ? where a model's sizes or a benchmark's size "
        "is unknown):",
        f"  {'output':<16}{'largest cell':>16}{'all cells, kept':>18}{'nothing removed':>18}",
    ]
    lines += [f"  {u.kind:<16}{gb(u.cell):>16}{gb(u.kept):>18}{gb(u.everything):>18}" for u in uses]
    resume = (
        "the resume state (train.keep_resume_state: true)"
        if t.keep_resume_state
        else "no resume state once a run is done (train.keep_resume_state: false)"
    )
    checkpoints = (
        f"all {len(steps)} checkpoints of every model (workflow.keep_checkpoints: true)"
        if w.keep_checkpoints
        else f"of each model's {len(steps)} checkpoints at most {min(KEPT_CHECKPOINTS, len(steps))} once its cell "
        "is evaluated, each selection rule's and the last (workflow.keep_checkpoints: false)"
    )
    return [*lines, f"  kept: {resume};", f"        {checkpoints}"]


def peak_bytes(footprints: list[tuple[float | None, float | None]], base: float, in_flight: int) -> float | None:
    """An upper bound of the workflow's disk at any moment when at most ``in_flight`` cells have started training
    and are not yet pruned: every cell's kept outputs and the base models' evaluations (``base``, bytes), plus what
    the ``in_flight`` cells that hold the most beyond their kept outputs hold while they run."""
    if any(r is None or k is None for r, k in footprints):
        return None
    extra = sorted((r - k for r, k in footprints), reverse=True)
    return float(sum(extra[:in_flight]) + sum(k for _, k in footprints) + base)


def cells_in_flight(cfg: RunConfig, footprints: list[tuple[float | None, float | None]], base: float) -> int:
    """How many cells may be in flight (training, or trained and not yet pruned) at once: every cell without
    ``workflow.disk_budget_gb``, else the most whose peak stays within it. A budget below one cell's peak, or below
    what the workflow keeps at its end, is refused with one line."""
    budget = cfg.workflow.disk_budget_gb
    if budget is None or not footprints:
        return len(footprints)
    if peak_bytes(footprints, base, 1) is None:
        raise ConfigError(
            f"workflow.disk_budget_gb: {budget:g} GB cannot be planned: a model's sizes or a benchmark's problem "
            "count is unknown (graft plan shows ?); make the models and benchmarks readable, or drop the budget"
        )
    if cfg.workflow.keep_checkpoints:
        everything = _total([*(r for r, _ in footprints), base])
        if everything is not None and everything > budget * GB:
            raise ConfigError(
                f"workflow.disk_budget_gb: {budget:g} GB is less than the {everything / GB:,.1f} GB that every "
                "checkpoint kept takes (workflow.keep_checkpoints: true); expected a budget of at least that, or "
                "workflow.keep_checkpoints: false"
            )
        return len(footprints)
    fits = [k for k in range(1, len(footprints) + 1) if (peak_bytes(footprints, base, k) or 0) <= budget * GB]
    if not fits:
        least = peak_bytes(footprints, base, 1)
        raise ConfigError(
            f"workflow.disk_budget_gb: {budget:g} GB is less than the {least / GB:,.1f} GB the workflow needs with one "
            "cell in flight at a time (every cell's kept outputs and the largest cell while it runs); expected at "
            "least that"
        )
    return max(fits)
