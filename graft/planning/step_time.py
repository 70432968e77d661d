"""How long a training step takes, from its parts: what ``graft plan``'s training job lengths rest on.

Per model and step, on the GPUs that model runs on:

- generation: the responses it samples times their mean length, at its engine's tokens per second per GPU;
- scoring: one forward pass over the rows whose behaviour log-probs the step needs (its own responses when
  ``train.old_logprobs`` recomputes them, a peer's responses where the gate or the clipped update scores them);
- the update: the forward, the backward (twice the forward) and the forward that gradient checkpointing repeats,
  over the rows it trains on;
- the weight sync: the model in the engine's dtype, over the sync's bandwidth.

Scoring and the update are FLOPs at a share of the GPU's peak (model FLOPs utilization). Colocated, the models
take turns on all of the job's GPUs, so a step is the sum over its models; split, each model has its own share of
the GPUs and they run at once, so a step is its slowest model's.

Not modelled: dynamic sampling's extra draws (its step is a floor), the sleep and wake of the engines, the
trainer's optimizer step, grading, checkpoint writes, and the spread of response lengths (a row's attention is
priced at the mean lengths).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from graft.config import ModelSizes, RunConfig, model_groups
from graft.errors import ConfigError
from graft.methods import Method, get_method
from graft.planning.memory import layer_parameters, model_sizes, parameters

UPDATE_FORWARDS = 4
"""An update's FLOPs in forward passes: the forward, the backward (two), and the forward recomputed under gradient
checkpointing (``train.gradient_checkpointing``, on in every GPU config)."""

GPU_CHECK_ROW = (2048, 4096)
"""Prompt and response tokens of each row in ``bench/checks/gpu_check.py``'s memory phase (the paper's limits), whose
seconds give the measured utilization."""

GPU_CHECK_ARCHITECTURES = {
    "smollm3": ModelSizes(layers=36, hidden=2048, intermediate=11008, heads=16, kv_heads=4, head_dim=128, vocab=128256),
    "qwen3": ModelSizes(layers=28, hidden=2048, intermediate=6144, heads=16, kv_heads=8, head_dim=128, vocab=151936),
}
"""The architectures ``bench/checks/gpu_check.py`` measures (SmolLM3-3B's and Qwen3-1.7B's config.json), under the model
names the paper's config gives them: a model of that name takes its own measurement, any other their mean."""


def matmul_weights(sizes: ModelSizes) -> int:
    """Weights a token meets in matrix products in the body (attention projections and MLP; norms left out)."""
    return sizes.layers * (layer_parameters(sizes) - 2 * sizes.hidden)


def row_forward_flops(sizes: ModelSizes, prompt_tokens: float, response_tokens: float) -> float:
    """FLOPs of one forward pass over a row of ``prompt_tokens`` + ``response_tokens`` (packed: no padding).

    Each position costs 2 FLOPs per body weight and, in attention, 4 x layers x heads x head_dim per earlier
    position it attends to (scores and the weighted sum: half the row on average, causal); the output projection
    (2 x vocab x hidden) runs on the response's positions only, as the chunked log-prob head does."""
    tokens = prompt_tokens + response_tokens
    body = 2 * matmul_weights(sizes) * tokens
    attention = 4 * sizes.layers * sizes.heads * sizes.head_dim * tokens * tokens / 2
    head = 2 * sizes.vocab * sizes.hidden * response_tokens
    return body + attention + head


@dataclass(frozen=True)
class StepRows:
    """Rows one model handles in a step."""

    generated: float
    """Responses it samples."""
    scored: float
    """Rows a forward pass scores before the update (own recomputed, a peer's re-tokenized)."""
    trained: float
    """Rows the update trains on."""


def recomputes(cfg: RunConfig) -> bool:
    """Whether the update scores a model's own responses again before it trains on them (``train.old_logprobs``)."""
    old = cfg.train.old_logprobs
    return old == "recompute" or (old == "auto" and cfg.scale.rollout == "vllm")


def step_rows(method: Method, prompts: int, exchange_share: float, recompute: bool) -> StepRows:
    """A method's rows per model and step. ``exchange_share``: the share of a step's prompts on which a receiver
    takes a peer's responses under a selective rule (GRAFT's complementary groups, SGT's failures); HACPO's rule
    (``select: all``) takes them on every prompt. A peer's whole group replaces the receiver's (GRAFT) or joins it
    (``keep_own``); SGT's rule sends one response. Dynamic sampling's extra draws are not counted."""
    own = prompts * method.n
    if method.peer == "none":
        return StepRows(own, own if recompute else 0, own)
    groups = prompts if method.select == "all" else exchange_share * prompts
    peer = groups * (1 if method.transfer == "one_success" else method.n)
    replaced = 0 if method.keep_own else groups * method.n
    peer_scored = peer if method.gate == "compat" or method.update == "clipped" else 0
    return StepRows(own, (own if recompute else 0) + peer_scored, own - replaced + peer)


@dataclass(frozen=True)
class Rates:
    """What one GPU does per second, each figure with where it comes from."""

    peak_flops: float
    """Dense bf16 FLOP/s of one GPU (``RunConfig.gpu``)."""
    utilization: dict[str, tuple[float, float]]
    """Per model: the shares of the peak that scoring and the update reach."""
    sync_bytes_per_s: float
    """The weight sync's bytes per second (written and read back)."""
    tokens_scale: float
    """What the config's rollout tokens per second are multiplied by for one of the jobs' GPUs (``tokens_scale``)."""
    sources: tuple[str, ...]
    """One line per figure: its value and its source (measured or assumed)."""


@dataclass(frozen=True)
class ModelStep:
    """One model's seconds in a step, by part."""

    generation: float
    scoring: float
    update: float
    sync: float

    @property
    def total(self) -> float:
        return self.generation + self.scoring + self.update + self.sync


def model_step(
    sizes: ModelSizes,
    rows: StepRows,
    prompt_tokens: float,
    response_tokens: float,
    gpus: int,
    rollout_tokens_per_s: float,
    flops_per_s: tuple[float, float],
    sync_bytes_per_s: float,
    engine_bytes: int = 2,
) -> ModelStep:
    """One model's step on ``gpus`` GPUs: ``rollout_tokens_per_s`` per GPU while sampling, scoring and the update
    at ``flops_per_s`` per GPU (each), the sync of ``engine_bytes`` per parameter."""
    forward = row_forward_flops(sizes, prompt_tokens, response_tokens)
    return ModelStep(
        generation=rows.generated * response_tokens / (gpus * rollout_tokens_per_s),
        scoring=rows.scored * forward / (gpus * flops_per_s[0]),
        update=rows.trained * UPDATE_FORWARDS * forward / (gpus * flops_per_s[1]),
        sync=parameters(sizes) * engine_bytes / sync_bytes_per_s,
    )


def step_seconds(steps: list[ModelStep], placement: str) -> float:
    """A step of a cell: colocated, its models take turns (the sum); split, they run at once (the slowest)."""
    totals = [s.total for s in steps]
    return max(totals) if placement == "split" else sum(totals)


def measured_utilization(report: dict, peak_flops: float) -> dict[str, tuple[float, float]]:
    """Scoring's and the update's utilization per architecture from a ``bench/checks/gpu_check.py`` report: the FLOPs of
    its memory phase's rows (the report's ``memory_row``, else ``GPU_CHECK_ROW``) over their seconds, over the
    peak. Architectures the report lacks are left out."""
    prompt, response = report.get("memory_row", GPU_CHECK_ROW)
    out = {}
    for arch, sizes in GPU_CHECK_ARCHITECTURES.items():
        keys = [f"memory_{arch}_{phase}_{what}" for phase in ("score", "update") for what in ("tokens", "s")]
        if not all(k in report for k in keys):
            continue
        forward = row_forward_flops(sizes, prompt, response)
        shares = []
        for phase, forwards in (("score", 1), ("update", UPDATE_FORWARDS)):
            rows = report[f"memory_{arch}_{phase}_tokens"] / (prompt + response)
            shares.append(rows * forwards * forward / report[f"memory_{arch}_{phase}_s"] / peak_flops)
        out[arch] = (shares[0], shares[1])
    return out


def read_gpu_check(path: Path) -> dict:
    """A ``bench/checks/gpu_check.py`` report; one line naming the file when it cannot be read."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"workflow.gpu_check: cannot read {str(path)!r} ({err.__class__.__name__})") from None


def tokens_scale(cfg: RunConfig) -> float:
    """What the config's tokens per second, an H200's, are multiplied by for one of its jobs' GPUs: the GPU's speed
    over an H200's (``RunConfig.gpu``); 1 for CPU jobs, whose rates are their own."""
    gpu = cfg.gpu()
    return gpu.speed if gpu is not None and gpu.speed else 1.0


def gpu_rates(cfg: RunConfig) -> Rates | None:
    """The GPU's figures (``RunConfig.gpu``), with ``workflow.gpu_check``'s measurements in place of the assumed
    utilization and sync bandwidth where its report is there (a model it did not measure takes the mean of those it
    did). None without a peak: CPU jobs, or a GPU whose config prices no job length."""
    w, gpu = cfg.workflow, cfg.gpu()
    if gpu is None or gpu.peak_tflops is None:
        return None
    peak = gpu.peak_tflops * 1e12
    present = bool(w.gpu_check) and Path(w.gpu_check).is_file()
    report = read_gpu_check(Path(w.gpu_check)) if present else {}
    measured = measured_utilization(report, peak)
    where = f"on {report['device']} " if "device" in report else ""
    sources = []
    if measured:
        mean = tuple(sum(u[i] for u in measured.values()) / len(measured) for i in range(2))
        utilization = {name: measured.get(name, mean) for name in cfg.models}
        for name, (score, update) in measured.items():
            sources.append(
                f"{name}'s architecture: scoring at {score:.0%}, the update at {update:.0%} of the peak, measured "
                f"{where}({w.gpu_check})"
            )
        if any(name not in measured for name in cfg.models):
            sources.append(f"other models: {mean[0]:.0%} and {mean[1]:.0%}, the mean of those measured")
    else:
        assumed = (w.model_flops_utilization, w.model_flops_utilization)
        utilization = dict.fromkeys(cfg.models, assumed)
        missing = ""
        if w.gpu_check:
            missing = f"; {w.gpu_check} " + ("measured no architecture" if present else "is not there")
        sources.append(
            f"scoring and the update at {w.model_flops_utilization:.0%} of the peak, assumed "
            f"(workflow.model_flops_utilization{missing})"
        )
    if "sync_gb_per_s" in report:
        sync = report["sync_gb_per_s"] * 1e9
        sources.append(f"weight sync {report['sync_gb_per_s']:.2f} GB/s, measured {where}({w.gpu_check})")
    else:
        sync = w.sync_gb_per_s * 1e9
        sources.append(f"weight sync {w.sync_gb_per_s:g} GB/s, assumed (workflow.sync_gb_per_s)")
    return Rates(peak, utilization, sync, tokens_scale(cfg), tuple(sources))


def cell_steps(
    cfg: RunConfig, rates: Rates, method: str, models: tuple[str, ...], placement: str
) -> list[ModelStep] | None:
    """Each model's step in a cell of the preset or config method named ``method`` (``preset_steps``)."""
    return preset_steps(cfg, rates, get_method(method, cfg.methods), models, placement)


def preset_steps(
    cfg: RunConfig, rates: Rates, method: Method, models: tuple[str, ...], placement: str
) -> list[ModelStep] | None:
    """Each model's step in a cell of ``method`` under ``placement``; None where a figure is missing (a model's
    sizes or its ``workflow.rollout_tokens_per_s``, scaled to the jobs' GPU)."""
    w, train, scale = cfg.workflow, cfg.train, cfg.scale
    gpus = scale.processes * scale.nodes // model_groups(placement, len(models))
    rows = step_rows(method, train.prompts_per_step, w.exchange_share, recomputes(cfg))
    prompt = w.mean_prompt_tokens or train.max_prompt_tokens
    response = w.mean_response_tokens or train.max_response_tokens
    steps = []
    for name in models:
        sizes, rate = model_sizes(cfg, name), w.rollout_tokens_per_s.get(name)
        if sizes is None or rate is None:
            return None
        flops = tuple(rates.peak_flops * u for u in rates.utilization[name])
        rate *= rates.tokens_scale
        steps.append(model_step(sizes, rows, prompt, response, gpus, rate, flops, rates.sync_bytes_per_s))
    return steps


def longest_step_seconds(cfg: RunConfig, method: Method, models: tuple[str, ...]) -> float | None:
    """A cell's longest predicted step under ``scale.placement``: with dynamic sampling, every extra draw made (its
    generation that many times over). None where the step time has no figures (CPU jobs, or a GPU without a peak)."""
    rates = gpu_rates(cfg)
    placement = cfg.scale.placement
    steps = None if rates is None else preset_steps(cfg, rates, method, models, placement)
    if steps is None:
        return None
    draws = 1 + (method.resample_rounds if method.dynamic_sampling else 0)
    return step_seconds([ModelStep(s.generation * draws, s.scoring, s.update, s.sync) for s in steps], placement)


DEADLINE_FLOOR_S = 900.0
"""No derived deadline is shorter: a step of seconds (a toy, a CPU configuration) slowed by a busy machine is not a
hang, and a quarter of an hour is little beside the days a hang holds its GPUs for."""

FIRST_STEP_ALLOWANCE = 3.0
"""A process's first step may take this many times the deadline of the steps after it: it sets up the collectives'
communicators, FSDP's lazy state, the engines' first wake and weight sync, and each kernel's first call."""


def step_deadline_s(*, factor: float, minutes: float | None, reference_s: float | None, first: bool) -> float:
    """A step's deadline in seconds: ``minutes`` where set, every step alike; else ``factor`` times the step's
    ``reference_s`` (None: none yet), at least ``DEADLINE_FLOOR_S``, and ``FIRST_STEP_ALLOWANCE`` times that for a
    process's ``first`` step."""
    if minutes is not None:
        return minutes * 60
    deadline = max(factor * (reference_s or 0.0), DEADLINE_FLOOR_S)
    return FIRST_STEP_ALLOWANCE * deadline if first else deadline
