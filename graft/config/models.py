"""The models, the training and validation data, the reward and the evaluation benchmarks: what a cell trains
and how its checkpoints are scored."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from graft.typed_config import (
    NON_EMPTY,
    Count,
    FieldError,
    NonNegativeInt,
    OpenShare,
    Positive,
    Share,
)


@dataclass(frozen=True)
class ModelSizes:
    """A model's sizes for the memory plan (``graft plan``), as its config.json states them; needed only while the
    model is not downloaded (the plan reads config.json when it is)."""

    layers: Count
    """Decoder blocks (``num_hidden_layers``)."""
    hidden: Count
    """Width of the residual stream (``hidden_size``)."""
    intermediate: Count
    """Width of each block's gated MLP (``intermediate_size``)."""
    heads: Count
    """Attention query heads (``num_attention_heads``)."""
    kv_heads: Count
    """Attention key and value heads (``num_key_value_heads``); fewer than ``heads`` under grouped-query attention."""
    head_dim: Count
    """Width of one attention head (``head_dim``)."""
    vocab: Count
    """Tokens in the vocabulary (``vocab_size``)."""
    tied: bool = True
    """The output projection is the input embedding (one [vocab, hidden] matrix)."""


@dataclass(frozen=True)
class ModelSpec:
    """One policy: a local Hugging Face ``from_pretrained`` directory and how prompts are formatted for it."""

    path: str
    """Directory with config.json, model.safetensors and the tokenizer files."""

    template: str = "{problem}"
    """Prompt template with a ``{problem}`` slot, applied identically to own prompts, evaluation and the
    re-tokenization of a peer's response; with ``chat`` it is the content of the one user message."""

    chat: bool = False
    """Send the filled template as a single user message through the chat template, with the generation prompt
    (the paper's format, Appendix B)."""

    chat_template: str | None = None
    """A Jinja file used instead of the tokenizer's chat template (needed for a base model that ships none, and
    to keep a template that writes today's date out of the prompt); None: the tokenizer's own."""

    hub_id: str | None = None
    """Hugging Face id the models stage snapshots into ``path`` (paper config); None for built models."""

    dtype: Literal["float32", "bfloat16"] = "float32"
    """Parameter dtype for training and rollout."""

    sizes: ModelSizes | None = None
    """Sizes for the memory plan while the model is not downloaded; None: read from ``path``/config.json."""

    lr: Positive | None = None
    """This model's AdamW learning rate; None: ``train.lr``. The paper trains every model at 1e-6; the miniature's
    tiny models move at different rates per step, so its default picks one per model on validation prompts."""

    def __post_init__(self) -> None:
        if "{problem}" not in self.template:
            hint = "; for the chat format write chat: true, template: '{problem} ...'" * (self.template == "chat")
            raise FieldError("template", f"{self.template!r} has no '{{problem}}' slot{hint}")
        if self.chat_template is not None:
            if not self.chat:
                raise FieldError("chat_template", "needs chat: true")
            if not Path(self.chat_template).is_file():
                raise FieldError("chat_template", f"no such file {self.chat_template!r}")


@dataclass(frozen=True)
class DataSpec:
    """Where the prompts come from. Each file is JSON Lines with ``id``, ``problem`` and ``answer``."""

    train: str
    """Training prompts."""

    validation: str | None = None
    """Validation prompts (checkpoint selection disjoint from the test benchmarks)."""


@dataclass(frozen=True)
class RewardSpec:
    kind: Literal["toy", "math"] = "math"
    """toy: exact integer match of the last \\boxed{}; math: math-verify on the final boxed answer."""

    timeout: Positive = 5.0
    """Hard per-item grading timeout in seconds; a timeout scores 0."""

    workers: Count = 2
    """Grading processes (math only; the toy grader runs in-process)."""


@dataclass(frozen=True)
class EvalSpec:
    """How checkpoints are evaluated (paper Appendix B)."""

    benchmarks: Annotated[dict[str, str], NON_EMPTY]
    """Benchmark name -> local JSON Lines file; the score is the unweighted mean over these."""
    validation: str | None = None
    """A held-out set disjoint from the benchmarks, for checkpoint selection that does not peek at test."""
    k: Count = 8
    """Samples per problem; pass@1 is the mean over samples, then problems."""
    temperature: Positive = 0.6
    """Sampling temperature of the evaluation (0.6 in the paper's Appendix B)."""
    top_p: Share = 0.95
    """Nucleus sampling's probability mass of the evaluation (0.95 in the paper)."""
    max_response_tokens: Count | None = None
    """None: the training limit."""
    selection_runs: NonNegativeInt = 0
    """Evaluations of each run's selected checkpoint (``report.selection``) with fresh sampling seeds, after the
    checkpoint evaluations that selected it (paper Appendix B: "each selected checkpoint is evaluated over five
    independent runs"; 5 in the paper config). The report's scores of a selected checkpoint are then the mean
    (and std) of these runs, never the run that selected it, whose score is biased upward by the selection.
    0: no re-evaluation; the report says that its scores are those of the selecting run."""
    vllm_memory: OpenShare = 0.85
    """The share of its GPU's memory the evaluation's vLLM engine takes (``scale.rollout: vllm``). A job holds one
    engine at a time, stopping one model's before it starts the next's, so the share is the whole job's."""
