"""Downloads for the paper configuration: model snapshots and datasets from the Hugging Face hub.

Everything else reads only local files, so these are the only network steps, each one rule of the workflow.
"""

from __future__ import annotations

from pathlib import Path

from graft.config import RunConfig
from graft.config.models import HUB_ID, HubDataset, hub_dataset
from graft.data.benchmarks import HUB, VALIDATION_SIZE, fetch_from_hub
from graft.errors import ConfigError
from graft.results import begin_dir, commit_dir, write_text

# MATH train (7,500 problems); the gold answer is the last \boxed{} of each solution.
MATH_TRAIN = HubDataset("DigitalLearningGmbH/MATH-lighteval", "train")
MATH_TEST = HubDataset("DigitalLearningGmbH/MATH-lighteval", "test")
SOURCES = {**HUB, "math_train": MATH_TRAIN}
"""The datasets ``graft fetch dataset`` knows by name, besides math_validation and any hub dataset."""


def fetch_model(hub_id: str, out: str | Path, check: tuple[RunConfig, str] | None = None) -> Path:
    """Snapshot a model repository's safetensors weights, config and tokenizer files (a chat template may be a
    ``chat_template.jinja`` of its own) into ``out``, checked (``check_model_dir``) before the snapshot is put in
    place. ``check``: (config, model name) whose prompt format and sequence lengths the download must serve."""
    from huggingface_hub import snapshot_download

    # here, not at the top: the workflow plans from this module at parse time, and the model check's transformers
    # takes seconds to import
    from graft.engine.policy import check_model_dir

    out = Path(out)
    tmp = begin_dir(out)
    snapshot_download(
        hub_id,
        local_dir=tmp,
        allow_patterns=["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja", "tokenizer*"],
    )
    check_model_dir(tmp, f"hub model {hub_id!r}", *(check or ()))
    commit_dir(tmp, out)
    return out


def fetch_math_validation(out: str | Path, size: int = VALIDATION_SIZE, seed: int = 0) -> Path:
    """A validation set disjoint from the test benchmarks: ``size`` MATH test problems that are not in MATH500,
    drawn with a seeded shuffle. Checkpoint selection on it does not look at the reported benchmarks."""
    import json
    import random
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        full = [
            json.loads(line) for line in fetch_from_hub(MATH_TEST, Path(tmp) / "test.jsonl").read_text().splitlines()
        ]
        held = {
            json.loads(line)["problem"]
            for line in fetch_from_hub(HUB["math500"], Path(tmp) / "m500.jsonl").read_text().splitlines()
        }
    pool = [r for r in full if r["problem"] not in held]
    random.Random(seed).shuffle(pool)
    return write_text(out, "".join(json.dumps(r) + "\n" for r in pool[:size]))


def fetch_dataset(name: str, out: str | Path) -> Path:
    """A paper benchmark (math500, aime24, aime25, amc23, minerva), math_train, math_validation, or a hub dataset by
    its id or its name in the results tree (graft.config.models.hub_dataset)."""
    if name == "math_validation":
        return fetch_math_validation(out)
    source = SOURCES.get(name) or hub_dataset(name, "--name")
    if source is None:
        raise ConfigError(
            f"--name: dataset {name!r} is unknown; known: {', '.join(SOURCES)}, math_validation, or {HUB_ID}"
        )
    return fetch_from_hub(source, out)
