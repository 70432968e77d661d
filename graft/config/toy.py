"""The embedded default's toy world: its models, arithmetic families and mismatch."""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from typing import Annotated, Literal

from graft.names import ModelName
from graft.typed_config import (
    NON_EMPTY,
    Count,
    FieldError,
    NonNegative,
    Positive,
    Probability,
    Seed,
)

ToyFamily = Literal["add", "sub", "mul", "div", "mul2", "add3", "sub3"]


"""Every family of the toy task (graft.toy.task solves each), in the task's order; a world uses some of them."""


DEFAULT_TOY_FAMILIES: tuple[str, ...] = typing.get_args(ToyFamily)[:5]


@dataclass(frozen=True)
class ToyModelSpec:
    """How one toy model is built and warmed up (docs/design.md section 7)."""

    arch: Literal["smollm3", "qwen3", "gpt2", "llama"]
    """llama: a plain Llama decoder, as OctoThinker-3B is (config/rehearsal.yaml; the default's octo is GPT-2)."""
    pre_tokenizer: Literal["gpt2_regex", "digit_runs", "space_words"]
    """How text is split before the BPE merges: GPT-2's regular expression, runs of digits, or words at spaces."""
    vocab_size: Count
    """Tokens in the model's BPE vocabulary, trained on the toy's texts."""
    hidden: Count
    """Width of the residual stream."""
    layers: Count
    """Decoder blocks."""
    heads: Count
    """Attention heads; ``hidden`` must be a multiple of it."""
    mix: dict[str, NonNegative]
    """Share of each task family in the warm-up examples: the model's skill profile."""
    steps: Count
    """Warm-up optimizer steps."""
    lr: Positive = 3e-3
    """Learning rate of the warm-up (AdamW)."""
    batch_size: Count = 64
    """Warm-up examples per optimizer step."""
    micro_batches: Count = 1
    """Forward passes each warm-up batch is cut into, its examples sorted by length so that each pass pads less:
    the same loss and gradient (up to float rounding), about 10% faster at 2 (bench/benchmarks/budget_probe.py)."""
    examples: Count = 3000
    """Distinct warm-up problems drawn from the train split according to ``mix``."""
    slip: dict[str, Probability] = field(default_factory=dict)
    """Per family, the probability that each slip point (a carry, a borrow...) of a warm-up solution is slipped:
    the model learns the procedure as one that has half-learned it, and samples right about as often as its
    warm-up solutions are (a calibrated model, not an over-confident one). Families not named: 0."""
    dialect: Literal[0, 1, 2] = 0
    """How the model writes its solutions (graft.toy.dialect): 0 the common writing; 1 or 2 a dialect of its own,
    used for each feature of a warm-up solution with probability ``toy.mismatch``."""

    def __post_init__(self) -> None:
        if sum(self.mix.values()) <= 0:
            raise FieldError("mix", "shares must be >= 0 with a positive sum")
        if self.micro_batches > self.batch_size:
            raise FieldError(
                "micro_batches", f"{self.micro_batches} is not allowed; expected 1 to batch_size ({self.batch_size})"
            )
        if self.hidden % self.heads:
            raise FieldError("hidden", f"{self.hidden} is not a multiple of heads")


@dataclass(frozen=True)
class ToySpec:
    """The synthetic task and the tiny models of the embedded default."""

    models: Annotated[dict[ModelName, ToyModelSpec], NON_EMPTY]
    """The toy models by name, each built from scratch and warmed up on its own mix of families."""
    families: Annotated[list[ToyFamily], NON_EMPTY] = field(default_factory=lambda: list(DEFAULT_TOY_FAMILIES))
    """The task families of this world, one toy benchmark each."""
    seed: Seed = 0
    """The toy world's seed: its problems, tokenizers, weights and warm-ups (a toy seed)."""
    test_per_family: Count = 64
    """Problems per family in the test split (the toy's benchmarks)."""
    validation_per_family: Count = 16
    """Problems per family in the validation split, for checkpoint selection and settings chosen on it."""
    train_per_family: Count = 400
    """RL prompts per family, drawn from the train split."""
    level2_share: Probability = 0.0
    """Share of every split drawn from the harder level 2 (more digits), 0 to 1."""
    min_slip_points: Count = 1
    """Fewest slip points (carries, borrows...) a problem may have. At 2 a model that is blind on a family (slips
    at nearly every point) almost never solves one of its problems by chance, while a peer's correct solution
    still differs from its own by one cheap token per point; two-digit problems (level 1) have one, so 2 needs
    ``level2_share: 1``."""
    mismatch: Probability = 0.0
    """Cross-model mismatch, 0 to 1: the chance that each feature of a warm-up solution (header, operator spacing,
    equals sign, separator, conclusion) is written in the model's ``dialect`` instead of the common writing. 0: all
    models write alike (no mismatch); 1: each writes only its own dialect."""
    shipped_models: bool = True
    """Copy a toy model from the project's shipped ones (``toy-models/``, graft.toy.shipped) where its settings equal
    theirs (toy seed 0's world of config/config.yaml) instead of warming it up; false: build every model. Where a
    model's bytes come from is no setting a job computes from (as a model's download): it reruns nothing."""

    def __post_init__(self) -> None:
        if len(set(self.families)) != len(self.families):
            allowed = ", ".join(typing.get_args(ToyFamily))
            raise FieldError("families", f"families must be distinct; allowed: {allowed}")
        world = ", ".join(self.families)
        for name, spec in self.models.items():
            for what, families in (("mix", spec.mix), ("slip", spec.slip)):
                unknown = sorted(set(families) - set(self.families))
                if unknown:
                    raise FieldError(f"models.{name}.{what}", f"unknown family {unknown[0]!r}; toy.families: {world}")
