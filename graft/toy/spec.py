"""How the embedded default's toy world is built: the ``toy:`` section of the config (graft.config reads it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from graft.toy.task import DEFAULT_FAMILIES


@dataclass(frozen=True)
class ToyModelSpec:
    """How one toy model is built and warmed up (docs/design.md section 7)."""

    arch: Literal["smollm3", "qwen3", "gpt2", "llama"]
    """llama: a plain Llama decoder, as OctoThinker-3B is (config/rehearsal.yaml; the default's octo is GPT-2)."""
    pre_tokenizer: Literal["gpt2_regex", "digit_runs", "space_words"]
    vocab_size: int
    hidden: int
    layers: int
    heads: int
    mix: dict[str, float]
    """Share of each task family in the warm-up examples: the model's skill profile."""
    steps: int
    """Warm-up optimizer steps."""
    lr: float = 3e-3
    batch_size: int = 64
    micro_batches: int = 1
    """Forward passes each warm-up batch is cut into, its examples sorted by length so that each pass pads less:
    the same loss and gradient (up to float rounding), about 10% faster at 2 (bench/budget_probe.py)."""
    examples: int = 3000
    """Distinct warm-up problems drawn from the train split according to ``mix``."""
    slip: dict[str, float] = field(default_factory=dict)
    """Per family, the probability that each slip point (a carry, a borrow...) of a warm-up solution is slipped:
    the model learns the procedure as one that has half-learned it, and samples right about as often as its
    warm-up solutions are (a calibrated model, not an over-confident one). Families not named: 0."""
    dialect: Literal[0, 1, 2] = 0
    """How the model writes its solutions (graft.toy.dialect): 0 the common writing; 1 or 2 a dialect of its own,
    used for each feature of a warm-up solution with probability ``toy.mismatch``."""


@dataclass(frozen=True)
class ToySpec:
    """The synthetic task and the tiny models of the embedded default."""

    models: dict[str, ToyModelSpec]
    families: list[str] = field(default_factory=lambda: list(DEFAULT_FAMILIES))
    """The task families of this world, one toy benchmark each (``graft.toy.task.FAMILIES`` lists them all)."""
    seed: int = 0
    test_per_family: int = 64
    """Problems per family in the test split (the toy's benchmarks)."""
    validation_per_family: int = 16
    train_per_family: int = 400
    """RL prompts per family, drawn from the train split."""
    level2_share: float = 0.0
    """Share of every split drawn from the harder level 2 (more digits), 0 to 1."""
    min_slip_points: int = 1
    """Fewest slip points (carries, borrows...) a problem may have. At 2 a model that is blind on a family (slips
    at nearly every point) almost never solves one of its problems by chance, while a peer's correct solution
    still differs from its own by one cheap token per point; two-digit problems (level 1) have one, so 2 needs
    ``level2_share: 1``."""
    mismatch: float = 0.0
    """Cross-model mismatch, 0 to 1: the chance that each feature of a warm-up solution (header, operator spacing,
    equals sign, separator, conclusion) is written in the model's ``dialect`` instead of the common writing. 0: all
    models write alike (no mismatch); 1: each writes only its own dialect."""
