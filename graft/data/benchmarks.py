"""The paper's evaluation benchmarks on the Hugging Face hub, and the download of any hub dataset.

The paper's five sets come from the hub for the paper configuration (``graft fetch dataset``, with the ``datasets``
package; from a local copy of the hub's repositories where ``GRAFT_DATASETS_MIRROR`` names one), as does any
dataset a config names by its hub id (graft.config.models.HUB_ID). A download is read as a local file is
(graft.data.problems: graft's, TRL's or verl's layout) and written as graft's JSON Lines, which the jobs read.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from graft.config.models import HubDataset
from graft.data.problems import problem_record, to_problem
from graft.errors import ConfigError
from graft.results import atomic_path

# The hub sources used for the paper configuration.
HUB: dict[str, HubDataset] = {
    "math500": HubDataset("HuggingFaceH4/MATH-500", "test"),
    "aime24": HubDataset("HuggingFaceH4/aime_2024", "train"),
    "aime25": HubDataset("math-ai/aime25", "test"),
    "amc23": HubDataset("math-ai/amc23", "test"),
    "minerva": HubDataset("math-ai/minervamath", "test"),
}

MIRROR_VARIABLE = "GRAFT_DATASETS_MIRROR"
"""An environment variable naming a folder that holds copies of the hub's dataset repositories in the hub's layout,
``<folder>/<owner>/<name>/`` (as ``hf download --repo-type dataset <owner>/<name> --local-dir
<folder>/<owner>/<name>`` writes them): ``graft fetch dataset`` reads them there instead of on the hub, for a site
whose machines reach no hub (HF_ENDPOINT needs a server)."""

VALIDATION_SIZE = 500
"""Problems of ``math_validation``: MATH test problems outside MATH500 (graft.data.fetch)."""

DATASET_SIZES: dict[str, int] = {
    "math500": 500,
    "aime24": 30,
    "aime25": 30,
    "amc23": 40,
    "minerva": 272,
    "math_validation": VALIDATION_SIZE,
}
"""Problems of each paper dataset ``graft fetch dataset`` writes, by name (graft plan's job lengths before the
download)."""


def fetch_from_hub(source: HubDataset, out: str | Path) -> Path:
    """Download a dataset's split with ``datasets`` (from the folder ``GRAFT_DATASETS_MIRROR`` names, if set) and
    write it as graft's JSON Lines, each row read as a local file's record is (``to_problem``)."""
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
        splits = load_dataset(where, source.config)
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
        for number, record in enumerate(rows, start=1):
            problem = to_problem(record, number, f"{source.id} row {number}")
            handle.write(json.dumps(problem_record(problem)) + "\n")
    return out
