"""The toy world's data files: the task's splits as JSON Lines (``graft toy data``), and reading them back. Without
torch, so that the workflow's first job does not wait for it to load."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

from graft.config import ToySpec
from graft.errors import ConfigError
from graft.results import write_text
from graft.toy.task import ToyProblem, make_splits


def _write_jsonl(path: Path, problems: list[ToyProblem]) -> None:
    write_text(path, "".join(json.dumps(p.to_json()) + "\n" for p in problems))


def write_data(spec: ToySpec, out: Path) -> dict[str, int]:
    """Under ``out``: warmup.jsonl (the whole train split, where warm-up examples come from), train.jsonl (the RL
    prompts: ``train_per_family`` of each family from the train split), validation.jsonl and test/<family>.jsonl.
    Returns the split sizes."""
    families = tuple(spec.families)
    splits = make_splits(
        spec.seed, spec.test_per_family, spec.validation_per_family, spec.level2_share, families, spec.min_slip_points
    )
    rng = random.Random(spec.seed)
    prompts = []
    for family in families:
        pool = [p for p in splits.train if p.family == family]
        prompts += rng.sample(pool, min(spec.train_per_family, len(pool)))
    rng.shuffle(prompts)
    _write_jsonl(out / "warmup.jsonl", splits.train)
    _write_jsonl(out / "train.jsonl", prompts)
    _write_jsonl(out / "validation.jsonl", splits.validation)
    for family, problems in splits.test.items():
        _write_jsonl(out / "test" / f"{family}.jsonl", problems)
    return {
        "warmup_pool": len(splits.train),
        "train": len(prompts),
        "validation": len(splits.validation),
        "test_per_family": spec.test_per_family,
    }


def read_problems(path: Path) -> list[ToyProblem]:
    """The toy problems of a file ``graft toy data`` wrote; ConfigError in one line naming the first bad line."""
    fields = ", ".join(f.name for f in dataclasses.fields(ToyProblem))
    problems = []
    for number, line in enumerate(path.read_text().split("\n"), 1):
        if not line.strip():
            continue
        try:
            problems.append(ToyProblem(**json.loads(line)))
        except (ValueError, TypeError):
            raise ConfigError(
                f"{str(path)!r} line {number} is not a toy problem: expected a JSON object with {fields}, as "
                "`graft toy data` writes (remove the toy data directory's files to have them written again)"
            ) from None
    return problems
