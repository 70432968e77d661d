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


# What torch 2.14.0+cu130's torch.cuda.init() raises in each case (the wording of its c10/cuda library)
NO_DRIVER = (
    "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver from "
    "http://www.nvidia.com/Download/index.aspx"
)
TOO_OLD = (
    "The NVIDIA driver on your system is too old (found version 12080). Please update your GPU driver by downloading "
    "and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: "
    "https://pytorch.org to install a PyTorch version that has been compiled with your version of the CUDA driver."
)
NO_DEVICE = "No CUDA GPUs are available"
INIT_FAILED = "CUDA driver initialization failed, you might not have a CUDA gpu."


def gpu_build_without_cuda(monkeypatch, cuda: str | None, init_error: str | None) -> None:
    """vLLM's GPU build beside a torch for CUDA ``cuda`` (None: a CPU torch) on a node where CUDA does not start:
    torch.cuda.init raises ``init_error``, as torch does on such a node (the GPU itself cannot run here)."""

    def init():
        if init_error is not None:
            raise RuntimeError(init_error)

    monkeypatch.setattr(vllm, "installed_build", lambda: "gpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", cuda)
    monkeypatch.setattr(torch.cuda, "init", init)


@pytest.mark.parametrize(
    ("cuda", "init_error", "said"),
    [
        ("13.0", NO_DRIVER, "there is no GPU: this machine has no NVIDIA driver; run on a GPU node, or install"),
        (
            "13.0",
            TOO_OLD,
            "driver is too old for the GPU build's CUDA 13.0 (torch {torch}): it supports CUDA up to 12.8; run on "
            "nodes whose driver is branch 580 or newer",
        ),
        (
            "12.8",
            "The NVIDIA driver on your system is too old (found version 11080). Please update your GPU driver",
            "too old for the GPU build's CUDA 12.8 (torch {torch}): it supports CUDA up to 11.8; run on nodes whose "
            "driver is branch 525 or newer",
        ),
        ("13.0", NO_DEVICE, "the NVIDIA driver is there and shows this job no device (CUDA_VISIBLE_DEVICES='')"),
        ("13.0", INIT_FAILED, f"vLLM's GPU build cannot start CUDA here: {INIT_FAILED}"),
        (None, None, "vLLM's GPU build is installed beside a CPU build of torch ({torch}); build the GPU environment"),
    ],
    ids=["no-driver", "driver-too-old", "cuda12-driver-too-old", "no-device", "init-failed", "cpu-torch"],
)
def test_the_gpu_build_where_cuda_cannot_start_says_why_in_one_line(monkeypatch, cuda, init_error, said):
    gpu_build_without_cuda(monkeypatch, cuda, init_error)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(ConfigError) as err:
        vllm.check_available()
    assert said.format(torch=torch.__version__) in str(err.value)
    assert "\n" not in str(err.value)


def test_the_cpu_build_runs_without_a_gpu(monkeypatch):
    gpu_build_without_cuda(monkeypatch, "13.0", NO_DRIVER)
    monkeypatch.setattr(vllm, "installed_build", lambda: "cpu")
    assert vllm.check_available() is None


def test_an_engine_off_a_gpu_names_in_one_line_what_it_runs_without():
    assert vllm.gpu_only_features(on_cpu=True, colocated=True) == (
        "no CUDA graphs and no sleep mode (GPU only); the engine keeps its weights and KV cache between rollouts"
    )
    assert vllm.gpu_only_features(on_cpu=True, colocated=False) == "no CUDA graphs (GPU only)"
    assert vllm.gpu_only_features(on_cpu=False, colocated=True).startswith("no sleep mode (GPU only)")
