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
    "test_workflow_plans.py": "workflow",
    "test_page_dry_runs.py": "workflow",
    "test_distributed.py": "distributed",
    "test_vllm_backend.py": "vllm",
    "test_vllm_engine.py": "vllm",
}
"""Each integration file's tier (pyproject.toml lists the markers); every other test under tests/unit is a unit test
and every other one under tests/integration an integration test."""


SLOW_TIERS = ("workflow", "distributed")
"""The tiers that run whole workflows and torchrun jobs (minutes each): CI runs them, ``pytest --full`` runs them
here; a plain ``pytest`` runs every other test, every module covered, in about ten minutes on two cores."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--full",
        action="store_true",
        help=f"also run the slow tiers ({', '.join(SLOW_TIERS)}: the Snakemake workflow end to end, torchrun runs)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its tier from where it lives, so that ``-m`` selects tiers (.ci/run does); leave the slow
    tiers out unless ``--full`` or a ``-m`` expression asks for tests by tier."""
    for item in items:
        path = Path(item.fspath)
        tier = "unit" if "unit" in path.parts else TIERS.get(path.name, "integration")
        item.add_marker(tier)
    if config.getoption("--full") or config.option.markexpr:
        return
    slow = [item for item in items if any(item.get_closest_marker(tier) for tier in SLOW_TIERS)]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if item not in slow]
        config.stash[_LEFT_OUT] = len(slow)


_LEFT_OUT = pytest.StashKey[int]()


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    left_out = config.stash.get(_LEFT_OUT, 0)
    if left_out:
        terminalreporter.write_line(
            f"{left_out} tests of the slow tiers ({', '.join(SLOW_TIERS)}) not run: pytest --full runs them (CI does)"
        )


THREADS = torch.get_num_threads()
"""torch's thread count when the session starts. Results depend on it (reductions split by thread), and it is
process-global: a test that changes it, or runs a command in-process that does (``--threads``), must not hand its
count on to whichever test runs next in that worker."""


@pytest.fixture(autouse=True)
def _torch_threads():
    yield
    torch.set_num_threads(THREADS)


@pytest.fixture(scope="session")
def forced_world(tmp_path_factory) -> dict[str, Path]:
    """Two warmed-up tiny models (A: char-level Qwen3, B: BPE GPT-2), the forced problems and a config; built on
    one thread, which the test that asked for them first does not inherit."""
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("forced")
    try:
        a = build_forced_model(root / "A", "qwen3", "chars", 258, 0)
        b = build_forced_model(root / "B", "gpt2", "gpt2_regex", 300, 1)
    finally:
        torch.set_num_threads(THREADS)
    data = write_forced_problems(root / "train.jsonl")
    config = forced_config(root, a, b, data)
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return {"root": root, "A": a, "B": b, "config": path, "data": data}
