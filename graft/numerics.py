"""The same digits on every x86-64 machine: CPU kernels pinned to one instruction set before torch runs an op.

Float results on the CPU depend on which kernels run: PyTorch's own (ATen picks AVX-512, AVX2 or plain code at
run time by the CPU), MKL's BLAS (it dispatches by CPU too) and oneDNN's. A 1,500-step warm-up followed by RL
turns that last-bit difference into points of score, so every ``graft`` process pins all three to AVX2, which
every x86-64 machine this project targets has: ``ATEN_CPU_CAPABILITY=avx2``, ``MKL_CBWR=AVX2,STRICT`` (MKL's
conditional numerical reproducibility: the same bits on any CPU that supports the branch, strict mode for the
BLAS calls that would otherwise still differ) and ``ONEDNN_MAX_CPU_ISA=AVX2``. Thread counts stay the config's
(MKL's reproducibility holds only for a fixed thread count).

``GRAFT_CPU_NUMERICS=native`` turns the pin off (fastest kernels, machine-dependent bits). GPU kernels are not
affected. What was set, and what torch reports using, goes into every run's ``run.json``.
"""

from __future__ import annotations

import os
import platform

PIN_VARIABLE = "GRAFT_CPU_NUMERICS"
"""``avx2`` (the default) or ``native``."""

PINS: dict[str, dict[str, str]] = {
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2,STRICT", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "native": {},
}


def pin_cpu_numerics(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Set the kernel-dispatch variables of ``GRAFT_CPU_NUMERICS`` (default avx2) in ``environ`` (the process
    environment), overriding what is there, and return them. Must run before torch executes its first op: MKL
    and ATen read them once (importing ``graft`` does it). Child processes (torchrun workers, Snakemake jobs,
    the grading pool) inherit them. An unknown mode sets nothing; ``check_mode`` refuses it."""
    environ = os.environ if environ is None else environ
    pins = PINS.get(environ.get(PIN_VARIABLE, "avx2"), {})
    environ.update(pins)
    return dict(pins)


def check_mode(environ: dict[str, str] | None = None) -> None:
    """Refuse an unknown ``GRAFT_CPU_NUMERICS`` with one line (the command line calls it before any work)."""
    from graft.errors import ConfigError

    mode = (os.environ if environ is None else environ).get(PIN_VARIABLE, "avx2")
    if mode not in PINS:
        raise ConfigError(f"{PIN_VARIABLE}: {mode!r} is not allowed; expected one of {', '.join(PINS)}")


def numerics_record() -> dict:
    """What decides this process's CPU float bits, for ``run.json``: the pin, the kernels torch reports using,
    the thread count, the CPU and the library versions."""
    import torch

    return {
        "mode": os.environ.get(PIN_VARIABLE, "avx2"),
        "environment": {k: os.environ.get(k) for k in PINS["avx2"]},
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "machine": platform.machine(),
        "cpu": cpu_model(),
    }


def cpu_vendor() -> str:
    """``amd``, ``intel`` or ``other``: under the same pin the miniature's digits differ between AMD EPYC and Intel
    Xeon processors (docs/reproducibility.md), so the digest check keeps a record per vendor."""
    model = (cpu_model() or "").lower()
    return next((vendor for vendor in ("amd", "intel") if vendor in model), "other")


def cpu_model() -> str | None:
    """The CPU's model name (/proc/cpuinfo), or None where none is found."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None
