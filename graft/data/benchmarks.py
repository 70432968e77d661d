"""Evaluation benchmarks, each normalised to (id, problem, gold answer).

The paper's five sets come from the Hugging Face hub for the paper configuration (``graft fetch dataset``, with the
``datasets`` package; from a local copy of the hub's repositories where ``GRAFT_DATASETS_MIRROR`` names one) or
from local JSON Lines files. Local files may use the field names of
any of the usual sources: the loader
finds the problem under problem/question, the gold answer under answer, or else as the last ``\\boxed{}`` of the
reference solution (Minerva), and the id under id/unique_id/idx (or the line number).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from graft.data.problems import Problem, check_gold, read_jsonl
from graft.engine.reward import last_boxed
from graft.errors import ConfigError
from graft.results import atomic_path


@dataclass(frozen=True)
class HubSource:
    repo: str
    split: str
    size: int
    """Problems in the published split (graft plan's job lengths before the download)."""
    problem: str = "problem"
    answer: str = "answer"


# The hub sources used for the paper configuration; their field names as published.
HUB: dict[str, HubSource] = {
    "math500": HubSource("HuggingFaceH4/MATH-500", "test", 500),
    "aime24": HubSource("HuggingFaceH4/aime_2024", "train", 30),
    "aime25": HubSource("math-ai/aime25", "test", 30),
    "amc23": HubSource("math-ai/amc23", "test", 40, problem="question"),
    "minerva": HubSource("math-ai/minervamath", "test", 272, problem="question"),
}

MIRROR_VARIABLE = "GRAFT_DATASETS_MIRROR"
"""An environment variable naming a folder that holds copies of the hub's dataset repositories in the hub's layout,
``<folder>/<owner>/<name>/`` (as ``hf download --repo-type dataset <owner>/<name> --local-dir
<folder>/<owner>/<name>`` writes them): ``graft fetch dataset`` reads them there instead of on the hub, for a site
whose machines reach no hub (HF_ENDPOINT needs a server)."""

VALIDATION_SIZE = 500
"""Problems of ``math_validation``: MATH test problems outside MATH500 (graft.data.fetch)."""

DATASET_SIZES: dict[str, int] = {**{name: src.size for name, src in HUB.items()}, "math_validation": VALIDATION_SIZE}
"""Problems of each dataset ``graft fetch dataset`` writes, by name."""


def normalise(record: dict, line: int, where: str) -> Problem:
    """(id, problem, gold) from a record in any of the supported layouts."""
    problem = record.get("problem", record.get("question"))
    if not isinstance(problem, str) or not problem.strip():
        raise ConfigError(f"{where} line {line}: no 'problem' or 'question' text")
    answer = record.get("answer")
    if answer is None or (isinstance(answer, str) and not answer.strip()):
        answer = last_boxed(record.get("solution") or "")
    if answer is None:
        raise ConfigError(f"{where} line {line}: no 'answer' and no \\boxed{{}} answer in 'solution'")
    ident = next((record[k] for k in ("id", "unique_id", "idx") if record.get(k) is not None), line)
    return Problem(id=str(ident), problem=problem, answer=str(answer).strip())


def load_benchmark(
    path: str | Path, what: str = "benchmark", reward: Literal["toy", "math"] | None = None
) -> list[Problem]:
    """A local JSON Lines benchmark, normalised; bad files are refused with one line naming them, and with
    ``reward``, a gold answer that grader could never reward."""
    problems, seen = [], set()
    for number, record in read_jsonl(path, what):
        problem = normalise(record, number, f"{what}: {str(path)!r}")
        if problem.id in seen:
            raise ConfigError(f"{what}: {str(path)!r} line {number} repeats id {problem.id!r}")
        if reward is not None:
            check_gold(problem, reward, f"{what}: {str(path)!r} line {number}")
        seen.add(problem.id)
        problems.append(problem)
    if not problems:
        raise ConfigError(f"{what}: {str(path)!r} holds no problems")
    return problems


def fetch_from_hub(source: HubSource, out: str | Path) -> Path:
    """Download a dataset with ``datasets`` (from the folder ``GRAFT_DATASETS_MIRROR`` names, if set) and write it as
    normalised JSON Lines (id, problem, answer)."""
    try:
        from datasets import load_dataset
    except ImportError:
        raise ConfigError("fetching from the hub needs the 'datasets' package: pip install datasets") from None
    where = source.repo
    mirror = os.environ.get(MIRROR_VARIABLE)
    if mirror:
        local = Path(mirror) / source.repo
        if not local.is_dir():
            raise ConfigError(
                f"{MIRROR_VARIABLE}={mirror}: no folder {str(local)!r}; expected a copy of the hub's {source.repo!r} "
                "in the hub's layout"
            )
        where = str(local)
    try:
        # every split, so that a missing one is named beside those there are
        splits = load_dataset(where)
    except FileNotFoundError:
        if not mirror:
            raise
        raise ConfigError(
            f"{MIRROR_VARIABLE}: {where!r} holds no data files that datasets reads (Parquet, JSON Lines, CSV, ... at "
            "its top or under data/, named by split)"
        ) from None
    if source.split not in splits:
        raise ConfigError(f"dataset {where!r} has no split {source.split!r}; its splits: {', '.join(splits)}")
    rows = splits[source.split]
    out = Path(out)
    with atomic_path(out) as tmp, tmp.open("w") as handle:
        for i, record in enumerate(rows):
            renamed = {**record, "problem": record[source.problem], "answer": record.get(source.answer)}
            p = normalise(renamed, i + 1, f"{source.repo}")
            handle.write(json.dumps({"id": p.id, "problem": p.problem, "answer": p.answer}) + "\n")
    return out
