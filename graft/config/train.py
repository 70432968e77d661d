"""The training section: the RL loop's sizes, the optimizer, sampling, checkpoints and the memory knobs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from graft.typed_config import (
    Bounds,
    Count,
    Decay,
    FieldError,
    NonNegative,
    Positive,
    Share,
)

MAX_CHECKPOINTS = 10_000
"""The most checkpoints a run may save (the paper's: 35): each one is a directory of weights that the workflow
evaluates and the plan lists, so more is a mistake in ``steps`` or ``checkpoint_every``."""


@dataclass(frozen=True)
class TrainSpec:
    """Optimisation and rollout settings shared by every method (paper Table 3 for the paper config)."""

    steps: Count
    """Training steps."""

    prompts_per_step: Count
    """Prompts in a step's batch, the same for every model of a run (128 in the paper)."""

    minibatches: Count = 4
    """Optimizer updates per step (4 minibatches of 32 prompts in the paper); a preset may override."""

    lr: Positive = 1e-6
    """AdamW learning rate, constant."""

    beta1: Decay = 0.9
    """AdamW's decay of the gradient's running mean."""
    beta2: Decay = 0.999
    """AdamW's decay of the squared gradient's running mean."""
    weight_decay: NonNegative = 0.01
    """AdamW's decoupled weight decay."""
    grad_clip: Positive = 1.0
    """Maximum gradient norm (> 0: at 0 every update would be zero, below 0 it would flip the gradient)."""

    max_prompt_tokens: Count = 2048
    """Longest prompt, in the model's tokens; a longer one is refused when the prompts are read."""
    max_response_tokens: Count = 4096
    """Longest sampled response, in tokens; a response that reaches it is truncated and counted as such."""
    temperature: Positive = 1.0
    """Sampling temperature of the rollouts; log-probs are those of the logits divided by it."""
    top_p: Share = 1.0
    """Nucleus sampling's probability mass of the rollouts; 1 samples from the whole distribution."""

    checkpoint_every: Count = 5
    """Save model, optimizer, sampler position and RNG states every this many steps (and at the end)."""

    checkpoint_minutes: Positive | None = None
    """Also save a resumable checkpoint once this many minutes of wall time have passed since the last save, between
    the ``checkpoint_every`` steps: a job killed at its Slurm limit and resumed then loses at most this much work
    plus the step under way. These checkpoints hold what a resume needs and nothing is evaluated from them; only
    the newest is kept, and none once the run ends. None: checkpoints every ``checkpoint_every`` steps only."""

    resumable_checkpoints: Count = 2
    """How many of the newest checkpoints keep their optimizer state while the run lasts; a resume falls back to an
    older one when the newest fails its manifest check. Older checkpoints keep only the models (what evaluation
    reads)."""

    keep_resume_state: bool = False
    """Whether a finished run keeps the resume state (float32 weights and AdamW moments, 12 bytes a parameter) of
    its newest ``resumable_checkpoints`` checkpoints, which only continuing it past its last step reads
    (``graft train --resume`` with more ``--steps``). False: removed once ``done.json`` is written, and a rerun of
    the finished cell trains it from the start. Changing it retrains nothing."""

    step_deadline_factor: Positive = 5.0
    """A step's deadline, in multiples of its reference: the longer of the step time's prediction for the cell
    (graft.planning.step_time, dynamic sampling's every extra draw made; none on a CPU configuration) and the
    slowest step the process has finished; never under 15 minutes, and three times that for a process's first
    step, which sets up its collectives and engines (graft.train.deadline). A step past its deadline dumps every
    thread's stack to the log and ends the job, whose retry resumes from the last checkpoint: a hung engine, file
    system or collective costs this instead of the job's time limit."""

    step_deadline_minutes: Positive | None = None
    """Every step's deadline in minutes, the first included, in place of ``step_deadline_factor``'s; None: that
    factor's."""

    micro_batch: Count = 64
    """Responses per forward pass at most; gradients are accumulated, so this changes memory, not the
    optimisation."""

    micro_batch_tokens: Count | None = None
    """Tokens per forward pass at most, on top of ``micro_batch``: padded tokens (responses x longest prompt +
    response), or with ``packing`` the rows' own tokens; None: no token budget. Long responses then share a pass
    with fewer others."""

    packing: bool = False
    """Run each forward pass of scoring and updates as one packed sequence, without padding: the rows end to end,
    positions restarting at each row and attention kept within it (graft.engine.packing), micro-batches filled by
    tokens longest row first. Log-probs, losses and gradients equal the padded pass's within float32 rounding; the
    compute is that of the rows' own tokens instead of rows x the longest row. False: each micro-batch padded to its
    longest row, rows in arrival order (the embedded default's digits rest on that summation order)."""

    logits_chunk_mib: Positive = 512
    """MiB of float32 logits computed at once when log-probs are taken (scoring and updates): a forward pass
    whose logits would be larger projects its response positions onto the vocabulary that many positions at a
    time (512 MiB: 883 positions of Qwen3's 151,936 tokens), and the backward recomputes each chunk. Memory, not
    the numbers, depends on it (float32 rounding aside)."""

    rollout_batch: Count = 256
    """Sequences per generate call."""

    rollout_seeds: Literal["batch", "prompt"] = "batch"
    """How the Hugging Face backend seeds its samples. ``batch``: one seed per process and step, prompts generated
    ``rollout_batch`` sequences at a time (the embedded default's digits rest on it), so a run's samples depend on
    how many processes share its prompts. ``prompt``: each prompt generated alone from a seed of the step and its
    position in the batch, as vLLM always does, so every process layout samples alike (slower on a CPU)."""

    dual_clip: Annotated[float, Bounds(gt=1)] | None = None
    """None: Eq. 10 as written (the default). A number c > 1: verl's dual clip (its ``clip_ratio_c``, 3 by
    default there), which caps the objective of a negative-advantage token at c * a, so a token whose ratio has
    grown past c stops pushing its probability down. The paper trained with verl but states Eq. 10 without the
    cap, and does not say whether its runs had it; ``config/paper.yaml`` follows the equation."""

    old_logprobs: Literal["auto", "recompute", "rollout"] = "auto"
    """Where the ratio's denominator for own responses comes from (Eqs. 3 and 9). recompute: one forward
    pass of the training model over the step's responses before the first update, as verl does, so own and
    peer tokens share one behaviour policy and every ratio is 1 on the first minibatch (costs one extra
    forward over n x prompts responses per model and step, about a third of an update); rollout: the
    rollout engine's generation log-probs (free; equal to the training forward within ~1e-5 on one CPU
    process, not under vLLM's kernels or bf16 shards); auto: recompute whenever the sampler is not the
    training model itself (vLLM, or more than one process), else rollout."""

    def __post_init__(self) -> None:
        checkpoints = -(-self.steps // self.checkpoint_every)
        if checkpoints > MAX_CHECKPOINTS:
            raise FieldError(
                "steps",
                f"{self.steps} steps with checkpoint_every {self.checkpoint_every} make {checkpoints} checkpoints, "
                f"each saved and evaluated; at most {MAX_CHECKPOINTS:,}: raise train.checkpoint_every",
            )
