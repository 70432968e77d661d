"""Prompt sets (JSON Lines with id, problem, answer) and the seeded, stateless prompt sampler."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

from graft import seeding
from graft.engine.reward import gold_problem
from graft.errors import ConfigError


@dataclass(frozen=True)
class Problem:
    id: str
    problem: str
    answer: str


def read_jsonl(path: str | Path, what: str) -> list[tuple[int, dict]]:
    """(line number, object) for every non-blank line of a JSON Lines file; a missing file, text that is not
    UTF-8, a line that is not JSON or not an object is refused with one line naming it. A byte-order mark is
    skipped, as the config's reader skips one; lines end at ``\n`` only, as JSON Lines say (a raw U+2028, U+2029 or
    U+0085 inside a JSON string is text, which ``str.splitlines`` would cut)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{what}: no such file {str(path)!r}")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        line = path.read_bytes()[: err.start].count(b"\n") + 1
        raise ConfigError(f"{what}: {str(path)!r} line {line} is not UTF-8 text (JSON Lines are UTF-8)") from None
    records = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            raise ConfigError(f"{what}: {str(path)!r} line {number} is not valid JSON") from None
        if not isinstance(record, dict):
            raise ConfigError(f"{what}: {str(path)!r} line {number} is not a JSON object")
        records.append((number, record))
    return records


def load_problems(path: str | Path, what: str = "data", reward: Literal["toy", "math"] | None = None) -> list[Problem]:
    """Read a JSON Lines prompt file; a missing file or a bad line is refused with one line naming it, and with
    ``reward``, a gold answer that grader could never reward (``check_gold``)."""
    problems, seen = [], set()
    for number, record in read_jsonl(path, what):
        if not all(isinstance(record.get(k), str) for k in ("id", "problem")):
            raise ConfigError(f"{what}: {str(path)!r} line {number} needs string fields 'id' and 'problem'")
        empty = next((k for k in ("id", "problem") if not record[k].strip()), None)
        if empty:
            raise ConfigError(f"{what}: {str(path)!r} line {number} has an empty {empty!r}; expected text")
        if "answer" not in record:
            raise ConfigError(f"{what}: {str(path)!r} line {number} has no 'answer'")
        if record["id"] in seen:
            raise ConfigError(f"{what}: {str(path)!r} line {number} repeats id {record['id']!r}")
        seen.add(record["id"])
        problems.append(Problem(record["id"], record["problem"], str(record["answer"])))
        if reward is not None:
            check_gold(problems[-1], reward, f"{what}: {str(path)!r} line {number}")
    if not problems:
        raise ConfigError(f"{what}: {str(path)!r} holds no problems")
    return problems


def check_gold(problem: Problem, reward: Literal["toy", "math"], where: str) -> None:
    """Refuse a problem whose gold answer the ``reward`` grader cannot read, so that no run scores 0 on it
    unnoticed."""
    why = gold_problem(problem.answer, reward)
    if why:
        raise ConfigError(f"{where} (id {problem.id!r}): gold answer {problem.answer!r} {why}")


def batch_indices(step: int, batch_size: int, num_problems: int, seed: int) -> list[int]:
    """The prompt indices of a step: consecutive slices of per-epoch permutations seeded by (seed, epoch).

    An epoch is ``num_problems // batch_size`` steps and the last partial batch of each permutation is dropped,
    as verl's sampler does (the paper's 174 steps are 3 x 58 batches of 128 from 7,500 prompts), so no batch
    mixes two epochs or repeats a prompt. Stateless in the step, so every model of a run, a resumed run and an
    archive replay with the same seed see the same prompt order.
    """
    per_epoch = num_problems // batch_size
    if per_epoch == 0:
        raise ValueError(f"a batch of {batch_size} prompts needs at least as many problems, got {num_problems}")
    epoch, position = divmod(step, per_epoch)
    generator = seeding.generator(seed, "epoch", epoch)
    permutation = torch.randperm(num_problems, generator=generator).tolist()
    return permutation[position * batch_size : (position + 1) * batch_size]
