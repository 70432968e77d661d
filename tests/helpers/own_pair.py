"""config/examples/own-pair.yaml made runnable here: its two models, which cannot be downloaded, replaced by tiny
local model directories, and its training problems by a few written for the test."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from helpers.tiny_qwen3 import tiny_model_dir

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "examples" / "own-pair.yaml"


def own_pair_config(root: Path, **workflow) -> Path:
    """The example with ``models.*.path`` pointing at tiny model directories under ``root``, its data at problems
    written there, its results under ``root/results`` and ``workflow`` settings overridden; returns the config
    file written there."""
    config = yaml.safe_load(EXAMPLE.read_text())
    config["results"] = str(root / "results")
    for name, spec in config["models"].items():
        spec["path"] = str(tiny_model_dir(root / name))
        spec.pop("hub_id")
    rows = [{"id": f"p{i}", "problem": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(64)]
    for split in ("train", "validation"):
        path = root / f"{split}.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        config["data"][split] = str(path)
    config["eval"]["validation"] = config["data"]["validation"]
    config["workflow"].update(workflow)
    out = root / "own-pair.yaml"
    out.write_text(yaml.safe_dump(config, sort_keys=False))
    return out
