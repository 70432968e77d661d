"""The workflow's cells from a config: what ``snakemake all`` will train and evaluate, and what it will cost.

Every cell (method x model or pair x seed) is one directory ``runs/<method>/<cell>/seed<S>``; the Snakefile
asks this module for the list, and ``graft plan`` prints it with an estimate of GPU-hours before anyone submits.
"""

from __future__ import annotations

import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from graft.config import RunConfig, model_groups
from graft.engine.prompts import prompt_format
from graft.errors import ConfigError
from graft.methods import get_method, group_problem
from graft.planning.data import check_data
from graft.planning.disk import (
    cells_in_flight,
    disk_lines,
    disk_use,
    evaluation_bytes,
    peak_bytes,
    resume_bytes,
)
from graft.planning.job_lengths import job_hours, job_kinds, job_lines, profile_runtimes
from graft.planning.memory import (
    DTYPE_BYTES,
    GB,
    VLLM_MAX_NUM_SEQS,
    Held,
    Phase,
    cell_held,
    cell_phases,
    engine_share_bytes,
    group_processes,
    kv_bytes_per_token,
    kv_cache_tokens,
    model_sizes,
    rollout_kv_tokens,
    shards_per_model,
)
from graft.planning.site import check_time_limit, runtime_asks, runtime_hours
from graft.planning.step_time import (
    DEADLINE_FLOOR_S,
    FIRST_STEP_ALLOWANCE,
    cell_steps,
    gpu_rates,
    longest_step_seconds,
    step_deadline_s,
    step_seconds,
    tokens_scale,
)
from graft.planning.turns import waits
from graft.results import ResultsTree, RunDir, replay_cell


@dataclass(frozen=True)
class TrainingCell:
    method: str
    cell: str
    """A model name, a pair name, or "<receiver>_from_<peer>" for archive replay."""
    seed: int
    models: tuple[str, ...]
    peer: str | None = None
    """Replay: the model whose stored grpo_n8 run is replayed."""

    def run_dir(self, tree: ResultsTree) -> RunDir:
        return tree.run(self.method, self.cell, self.seed)

    def archive(self, tree: ResultsTree) -> Path | None:
        """The peer's stored trajectories that this replay cell reads."""
        return None if self.peer is None else tree.archive(self.peer, self.seed)


def training_cells(cfg: RunConfig) -> list[TrainingCell]:
    w = cfg.workflow
    baseline_models = set(cfg.models if w.baseline_models is None else w.baseline_models)
    baseline_pairs = set(cfg.pairs if w.baseline_pairs is None else w.baseline_pairs)
    cells = []

    def add(method: str, cell: str, models: tuple[str, ...], peer: str | None = None) -> None:
        cells.extend(TrainingCell(method, cell, s, models, peer) for s in w.seeds_of(method, cell, models))

    for model in cfg.models:
        for method in w.grpo:
            if method == "grpo_n8" or model in baseline_models:
                add(method, model, (model,))
    for pair, (a, b) in cfg.pairs.items():
        for method in w.pair_methods:
            if method == "graft" or pair in baseline_pairs:
                add(method, pair, (a, b))
        if w.replay and pair in baseline_pairs:
            for receiver, peer in ((a, b), (b, a)):
                add("replay", replay_cell(receiver, peer), (receiver,), peer)
    for group, members in cfg.groups.items():
        for method in w.group_methods:
            add(method, group, tuple(members))
    ablated = cfg.ablations_pair()
    if ablated is not None:
        for method in w.ablations:
            add(method, ablated, tuple(cfg.pairs[ablated]))
    if w.only_methods is not None:
        cells = only_methods(cells, w.only_methods)
    stored = {(c.cell, c.seed) for c in cells if c.method == "grpo_n8"}
    for c in cells:
        if c.peer is not None and (c.peer, c.seed) not in stored:
            raise ConfigError(
                f"workflow: replay cell {c.cell} seed {c.seed} needs {c.peer}'s grpo_n8 run of seed {c.seed}, which"
                f" is not planned; give replay (method_seeds) or {c.models[0]} (cell_seeds) seeds that {c.peer}'s"
                " grpo_n8 trains"
            )
        method = get_method(c.method, cfg.methods)  # every preset must resolve before anything runs
        problem = group_problem(method) if len(c.models) > 2 else None
        if problem:
            raise ConfigError(f"workflow.group_methods: {c.method!r} cannot train group {c.cell}: {problem}")
    check_memory(cfg, cells)
    check_engines(cfg, cells)
    check_time_limit(cfg, cells)
    return cells


def disk_order(cfg: RunConfig, cells: list[TrainingCell]) -> list[TrainingCell]:
    """The cells in the order they take turns under ``workflow.disk_budget_gb``: rule all's first (with the GRPO
    runs its replay cells read), then the rest, each part with the replay cells after every run they could read,
    so that a cell waits only on cells before it and no turn waits on itself."""
    main = set(main_cells(cfg, cells))
    peers = {(c.peer, c.seed) for c in main if c.peer is not None}
    first = [
        c for c in cells if c.peer is None and (c in main or (c.method == "grpo_n8" and (c.cell, c.seed) in peers))
    ]
    rest = [c for c in cells if c not in first]
    return [
        *first,
        *(c for c in rest if c.peer is not None and c in main),
        *(c for c in rest if c.peer is None),
        *(c for c in rest if c.peer is not None and c not in main),
    ]


def disk_turns(
    cfg: RunConfig, cells: list[TrainingCell], failed: dict[TrainingCell, str] | None = None
) -> tuple[int, dict[TrainingCell, TrainingCell]]:
    """How many cells may be in flight at once under ``workflow.disk_budget_gb`` (graft.planning.disk), and for
    each cell that must wait its turn, the cell whose pruning it waits for (the one that many places before it in
    ``disk_order``; graft.planning.turns.waits moves the cells that waited for one that ``failed`` for good, with
    the time it first did). Without a budget, or with every checkpoint kept, no cell waits."""
    ordered = disk_order(cfg, cells)
    footprints: list = []
    disk_use(cfg, ordered, checkpoint_steps(cfg), base_evaluations(cfg), footprints)
    k = cells_in_flight(cfg, footprints, _base_bytes(cfg))
    if cfg.workflow.keep_checkpoints:
        return k, {}
    runs = {(c.cell, c.seed): c for c in cells if c.method == "grpo_n8"}
    sources = {c: runs[(c.peer, c.seed)] for c in cells if c.peer is not None}
    return k, waits(ordered, k, failed or {}, sources)


def _base_bytes(cfg: RunConfig, base: list[str] | None = None) -> float:
    """The evaluations of base models (``base``: the model of each; every one of the config where None)."""
    evaluation = evaluation_bytes(cfg)
    return 0.0 if evaluation is None else len(base_evaluations(cfg) if base is None else base) * evaluation


FREE_SHARE = 0.9
"""The budget a workflow that does not fit is told to set: this share of what it may use where ``results:`` points
(the free space and what the tree already holds), the rest left for what the plan does not count (the downloaded
models, logs, Snakemake's records) and for the file system's other users."""


def _tb(value: float | None) -> str:
    return "?" if value is None else f"{value / 1e12:,.2f} TB"


def _in_flight(count: int) -> str:
    return f"all {count} cells" if count != 1 else "its one cell"


def peak_lines(cfg: RunConfig, cells: list[TrainingCell], base: list[str] | None = None) -> list[str]:
    """The peak disk of ``cells`` and the evaluations of ``base`` models (every one of the config where None) as
    ``graft plan`` prints it: with every cell in flight, and under the budget; the free space where ``results:``
    points, and a warning where the peak does not fit there (``disk_problem``)."""
    footprints: list = []
    base = base_evaluations(cfg) if base is None else base
    disk_use(cfg, cells, checkpoint_steps(cfg), base, footprints)
    base_bytes = _base_bytes(cfg, base)
    every = peak_bytes(footprints, base_bytes, len(cells))
    lines = [f"  peak: {_tb(every)} with {_in_flight(len(cells))} in flight (trained, not yet pruned)"]
    budget = cfg.workflow.disk_budget_gb
    if budget is not None and not cfg.workflow.keep_checkpoints and cells:
        k = cells_in_flight(cfg, footprints, base_bytes)
        lines.append(
            f"  peak under workflow.disk_budget_gb ({budget:,g} GB): {_tb(peak_bytes(footprints, base_bytes, k))}, "
            f"with at most {k} cells in flight: each cell starts training once the cell {k} places before it is pruned"
        )
    problem = disk_problem(cfg, cells, base)
    if problem is not None:
        lines.append(f"  warning: {problem}")
    elif (free := free_bytes(cfg.results)) is not None:
        lines.append(f"  {cfg.results}: {_tb(free)} free")
    return [*lines, *resume_write_lines(cfg, cells)]


def disk_problem(cfg: RunConfig, cells: list[TrainingCell], base: list[str] | None = None) -> str | None:
    """Why the results tree will not fit where ``results:`` points, in one line naming the
    ``workflow.disk_budget_gb`` to set, or None: the peak of ``cells`` and the evaluations of ``base`` models (every
    one of the config where None), every cell in flight or under the budget, against what the tree may use there,
    the file system's free space and what it already holds (a resumed workflow's outputs are part of its peak). A
    quota, which the free space does not show, is the user's to read (docs/paper-on-slurm.md). The workflow stops
    on it before any job; a dry run and ``graft plan`` warn."""
    footprints: list = []
    base = base_evaluations(cfg) if base is None else base
    disk_use(cfg, cells, checkpoint_steps(cfg), base, footprints)
    base_bytes = _base_bytes(cfg, base)
    budget = cfg.workflow.disk_budget_gb
    budgeted = budget is not None and not cfg.workflow.keep_checkpoints and bool(cells)
    peak = peak_bytes(footprints, base_bytes, cells_in_flight(cfg, footprints, base_bytes) if budgeted else len(cells))
    free = free_bytes(cfg.results)
    if peak is None or free is None or peak <= free:
        return None
    held = tree_bytes(cfg.results)
    if peak <= free + held:
        return None
    where = f"{cfg.results}: {_tb(free)} free" + (f" and {_tb(held)} in its results" if held else "")
    of = f"under workflow.disk_budget_gb ({budget:,g} GB)" if budgeted else f"with {_in_flight(len(cells))} in flight"
    fits = math.floor(FREE_SHARE * (free + held) / GB)
    least = peak_bytes(footprints, base_bytes, 1)
    if least is not None and least > fits * GB:
        fix = f"one cell in flight at a time needs {_tb(least)}: point results: at storage with that much free"
    else:
        fix = (
            f"set workflow.disk_budget_gb: {fits} ({FREE_SHARE:.0%} of that), below your quota (docs/paper-on-slurm.md)"
        )
    return f"{where}, less than the workflow's peak of {_tb(peak)} {of}; {fix}"


def free_bytes(results: str) -> float | None:
    """Free space on the file system that holds (or will hold) ``results``: its nearest existing directory's."""
    path = Path(results).resolve()
    while not path.exists():
        path = path.parent
    try:
        return float(shutil.disk_usage(path).free)
    except OSError:
        return None


def tree_bytes(results: str) -> float:
    """What the files under ``results`` hold, in bytes; 0 where it does not exist. Links are not followed."""
    total, stack = 0, [str(results)]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
    return float(total)


def resume_write_lines(cfg: RunConfig, cells: list[TrainingCell]) -> list[str]:
    """How much resume state a training job writes an hour, and how long each save takes, for the largest cell."""
    sizes = [sum(resume_bytes(cfg, m) or 0.0 for m in c.models) for c in cells]
    if not sizes or not max(sizes):
        return []
    largest, bandwidth = max(sizes), cfg.slurm.save_gb_per_s
    seconds = largest / (bandwidth * GB)
    minutes = cfg.train.checkpoint_minutes
    if minutes is None:
        when = f"with every checkpoint (train.checkpoint_every: {cfg.train.checkpoint_every} steps)"
        rate = ""
    else:
        when = f"every {minutes:g} minutes (train.checkpoint_minutes), on a stop signal and at the last step"
        rate = f"; {largest * 60 / minutes / GB:,.0f} GB an hour"
    return [
        f"  resume state (float32 weights and AdamW moments): {largest / GB:,.1f} GB a save for the largest cell, "
        f"written {when}{rate}; {seconds:,.0f} s a save at slurm.save_gb_per_s {bandwidth:g} GB/s"
    ]


def only_methods(cells: list[TrainingCell], methods: list[str]) -> list[TrainingCell]:
    """The ``cells`` of ``methods`` (``workflow.only_methods``); a method that schedules no cell is refused."""
    scheduled = sorted({c.method for c in cells})
    for name in methods:
        if name not in scheduled:
            raise ConfigError(
                f"workflow.only_methods: {name!r} is no method this config schedules; allowed: {', '.join(scheduled)}"
            )
    return [c for c in cells if c.method in methods]


def check_engines(cfg: RunConfig, cells: list[TrainingCell]) -> None:
    """Refuse, before anything is submitted, a model that the jobs' vLLM CPU build has no attention kernel for
    (the jobs' environment: ``workflow.environment``, else this one)."""
    from graft.engine.vllm_builds import cpu_head_size_problem, environment_build

    if cfg.scale.rollout != "vllm" or environment_build(cfg.workflow.environment) != "cpu":
        return
    for name in dict.fromkeys(m for c in cells for m in c.models):
        sizes = model_sizes(cfg, name)
        problem = sizes and cpu_head_size_problem(name, sizes.head_dim)
        if problem:
            raise ConfigError(problem)


def memory_plans(cfg: RunConfig, cells: list[TrainingCell]) -> dict[tuple[str, ...], list[Phase] | None]:
    """The memory plan of each set of models that some cell trains together: it depends on the models and on
    whether a method of theirs keeps a reference model."""
    return {models: cell_phases(cfg, models, ref) for models, ref in reference_models(cfg, cells).items()}


def reference_models(cfg: RunConfig, cells: list[TrainingCell]) -> dict[tuple[str, ...], bool]:
    """Each set of models trained together, and whether some cell of theirs keeps a frozen reference model (a
    method with a KL term)."""
    refs: dict[tuple[str, ...], bool] = {}
    for c in cells:
        refs[c.models] = refs.get(c.models, False) or get_method(c.method, cfg.methods).kl_coef > 0
    return refs


def rollout_batches(cfg: RunConfig, cells: list[TrainingCell]) -> dict[str, tuple[int, int]]:
    """Each model's largest rollout on one engine, as (prompts, samples per prompt): a process samples every
    ``group_processes``-th prompt of the step's batch, n times each (dynamic sampling's extra draws are batches
    of the same size, one after another)."""
    batches: dict[str, tuple[int, int]] = {}
    for c in cells:
        prompts = -(-cfg.train.prompts_per_step // group_processes(cfg, c.models))
        n = get_method(c.method, cfg.methods).n
        for m in c.models:
            if prompts * n > math.prod(batches.get(m, (0, 0))):
                batches[m] = (prompts, n)
    return batches


def check_memory(cfg: RunConfig, cells: list[TrainingCell]) -> None:
    """Refuse, before anything is submitted, a config in which some cell's phase needs more than one of its jobs'
    GPUs has (``RunConfig.gpu``); CPU jobs have no GPU to check."""
    gpu = cfg.gpu()
    if gpu is None:
        return
    for models, phases in memory_plans(cfg, cells).items():
        for phase in phases or []:
            if phase.gb > gpu.memory_gb:
                raise ConfigError(
                    f"memory: the {phase.name} phase of {' + '.join(models)} needs {phase.gb:.1f} GB per GPU, more "
                    f"than scale.gpu_memory_gb = {gpu.memory_gb:g} GB; lower {phase.setting}"
                    + (" or raise scale.processes" if phase.setting != "scale.processes" else "")
                    + (" or scale.nodes" + split_hint(cfg, models))
                )


def gpu_ask_problem(cfg: RunConfig) -> str | None:
    """Why the config's jobs would work on GPUs they do not ask Slurm for (``RunConfig.gpu_ask_problem``, told the
    vLLM build of the jobs' environment: ``workflow.environment``, else this one), or None."""
    from graft.engine.vllm_builds import environment_build

    if cfg.scale.rollout != "vllm" or cfg.slurm.gpus:
        return cfg.gpu_ask_problem()
    return cfg.gpu_ask_problem(environment_build(cfg.workflow.environment))


def check_gpu_ask(cfg: RunConfig) -> None:
    """Refuse, before anything is submitted, GPU work whose jobs ask Slurm for no GPU (``gpu_ask_problem``)."""
    problem = gpu_ask_problem(cfg)
    if problem:
        raise ConfigError(problem)


def split_hint(cfg: RunConfig, models: tuple[str, ...]) -> str:
    """The split placement as a way to hold co-trained models in less memory per GPU, where it is not in use and
    the engine allows it (DeepSpeed shards over the whole job)."""
    usable = cfg.scale.placement == "colocated" and cfg.scale.engine == "fsdp2" and len(models) > 1
    return " or use scale.placement: split" if usable else ""


def main_cells(cfg: RunConfig, cells: list[TrainingCell]) -> list[TrainingCell]:
    """The training ``cells`` that rule ``all`` runs: those that ``workflow.main_cells`` names (``method/cell``, every
    seed), or every one where it names none."""
    wanted = cfg.workflow.main_cells
    if not wanted:
        return cells
    known = sorted({f"{c.method}/{c.cell}" for c in cells})
    for name in wanted:
        if name not in known:
            raise ConfigError(
                f"workflow.main_cells: {name!r} is no training cell of this config; cells: {', '.join(known)}"
            )
    return [c for c in cells if f"{c.method}/{c.cell}" in wanted]


def base_seeds(cfg: RunConfig, model: str) -> list[int]:
    """Seeds of the base model's evaluations (the seed samples the responses): those of its GRPO n=8 cells, the
    runs that it is compared with."""
    return cfg.workflow.seeds_of("grpo_n8", model, (model,))


def checkpoint_steps(cfg: RunConfig) -> list[int]:
    """Steps at which the trainer saves a checkpoint: every checkpoint_every steps and the last step."""
    every, steps = cfg.train.checkpoint_every, cfg.train.steps
    return sorted({*range(every, steps + 1, every), steps})


def base_evaluations(cfg: RunConfig) -> list[str]:
    """The model of each evaluation of a base model (one per model and seed of its GRPO n=8 cells)."""
    return [model for model in cfg.models for _ in base_seeds(cfg, model)]


def describe(cfg: RunConfig, source: str, profile: Path | None = None) -> str:
    """What ``graft plan`` prints: cells per method, checkpoint evaluations, the data files, the memory plan, the disk
    each kind of output takes, and each rule's jobs with their estimated length beside ``profile``'s limits and
    GPU-hours per kind of job. GPU work whose jobs ask Slurm for no GPU is refused first (``check_gpu_ask``), a bad
    or missing data file after the cells (``check_data``)."""
    from collections import Counter

    check_gpu_ask(cfg)
    cells, steps, base = training_cells(cfg), checkpoint_steps(cfg), base_evaluations(cfg)
    data = check_data(cfg)
    evaluations = sum(len(c.models) for c in cells) * len(steps) + len(base)
    lines = [f"config {source}: {len(cells)} training cells, {evaluations} checkpoint evaluations"]
    main = main_cells(cfg, cells)
    if len(main) < len(cells):
        named = ", ".join(cfg.workflow.main_cells)
        lines.append(f"rule all runs {len(main)} of them (workflow.main_cells: {named}); rule full runs every one")
    lines.append(f"{'method':<30} {'cells':>5}")
    lines += [f"{method:<30} {count:>5}" for method, count in Counter(c.method for c in cells).items()]
    if cfg.eval is not None:
        runs = cfg.eval.selection_runs
        again = (
            f"each selected checkpoint (report.selection: {cfg.report.selection}) then evaluated {runs} more times"
            if runs
            else "selected checkpoints scored by the evaluation that selected them (eval.selection_runs: 0)"
        )
        samples = f"{cfg.eval.k} sample{'s' * (cfg.eval.k != 1)}"
        lines.append(f"evaluation: {samples} per problem; {again}")
        lines.append(f"{sum(len(c.models) for c in cells) * runs} re-evaluations of selected checkpoints")
        gpu = cfg.gpu()
        if cfg.scale.rollout == "vllm" and gpu is not None:
            share = cfg.eval.vllm_memory
            lines.append(
                f"evaluation memory: one vLLM engine per job at a time, eval.vllm_memory {share:g} of its GPU "
                f"({share * gpu.memory_gb:.1f} of {gpu.memory_gb:g} GB); a job of several models stops one model's "
                "engine before it starts the next's"
            )
    lines += data
    lines += [f"prompt of {name}: {text}" for name, text in model_prompts(cfg).items()]
    lines += gpu_lines(cfg)
    lines += memory_lines(cfg, cells)
    lines += disk_lines(cfg, disk_use(cfg, cells, steps, base), steps)
    lines += peak_lines(cfg, cells)
    lines += estimate_basis(cfg)
    lines.append(deadline_line(cfg))
    lines += step_lines(cfg, cells)
    kinds = job_kinds(cfg, cells, steps, base)
    lines += job_lines(kinds, *rule_limits(cfg, kinds, profile))
    lines += ask_lines(cfg, cells, steps)
    return "\n".join(lines)


def ask_lines(cfg: RunConfig, cells: list[TrainingCell], steps: list[int]) -> list[str]:
    """The time limits the GPU jobs ask Slurm for, per rule, where their lengths are predicted
    (graft.planning.site.runtime_asks; a dry run with ``--quiet host`` lists each job's)."""
    asks = runtime_asks(cfg, cells, job_hours(cfg, cells, steps))
    if not asks:
        return []
    spans = []
    for rule, minutes in asks.items():
        least, most = min(minutes.values()) / 60, max(minutes.values()) / 60
        spans.append(f"{rule} {least:.1f} h" if least == most else f"{rule} {least:.1f}-{most:.1f} h")
    return [
        f"time limits asked (hours; the predicted length x slurm.runtime_factor {cfg.slurm.runtime_factor:g}, a "
        f"training job's plus its stop lead, within the site's limit): {', '.join(spans)}"
    ]


def rule_limits(cfg: RunConfig, kinds, profile: Path | None) -> tuple[dict[str, float] | None, str | None]:
    """Each rule's time limit in hours, as Snakemake sets it: the profile's ``set-resources`` over the config's
    ``slurm`` section (graft.planning.site) over the profile's ``default-resources`` (``"*"``); and where they come
    from. None where neither gives one."""
    limits = {} if profile is None else profile_runtimes(profile)
    from_config = {k.rule: hours for k in kinds if (hours := runtime_hours(cfg, k.rule)) is not None}
    for rule, hours in from_config.items():
        limits.setdefault(rule, hours)
    where = [*(["the config's slurm section"] if from_config else []), *([str(profile)] if profile else [])]
    return (limits, " and ".join(where)) if where else (None, None)


def gpu_lines(cfg: RunConfig) -> list[str]:
    """The GPU the plan plans with (``RunConfig.gpu``), each figure with its source: measured, a datasheet, assumed
    or the config's."""
    gpu = cfg.gpu()
    if gpu is None:
        return ["GPU: none, the jobs run on CPUs (slurm.gpus: false)"]
    return ["GPU figures of the plan (graft/config/gpus.py):", *(f"  {source}" for source in gpu.sources)]


def estimate_basis(cfg: RunConfig) -> list[str]:
    """What the job lengths rest on, each figure with its source."""
    w = cfg.workflow
    rates = gpu_rates(cfg)
    if rates is None and not w.generation_tokens_per_s:
        return [f"job lengths: not estimated: no step time ({unpriced(cfg)}) and no workflow.generation_tokens_per_s"]
    speed = tokens_scale(cfg)
    scaled = f", an H200's x {speed:.2f}" if speed != 1 else ""

    def per_model(rates: dict[str, float]) -> str:
        return ", ".join(f"{m} {r * speed:,.0f}" for m, r in rates.items()) or "none"

    response = (
        f"{w.mean_response_tokens:,} (workflow.mean_response_tokens)"
        if w.mean_response_tokens
        else f"{cfg.eval_response_tokens():,}, the maximum"
    )
    lines = ["job lengths rest on:"]
    lines += [f"  {source}" for source in (rates.sources if rates else ())]
    lines += [
        f"  rollout tokens/s per GPU (workflow.rollout_tokens_per_s{scaled}): {per_model(w.rollout_tokens_per_s)}",
        f"  evaluation tokens/s per GPU (workflow.generation_tokens_per_s{scaled}): "
        f"{per_model(w.generation_tokens_per_s)}",
        f"  mean response tokens: {response}",
    ]
    return lines


def unpriced(cfg: RunConfig) -> str:
    """Why the plan prices no step (graft.planning.step_time.gpu_rates is None): CPU jobs, or a GPU without a peak."""
    if cfg.gpu() is None:
        return "the jobs run on CPUs, slurm.gpus: false"
    return "the GPU has no peak: workflow.gpu_peak_tflops, or a slurm.gpu_type that graft/config/gpus.py knows, sets it"


def deadline_line(cfg: RunConfig) -> str:
    """How long a training step may take before its job ends (graft.train.deadline); ``step_lines`` gives each kind
    of cell's."""
    train = cfg.train
    if train.step_deadline_minutes is not None:
        return f"step deadline: {train.step_deadline_minutes:g} minutes, every step (train.step_deadline_minutes)"
    reference = (
        "the longer of its cell's predicted longest step and its slowest step so far (column deadline below, before "
        "any step is measured)"
        if gpu_rates(cfg)
        else f"its slowest step so far (no step time is predicted: {unpriced(cfg)})"
    )
    return (
        f"step deadline: train.step_deadline_factor {train.step_deadline_factor:g} x {reference}, at least "
        f"{DEADLINE_FLOOR_S / 60:g} minutes; a process's first step {FIRST_STEP_ALLOWANCE:g} times that"
    )


def step_lines(cfg: RunConfig, cells: list[TrainingCell]) -> list[str]:
    """Each kind of cell's step under both placements, its parts per model under ``scale.placement`` (what its
    training jobs' lengths rest on), and its step deadline before any step is measured."""
    rates = gpu_rates(cfg)
    if rates is None:
        return []
    placement = cfg.scale.placement
    lines = [
        f"step time per cell (seconds; graft/planning/step_time.py; parts under scale.placement {placement}: "
        "generation + scoring + update + sync per model):"
    ]
    kinds = list(dict.fromkeys((c.method, c.models) for c in cells))
    width = max(len(m) for m, _ in kinds) + 2
    lines.append(f"  {'method':<{width}}{'models':<28}{'colocated':>10}{'split':>8}{'deadline':>10}  parts")
    for method, models in kinds:
        steps = {p: cell_steps(cfg, rates, method, models, p) for p in ("colocated", "split")}
        if steps[placement] is None:
            lines.append(f"  {method:<{width}}{' + '.join(models):<28}  ? (no workflow.rollout_tokens_per_s or sizes)")
            continue
        seconds = {p: step_seconds(s, p) for p, s in steps.items()}
        parts = ", ".join(
            f"{m} {s.generation:.0f}+{s.scoring:.0f}+{s.update:.0f}+{s.sync:.0f}"
            for m, s in zip(models, steps[placement], strict=True)
        )
        split = f"{seconds['split']:.0f}" if len(models) > 1 else "-"
        preset = get_method(method, cfg.methods)
        if preset.dynamic_sampling:
            parts += " (a floor: dynamic sampling's extra draws are not priced; the deadline prices them)"
        deadline = step_deadline_s(
            factor=cfg.train.step_deadline_factor,
            minutes=cfg.train.step_deadline_minutes,
            reference_s=longest_step_seconds(cfg, preset, models),
            first=False,
        )
        lines.append(
            f"  {method:<{width}}{' + '.join(models):<28}{seconds['colocated']:>10.0f}{split:>8}{deadline:>10.0f}"
            f"  {parts}"
        )
    return lines


def memory_lines(cfg: RunConfig, cells: list[TrainingCell]) -> list[str]:
    """The memory plan as ``graft plan`` prints it: per set of models trained together, where they run (placement,
    nodes, GPUs, and over how many GPUs each model is sharded) and each phase's peak per GPU."""
    s, gpu = cfg.scale, cfg.gpu()
    if gpu is None:
        return []
    lines = [
        f"placement and memory per GPU (GB of 1e9 bytes; scale.placement: {s.placement}, scale.sharding: "
        f"{s.sharding}, {s.nodes} node(s) x {s.processes} GPU(s) per job, scale.gpu_memory_gb = {gpu.memory_gb:g} "
        "GB, the total CUDA reports; graft/planning/memory.py says what each phase holds):"
    ]
    names = None
    for models, phases in memory_plans(cfg, cells).items():
        split = model_groups(s.placement, len(models)) > 1
        where = (
            f"{'split' if split else 'colocated':<10}{s.nodes:>6}{s.nodes * s.processes:>6}"
            f"{shards_per_model(cfg, models):>8}"
        )
        if phases is None:
            unknown = [m for m in models if model_sizes(cfg, m) is None]
            lines.append(
                f"  {' + '.join(models):<28}{where}  sizes of {', '.join(unknown)} unknown"
                " (no config.json at the model's path yet, no models.<m>.sizes)"
            )
            continue
        if names is None:
            names = [p.name for p in phases]
            head = f"{'placement':<10}{'nodes':>6}{'GPUs':>6}{'shards':>8}"
            lines.append(f"  {'models':<28}{head}" + "".join(f"{n:>13}" for n in names) + f"{'peak':>9}")
        peak = max(p.gb for p in phases)
        lines.append(f"  {' + '.join(models):<28}{where}" + "".join(f"{p.gb:>13.1f}" for p in phases) + f"{peak:>9.1f}")
    return lines + held_lines(cfg, cells) + kv_cache_lines(cfg, cells)


def held_lines(cfg: RunConfig, cells: list[TrainingCell]) -> list[str]:
    """What each GPU holds through every phase, term by term (graft.planning.memory.Held), per set of models."""
    held = {models: cell_held(cfg, models, ref) for models, ref in reference_models(cfg, cells).items()}
    known: dict[tuple[str, ...], Held] = {m: h for m, h in held.items() if h is not None}
    if not known:
        return []
    engine = f"DeepSpeed ZeRO-{cfg.scale.zero_stage}" if cfg.scale.engine == "deepspeed" else "FSDP2"
    columns = ("states", "(grads)", "reference", "contexts", "NCCL", "graphs", "total")
    lines = [
        f"held through every phase (GB per GPU): model states under {engine} (of which gradients), reference "
        "models (a method with a KL term), CUDA contexts (training process and engines), NCCL buffers, the "
        "engines' CUDA graphs:",
        f"  {'models':<28}" + "".join(f"{c:>10}" for c in columns),
    ]
    for models, h in known.items():
        values = [f"{v / GB:.1f}" for v in (h.model_states, h.gradients, h.reference, h.contexts, h.nccl)]
        values[1] = f"({values[1]})"
        values += [f"{h.engines_asleep / GB:.1f}", f"{h.total / GB:.1f}"]
        lines.append(f"  {' + '.join(models):<28}" + "".join(f"{v:>10}" for v in values))
    return lines


def kv_cache_lines(cfg: RunConfig, cells: list[TrainingCell]) -> list[str]:
    """Per model, the KV-cache tokens its vLLM engine keeps at ``scale.vllm_memory`` beside the tokens its largest
    rollout needs at the mean response (``workflow.mean_response_tokens``, else the maximum) and at the maximum,
    and a warning where the cache holds fewer than the mean needs. Nothing where the jobs run vLLM's CPU build,
    whose cache is ``scale.vllm_cpu_kv_cache_mib``."""
    from graft.engine.vllm_builds import environment_build

    s, t, gpu = cfg.scale, cfg.train, cfg.gpu()
    if s.rollout != "vllm" or gpu is None or environment_build(cfg.workflow.environment) == "cpu":
        return []
    cap = s.vllm_max_num_seqs or VLLM_MAX_NUM_SEQS
    capped_by = "scale.vllm_max_num_seqs" if s.vllm_max_num_seqs else "vLLM's default"
    mean = cfg.workflow.mean_response_tokens or t.max_response_tokens
    share = engine_share_bytes(cfg)
    lines = [
        f"vLLM engines' KV cache (tokens): scale.vllm_memory {s.vllm_memory:g} of {gpu.memory_gb:g} GB = "
        f"{share / GB:.1f} GB per engine less its weights, vLLM's profiling peak and its CUDA graphs; beside the "
        f"tokens its largest rollout holds (the prompts a process samples x n, at most {cap:,} sequences at once: "
        f"{capped_by}) with prompts at train.max_prompt_tokens, shared by their samples, and responses "
        f"at the mean ({mean:,}) and the maximum ({t.max_response_tokens:,}):",
        f"  {'model':<28}{'KB/token':>10}{'cache':>12}{'sequences':>18}{'at mean':>12}{'at max':>12}",
    ]
    warnings = []
    known = {m: (model_sizes(cfg, m), batch) for m, batch in rollout_batches(cfg, cells).items()}
    if all(sizes is None for sizes, _ in known.values()):
        return []
    for name, (sizes, (prompts, n)) in known.items():
        if sizes is None:
            continue
        dtype = DTYPE_BYTES[cfg.models[name].dtype]
        running = min(prompts * n, cap)
        cache = kv_cache_tokens(share, sizes, dtype, cap)
        need = rollout_kv_tokens(prompts, running, t.max_prompt_tokens, mean)
        most = rollout_kv_tokens(prompts, running, t.max_prompt_tokens, t.max_response_tokens)
        sequences = f"{running:,} of {prompts * n:,}"
        lines.append(
            f"  {name:<28}{kv_bytes_per_token(sizes, dtype) / 1e3:>10.1f}{cache:>12,}{sequences:>18}{need:>12,}"
            f"{most:>12,}"
        )
        if cache < need:
            warnings.append(
                f"warning: {name}'s engine keeps {cache:,} KV-cache tokens, fewer than the {need:,} its rollout of "
                f"{running:,} sequences at once needs at the mean response: vLLM preempts and recomputes sequences; "
                "raise scale.vllm_memory (within the memory plan) or lower scale.vllm_max_num_seqs"
            )
    return lines + warnings


def model_prompts(cfg: RunConfig) -> dict[str, str]:
    """Each model's prompt for the placeholder problem ``{problem}``, as a Python literal. A model directory that
    exists is checked whole (a half-downloaded one is refused naming the file it lacks), read, and its prompt
    format checked (a format its tokenizer cannot apply is refused here, before anything is submitted); for a
    model still to be fetched, a chat template file of the config is rendered, and a tokenizer's own template is
    named: ``graft fetch model`` checks it once downloaded."""
    prompts = {}
    for name, spec in cfg.models.items():
        fmt = prompt_format(spec)
        if Path(spec.path).exists():
            # here: transformers takes seconds to import, and only a model on disk is read
            from graft.engine.policy import check_model_dir, check_prompt

            check_model_dir(spec.path, f"models.{name}.path", cfg, name)
            prompts[name] = repr(check_prompt(name, spec))
        elif not fmt.chat:
            prompts[name] = repr(fmt.render(None, "{problem}"))
        elif fmt.chat_template is not None:
            prompts[name] = repr(_render_chat_file(fmt.chat_template, fmt.template))
        else:
            prompts[name] = (
                f"{fmt.template!r} as one user message through the chat template of {spec.hub_id or spec.path} "
                "(checked when it is fetched)"
            )
    return prompts


def _render_chat_file(text: str, content: str) -> str:
    """A chat template file rendered for one user message, with the Jinja settings transformers uses."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    message = {"role": "user", "content": content}
    # the tokenizer's own BOS is not known before the download; the placeholder shows where it goes
    return env.from_string(text).render(messages=[message], add_generation_prompt=True, bos_token="<bos>")
