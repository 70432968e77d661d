"""Session fixtures; the code that builds them lives in tests/helpers."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from helpers.forced import build_forced_model, forced_config, write_forced_problems


@pytest.fixture(scope="session")
def forced_world(tmp_path_factory) -> dict[str, Path]:
    """Two warmed-up tiny models (A: char-level Qwen3, B: BPE GPT-2), the forced problems and a config."""
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("forced")
    a = build_forced_model(root / "A", "qwen3", "chars", 258, 0)
    b = build_forced_model(root / "B", "gpt2", "gpt2_regex", 300, 1)
    data = write_forced_problems(root / "train.jsonl")
    config = forced_config(root, a, b, data)
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return {"root": root, "A": a, "B": b, "config": path, "data": data}
