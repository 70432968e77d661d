"""Every seed of a run, derived in one place from the run's seed, a purpose and the parts that identify a draw.

A resumed run, a replay of one model's stored trajectories and a rerun of one cell must draw exactly what the
original run drew; that promise rests on every caller deriving its seed here. The formulas are frozen (golden
tests pin their values): changing one changes every result of the project.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where a generator is made: the workflow derives seeds at parse time, without torch
    import torch

_MAX = 2**63


def _name(text: str) -> int:
    """A stable integer for a model or benchmark name (Python's hash() is salted per process)."""
    return zlib.crc32(text.encode())


def _step_salt(seed: int, step: int, salt: int) -> int:
    return ((seed * 1_000_003 + step) * 101 + salt) % _MAX


VLLM_SAMPLE_STRIDE = 2**16
"""The distance between neighbouring prompts' vLLM seeds. Modulo the prime 2**31 - 1, two prompts fewer than
2**15 apart have seeds at least this far apart, so their samples' seeds (seed + k, k < n) never meet while n is
below it."""

_FORMULAS: dict[str, Callable[..., int]] = {
    # The prompt permutation of one epoch: every model of a run, and every replay with the seed, sees it.
    "epoch": lambda seed, epoch: seed * 100_003 + epoch,
    # A model's rollout at a step, by the model's name (not its position) and the process's rank.
    "rollout": lambda seed, step, model, rank: (
        ((seed * 1_000_003 + step) * 65_537 + _name(model) + rank * 7_919) % _MAX
    ),
    # Dynamic sampling's extra prompt draw of a step, round 1, 2, ... (round 0 is the step's batch).
    "resample": lambda seed, step, round_: _step_salt(seed, step, 30 + round_),
    # A model's rollout of such an extra draw (round 0 keeps "rollout").
    "resample_rollout": lambda seed, step, round_, model, rank: (
        ((seed * 1_000_003 + step) * 65_537 + _name(model) + rank * 7_919 + round_ * 104_729) % _MAX
    ),
    # The exchange's prompt choices of a step (random-prompt ablation), shared by both directions.
    "select": lambda seed, step: _step_salt(seed, step, 1),
    # A receiver's draws while building its groups (random admission, SGT's one success).
    "admit": lambda seed, step, model: _step_salt(seed, step, 10 + _name(model)),
    # A receiver's minibatch order (the uniform-order ablation).
    "order": lambda seed, step, model: _step_salt(seed, step, 20 + _name(model)),
    # Evaluation samples of one benchmark.
    "eval": lambda seed, benchmark: seed * 65_537 + _name(benchmark),
    # The r-th re-evaluation of a run's selected checkpoint (eval.selection_runs): far from the seeds 0, 1, 2...
    # that checkpoint and base-model evaluations use, so no re-evaluation repeats the run that selected.
    "selection_run": lambda seed, run: (seed * 1_000_003 + 7_777_777 + run) % _MAX,
    # The complementarity analysis's samples of one model.
    "complementarity": lambda seed, model: seed * 65_537 + _name(model),
    # The slips written into one toy model's warm-up solutions.
    "warmup_slips": lambda seed, model: seed * 65_537 + _name(model) + 1,
    # How one toy model's warm-up solutions pick between its dialect and the common writing (toy.mismatch).
    "warmup_dialect": lambda seed, model: seed * 65_537 + _name(model) + 2,
    # vLLM's per-prompt seed within one generate call, so samples do not depend on batching. vLLM seeds a prompt's
    # k-th sample with seed + k, so prompts' seeds are VLLM_SAMPLE_STRIDE apart: samples of different prompts never
    # share a stream (for up to 32,768 prompts a call, n < 65,536; see VLLM_SAMPLE_STRIDE).
    "vllm_prompt": lambda seed, index: ((seed * 1_000_003 + index) * VLLM_SAMPLE_STRIDE) % (2**31 - 1),
    # The Hugging Face backend's per-prompt seed (train.rollout_seeds: prompt): the same idea for torch's generator.
    "hf_prompt": lambda seed, index: (seed * 1_000_003 + index + 1) % (2**31 - 1),
}

PURPOSES = tuple(_FORMULAS)


_TORCH_SEEDS = 2**64
"""torch's generators take seeds below this. ``derive`` takes every formula's value modulo it, which changes no
value a generator took before (every value of every seed below 2**47 among them), and gives the largest seeds
(graft.typed_config.Seed: up to 2**63 - 1) derived seeds a generator takes."""


def derive(seed: int, purpose: str, *parts: int | str) -> int:
    """The seed for ``purpose`` and its parts (a step, a model name, a rank...), a pure function of them."""
    if purpose not in _FORMULAS:
        raise ValueError(f"unknown seed purpose {purpose!r}; purposes: {', '.join(PURPOSES)}")
    return _FORMULAS[purpose](seed, *parts) % _TORCH_SEEDS


def generator(seed: int, purpose: str, *parts: int | str) -> torch.Generator:
    """A torch generator seeded with ``derive(seed, purpose, *parts)``."""
    import torch

    return torch.Generator().manual_seed(derive(seed, purpose, *parts))
