"""The workflow section: which cells are planned, with which seeds, and the figures their job lengths rest on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from graft.names import CellName, MethodName
from graft.typed_config import (
    NON_EMPTY,
    Count,
    FieldError,
    PathText,
    Positive,
    Seed,
    Share,
)


def _ablation_presets() -> list[str]:
    from graft.methods import PRESETS

    return [name for name, p in PRESETS.items() if p.table in ("2a", "2b", "F")]


MAIN_METHODS = ("grpo_n8", "graft")


"""The main comparison's presets, which train ``main_seeds``."""


def preset_seeds(
    method: str,
    main_seeds: list[int],
    other_seeds: list[int],
    method_seeds: dict[str, list[int]],
    cell_seeds: dict[str, list[int]],
    cell: str,
    models: tuple[str, ...],
) -> list[int]:
    """The seeds ``method`` trains with on ``cell`` (a model, a pair, or a replay cell training ``models``): the
    cell's ``cell_seeds`` entry, for a one-model cell (GRPO, replay) else its model's; else the method's
    ``method_seeds`` entry; else main_seeds for grpo_n8 and graft, other_seeds for the rest. The workflow's
    plan and the report's "first run" both ask this."""
    keys = [cell] + (list(models) if len(models) == 1 else [])
    for key in keys:
        if key in cell_seeds:
            return cell_seeds[key]
    if method in method_seeds:
        return method_seeds[method]
    return main_seeds if method in MAIN_METHODS else other_seeds


Seeds = Annotated[list[Seed], NON_EMPTY]


"""A list of seeds, at least one (``_check_seeds``: each once)."""


def _check_seeds(name: str, seeds: list[int]) -> None:
    if len(set(seeds)) != len(seeds):
        raise FieldError(name, f"{seeds} is not allowed; expected distinct seeds")


@dataclass(frozen=True)
class WorkflowSpec:
    """Which cells the workflow runs (docs/design.md section 6); every cell is one output path."""

    grpo: list[str] = field(default_factory=lambda: ["grpo_n8", "grpo_n16", "grpo_n32", "grpo_n8_ds"])
    """Single-model presets: grpo_n8 runs for every model, the others for ``baseline_models`` (grpo_n8_ds:
    dynamic sampling, the paper's Table 5 and Figure 3a)."""
    pair_methods: list[str] = field(default_factory=lambda: ["graft", "hacpo", "sgt"])
    """Co-training presets: graft runs on every pair, the others on ``baseline_pairs``."""
    group_methods: list[str] = field(default_factory=lambda: ["graft"])
    """Presets that run on every group of ``groups`` (GRAFT and the variants a group can run:
    ``graft.methods.group_problem``)."""
    replay: bool = True
    """Archive replay for both directions of every pair of ``baseline_pairs``, from the peer's stored grpo_n8
    run."""
    baseline_models: list[str] | None = None
    """Models that run the single-model presets other than grpo_n8 (larger n). None: every model."""
    baseline_pairs: list[str] | None = None
    """Pairs that run the co-training presets other than graft, and replay. None: every pair. The main
    comparison (grpo_n8 for every model, graft on every pair) always runs in full."""
    ablations: list[str] = field(default_factory=_ablation_presets)
    """Presets run on ``ablation_pair`` only (Table 2 and the delta sweep)."""
    ablation_pair: str | None = None
    """None: the first pair."""
    only_methods: list[str] | None = None
    """The methods whose cells are planned, every other cell that the fields above schedule left out, e.g.
    ``[grpo_n8, graft]``: GRPO n=8 for every model and GRAFT on every pair, nothing else (``replay`` names the
    replay cells). None: every scheduled cell."""
    main_seeds: Seeds = field(default_factory=lambda: [0, 1, 2])
    """Seeds of the main comparison: grpo_n8 and graft."""
    other_seeds: Seeds = field(default_factory=lambda: [0])
    """Seeds of every other cell."""
    method_seeds: dict[MethodName, Seeds] = field(default_factory=dict)
    """Seeds of particular presets (or ``replay``) in place of main_seeds / other_seeds, e.g. ``{grpo_n32: [0]}``
    to keep a costly baseline at one seed while the others run three."""
    cell_seeds: dict[CellName, Seeds] = field(default_factory=dict)
    """Seeds of every cell of particular models or pairs, whatever the method, in place of the above (a model's
    entry covers its GRPO and replay cells, a pair's its co-training cells), e.g. ``{P2: [0], P3: [0], octo: [0]}``
    to spend the seeds on the pair whose comparisons the claims make."""
    main_cells: list[str] = field(default_factory=list)
    """The cells that rule ``all`` trains, evaluates and reports, each as ``method/cell`` with every seed the config
    gives it (e.g. ``[grpo_n8/smol, graft/P1]``), so that the main job can run the comparisons its claims rest on
    while every other cell stays a target of its own; rule ``full`` runs every cell into ``<results>/report_full``.
    Empty: rule ``all`` runs every cell."""
    threads: Count = 1
    """CPU threads per training or evaluation job (the CPU default runs such jobs side by side)."""
    eval_in_train: bool = False
    """Evaluate checkpoints inside the training job as they are saved (CPU: saves a process start and a model
    load per cell); False: one evaluation job per cell, e.g. on one GPU while training holds a node."""
    build_threads: Count = 2
    """CPU threads per toy-model build. On 2 cores two warm-ups side by side at 1 thread each (0.25 s per step each,
    0.6M parameters) get through more steps than one at a time at 2 threads (0.16 s per step)."""
    gpu_peak_tflops: Positive | None = None
    """Dense bf16 TFLOP/s of one GPU, the scale of the step time that ``graft plan``'s training job lengths rest on
    (graft.planning.step_time). None: that of the GPU type ``slurm.gpu_type`` names (graft.config.gpus; an H200's
    is 989, NVIDIA's datasheet), and no training job length for CPU jobs."""
    gpu_speed_vs_h200: Positive | None = None
    """Tokens per second of one GPU over an H200's, the GPU that ``rollout_tokens_per_s`` and
    ``generation_tokens_per_s`` are for: the plan multiplies both by it. None: that of the GPU type
    ``slurm.gpu_type`` names (graft.config.gpus: its memory bandwidth over the H200's). Rates measured on your own
    GPU: give them, and 1 here."""
    model_flops_utilization: Share = 0.3
    """Share of ``gpu_peak_tflops`` that scoring and the update reach, where ``gpu_check`` has not measured it."""
    sync_gb_per_s: Positive = 3.2
    """The weight sync's GB per second (the node's files written and read back), where ``gpu_check`` has not
    measured it: the host's part alone, as bench/benchmarks/weight_sync.py measures it on 2 CPU threads (Qwen3-1.7B
    in bf16 through the buckets to /dev/shm, read back by one engine). The gathers and the copies off and onto the
    GPUs are not in it: the GPU check measures the whole sync."""
    rollout_tokens_per_s: dict[str, Positive] = field(default_factory=dict)
    """Tokens per second one H200 samples for a model during training (its engine beside the trainer, at
    ``scale.vllm_memory``), per model name, for the step time, scaled to the jobs' GPU (``gpu_speed_vs_h200``); a
    model without an entry gets no training length."""
    mean_prompt_tokens: Count | None = None
    """Mean length of a prompt in tokens, its template included, for the step time; None: the maximum."""
    exchange_share: Share = 0.1
    """Share of a step's prompts on which a receiver takes a peer's responses under a selective rule (GRAFT's
    complementary groups, SGT's failures), for the scoring those responses add to a step."""
    gpu_check: PathText | None = None
    """A ``bench/checks/gpu_check.py`` report (JSON, relative to the working directory) whose measured utilization and
    sync bandwidth replace ``model_flops_utilization`` and ``sync_gb_per_s``; None, or a file not there: those."""
    generation_tokens_per_s: dict[str, Positive] = field(default_factory=dict)
    """Tokens per second one H200 generates for a model (every sequence of an evaluation in flight), per model name,
    for the job lengths ``graft plan`` prints, scaled to the jobs' GPU (``gpu_speed_vs_h200``); a model without an
    entry gets no estimate."""
    mean_response_tokens: Count | None = None
    """Mean length of a generated response, for ``graft plan``; None: the maximum (an upper bound)."""
    eval_checkpoints_per_job: Count | None = None
    """Checkpoints that one evaluation job evaluates (for every model of its cell), so that a cell's evaluation
    runs as several jobs, each within its Slurm limit; None: one job per cell."""
    environment: PathText | None = None
    """A Python environment (a venv or conda prefix; ``bash requirements/gpu-env.sh DIR`` builds the GPU one) whose
    ``bin/`` comes first on the PATH of every job's commands, so that no job runs in whatever environment
    submitted it; Snakemake refuses to start when it has no ``bin/graft``. None: the environment Snakemake runs
    in (the CPU default)."""
    fetch_on_submit_host: bool = True
    """Run the download rules (``fetch_model``, ``fetch_dataset``) on the machine that runs Snakemake
    (``localrules``): on many clusters compute nodes have no internet. False: submit them like other jobs."""
    keep_checkpoints: bool = False
    """Keep every checkpoint's model directories once the cell is evaluated. False: after a cell's last evaluation
    (its checkpoint evaluations and re-evaluations), rule ``prune_checkpoints`` (``graft prune``) removes the model
    directories of the checkpoints that nothing reads any more, keeping for each model the checkpoints that the
    selection rules pick (``report.selection`` may change afterwards) and the last; every evaluation stays, and
    each removed checkpoint's manifest, so a retried evaluation job with unchanged settings finds its kept
    result. Evaluating a removed checkpoint with other settings needs the cell retrained."""
    changed_runs: Literal["stop", "keep", "retrain"] = "stop"
    """What the workflow does with a training run in the results tree that was made with other settings than the
    config's (graft.workflow.reruns): stop: nothing is submitted, and the cells are listed with the fields that
    changed (a dry run too); keep: the runs stand as they are and count as the cells' results; retrain: each is
    trained anew, its records and evaluations kept under <run>/replaced/<UTC time>/ (``graft train --retrain``).
    A longer ``train.steps`` continues finished runs (their resume state kept) whatever this says."""
    disk_budget_gb: Positive | None = None
    """The most disk (GB) the results tree may hold at once, below the quota where ``results:`` points
    (docs/paper-on-slurm.md). A cell holds every checkpoint from the start of its training until rule
    ``prune_checkpoints`` follows its last evaluation; with a budget, the cells take turns in as many lanes as fit
    (``graft plan`` prints the number and the peak), a cell starting once the cell before it in its lane is pruned,
    and a cell whose training fails on its last attempt keeps its place while the next invocation moves the cells
    behind it to another lane (graft.planning.turns). None: every cell may be in flight at once. Where the peak
    exceeds the free space under ``results:``, the workflow stops before any job with the budget to set."""
    hf_home: PathText | None = None
    """The Hugging Face cache of the download rules (``HF_HOME``); None: the environment's (by default
    ~/.cache/huggingface). Nothing else downloads: training, evaluation and the report run with the hub offline
    (graft.services.offline), so a missing file fails at once with its name instead of waiting on the network."""

    def __post_init__(self) -> None:
        _check_seeds("main_seeds", self.main_seeds)
        _check_seeds("other_seeds", self.other_seeds)
        for name, seeds in self.method_seeds.items():
            _check_seeds(f"method_seeds.{name}", seeds)
        for name, seeds in self.cell_seeds.items():
            _check_seeds(f"cell_seeds.{name}", seeds)

    def seeds_of(self, method: str, cell: str, models: tuple[str, ...]) -> list[int]:
        """The seeds ``method`` trains with on ``cell`` (``preset_seeds``)."""
        return preset_seeds(method, self.main_seeds, self.other_seeds, self.method_seeds, self.cell_seeds, cell, models)

    def ablations_pair(self, pairs: dict[str, list[str]]) -> str | None:
        """The pair the ablations run on, and the report's Table 2, clipping and cost tables and Figure 3a read:
        ``ablation_pair``, else the first of ``pairs`` (None without pairs)."""
        return self.ablation_pair or next(iter(pairs), None)
