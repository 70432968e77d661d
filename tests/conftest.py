"""Session fixtures; the code that builds them lives in tests/helpers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from helpers.forced import FORCED, TEMPLATE, build_forced_model


@pytest.fixture(scope="session")
def forced_world(tmp_path_factory) -> dict[str, Path]:
    """Two warmed-up tiny models (A: char-level Qwen3, B: BPE GPT-2), the forced problems and a config."""
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("forced")
    a = build_forced_model(root / "A", "qwen3", "chars", 258, 0)
    b = build_forced_model(root / "B", "gpt2", "gpt2_regex", 300, 1)
    data = root / "train.jsonl"
    data.write_text("".join(json.dumps({"id": k, "problem": v[0], "answer": v[1]}) + "\n" for k, v in FORCED.items()))
    config = {
        "results": str(root / "results"),
        "models": {"A": {"path": str(a), "template": TEMPLATE}, "B": {"path": str(b), "template": TEMPLATE}},
        "data": {"train": str(data)},
        "train": {
            "steps": 3,
            "prompts_per_step": 4,
            "minibatches": 2,
            "lr": 1e-4,
            "max_prompt_tokens": 64,
            "max_response_tokens": 16,
            "checkpoint_every": 2,
        },
        "reward": {"kind": "toy"},
        "pairs": {"P": ["A", "B"]},
    }
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return {"root": root, "A": a, "B": b, "config": path, "data": data}
