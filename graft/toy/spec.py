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
    dialect: int = 0
    """How the model writes its solutions (graft.toy.dialect): 0 the common writing; 1 or 2 a dialect of its own,
    used for each feature of a warm-up solution with probability ``toy.mismatch``."""
    foreign_slip: float | None = None
    """Competence tied to the model's own writing: the slip rate, on the families ``foreign_slip_families`` names
    (all by default), of a warm-up solution that has a feature in another model's dialect (the ``EXPOSURE`` cases
    of graft.toy.dialect), so that writing like a peer comes with slipping. None: such solutions slip at their
    family's rate (the worlds before it existed)."""
    foreign_slip_families: list[str] | None = None
    """The families on which ``foreign_slip`` applies; None: every family. Naming only the model's own strong
    families puts the cost of writing like the peer where the model already solves problems, and leaves its blind
    families, where GRAFT transfers, without a tie between foreign writing and slipping (which would make the
    peer's wrong responses the more plausible ones to the receiver's gate)."""

    wrong_facts: int = 0
    """Digit facts the model holds wrong, per operation: that many addition facts (7+8), subtraction facts of a
    borrowing column (13-7) and multiplication facts (7*8), drawn from the toy seed and the model's name, each off
    by one (graft.toy.task.draw_wrong_facts). Real models' errors are idiosyncratic: a prompt that needs one of a
    model's wrong facts fails for it and, unless it also needs one of the peer's, not for the peer. 0: none."""
    wrong_fact_rate: float = 0.9
    """The probability that each use of a wrong fact in a warm-up solution is written wrong (the rest: right)."""


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
    mismatch_unit: str = "feature"
    """What ``mismatch`` is drawn for: "feature" (each feature on its own, so most dialect solutions mix both
    writings) or "solution" (a whole solution in the common writing or in the model's dialect, so a peer's response
    is either plain to the receiver or foreign throughout; graft.toy.dialect.UNITS)."""
    slip_unit: str = "point"
    """What each model's ``slip`` rates draw for: "point" (each carry or borrow on its own, so a wrong warm-up
    solution is usually right but for one step) or "solution" (every point of a solution slips or none does, a
    misconception applied throughout; graft.toy.task.SLIP_UNITS)."""
