"""Session fixtures and hypothesis's profiles; the code that builds the fixtures lives in tests/helpers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import yaml
from helpers.forced import build_forced_model, forced_config, write_forced_problems
from hypothesis import settings

# No per-example deadline: torch's first call of a kernel, or a busy machine, is not a failure. CI runs the same
# examples on every run (derandomize), so a red run is reproducible and a green one is not luck of the draw.
settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


TIERS = {
    "test_workflow.py": "workflow",
    "test_distributed.py": "distributed",
    "test_vllm_backend.py": "vllm",
    "test_vllm_engine.py": "vllm",
}
"""Each integration file's tier (pyproject.toml lists the markers); every other test under tests/unit is a unit test
and every other one under tests/integration an integration test."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its tier from where it lives, so that ``-m`` selects tiers (.ci/run does)."""
    for item in items:
        path = Path(item.fspath)
        tier = "unit" if "unit" in path.parts else TIERS.get(path.name, "integration")
        item.add_marker(tier)


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
