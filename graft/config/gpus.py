"""The GPUs graft knows, each set once: its memory, its peak and its decode speed, recognised from the GRES type a
Slurm site gives it (``slurm.gpu_type``). Naming the type gives ``graft plan`` every figure it plans a GPU job with
(``RunConfig.gpu``); a config gives them itself for a GPU this table lacks.

Only the H200's memory was measured here (bench/results/gpu_check_machine.txt, and 150.75 GB from CUDA on the same
machine); every peak is the vendor's datasheet, and every other memory figure and every decode speed is assumed, as
each row says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from graft.errors import ConfigError


@dataclass(frozen=True)
class GpuModel:
    """One kind of GPU as ``graft plan`` sees it."""

    name: str
    """As its vendor sells it, e.g. ``H100 80 GB``."""
    family: str
    """The word that names it in a GRES type (``h100`` in ``nvidia_h100_80gb_hbm3``)."""
    nominal_gb: int
    """The datasheet's memory, which a GRES type may spell (``80gb``) to tell the models of a family apart."""
    memory_gb: float
    """Memory as CUDA reports it (``torch.cuda.get_device_properties(i).total_memory``), in GB of 1e9 bytes: the unit
    of every figure of the memory plan."""
    memory_source: str
    """Whether ``memory_gb`` was measured, and where, or what it assumes."""
    peak_tflops: float
    """Dense bf16 tensor TFLOP/s, the vendor's datasheet (half its figure with sparsity)."""
    bandwidth_tb_s: float
    """Memory bandwidth, the vendor's datasheet: sampling a batch of sequences reads every weight and the KV cache
    for each token, so the plan takes a GPU's tokens per second to scale with it."""
    variants: tuple[str, ...] = ()
    """Words of a GRES type that name another model of the family, with another peak or bandwidth (``nvl``,
    ``pcie``), which this table does not hold: such a type is unknown."""


ASSUMED_MEMORY = "assumed: the total PyTorch reports for this model"
"""What an unmeasured ``memory_gb`` rests on: the capacity PyTorch's out-of-memory messages give for the model."""

GPUS = (
    GpuModel("A100 40 GB", "a100", 40, 42.3, f"{ASSUMED_MEMORY} (39.4 GiB)", 312, 1.555),
    GpuModel("A100 80 GB", "a100", 80, 85.0, f"{ASSUMED_MEMORY} (79.2 GiB)", 312, 2.039),
    GpuModel("H100 80 GB", "h100", 80, 84.9, f"{ASSUMED_MEMORY} (79.1 GiB)", 989, 3.35, ("nvl", "pcie")),
    GpuModel("H200 141 GB", "h200", 141, 150.75, "measured (bench/results/gpu_check_machine.txt)", 989, 4.8, ("nvl",)),
    GpuModel("B200", "b200", 180, 191.5, f"{ASSUMED_MEMORY} (178.4 GiB)", 2250, 8.0),
    GpuModel("L40S", "l40s", 48, 47.8, f"{ASSUMED_MEMORY} (44.5 GiB)", 362, 0.864),
)
"""The known GPUs (the SXM boards of the A100, H100 and H200; HGX B200)."""

REFERENCE = GPUS[3]
"""The GPU whose tokens per second the config gives (``workflow.rollout_tokens_per_s``,
``workflow.generation_tokens_per_s``): the paper's H200, to whose Table 5 the rollout rates are fitted."""

SIZE = re.compile(r"(\d+)gb?")
"""A word of a GRES type that spells a memory size: ``80gb``, ``80g``."""


def recognise(gres_type: str) -> GpuModel | None:
    """The GPU a site's GRES type names, or None: its family's word among the type's words (``nvidia_h100_80gb_hbm3``:
    nvidia, h100, 80gb, hbm3), told apart by a memory size where the type spells one. A family's type that spells
    no size is its smallest model (``a100``: the 40 GB one), so that the plan never counts memory a GPU may lack;
    a size no model has, or a variant word (``h100_nvl``), is unknown."""
    words = re.split(r"[^a-z0-9]+", gres_type.lower())
    sizes = {int(m.group(1)) for word in words if (m := SIZE.fullmatch(word))}
    models = [g for g in GPUS if g.family in words]
    if not models or any(v in words for g in models for v in g.variants):
        return None
    if sizes:
        sized = [g for g in models if g.nominal_gb in sizes]
        return sized[0] if len(sized) == 1 else None
    return min(models, key=lambda g: g.memory_gb)


def known_spellings() -> list[str]:
    """A GRES type for each known GPU, as ``recognise`` reads it: its family, with its memory where the family has
    a smaller model (``a100``, ``a100_80gb``)."""
    spellings = []
    for g in GPUS:
        smallest = min((m for m in GPUS if m.family == g.family), key=lambda m: m.memory_gb)
        spellings.append(g.family if g is smallest else f"{g.family}_{g.nominal_gb}gb")
    return spellings


@dataclass(frozen=True)
class Gpu:
    """The GPU of a config's jobs as the plan uses it (``RunConfig.gpu``)."""

    name: str
    memory_gb: float
    """As ``GpuModel.memory_gb``."""
    peak_tflops: float | None
    """Dense bf16 TFLOP/s; None: not given (a config whose job lengths are not estimated)."""
    speed: float | None
    """Its tokens per second over the reference GPU's (``REFERENCE``); None: not given."""
    sources: tuple[str, ...]
    """One line per figure: its value and where it comes from (measured, a datasheet, assumed, the config)."""


def job_gpu(
    gpu_type: str | None,
    *,
    memory_gb: float | None,
    peak_tflops: float | None,
    speed_vs_h200: float | None,
    priced: bool,
) -> Gpu:
    """The GPU of ``gpu_type`` (``slurm.gpu_type``), each of its figures replaced by the config's where it sets one
    (``scale.gpu_memory_gb``, ``workflow.gpu_peak_tflops``, ``workflow.gpu_speed_vs_h200``). A type the table lacks,
    or none, takes the config's: its memory always, its peak and speed where the config gives tokens per second to
    price job lengths with (``priced``); one ConfigError line names those missing."""
    known = recognise(gpu_type) if gpu_type else None
    memory = memory_gb or (known.memory_gb if known else None)
    peak = peak_tflops or (known.peak_tflops if known else None)
    speed = speed_vs_h200 or (known.bandwidth_tb_s / REFERENCE.bandwidth_tb_s if known else None)
    needed = (("scale.gpu_memory_gb", memory, True), ("workflow.gpu_peak_tflops", peak, priced))
    missing = [
        name for name, value, need in (*needed, ("workflow.gpu_speed_vs_h200", speed, priced)) if need and not value
    ]
    if missing:
        which = f"{gpu_type!r} is no GPU graft knows" if gpu_type else "null asks for any GPU of the partition"
        raise ConfigError(
            f"slurm.gpu_type: {which}; name a type it knows ({', '.join(known_spellings())}, or a site's spelling of "
            f"one: graft/config/gpus.py), or give {' and '.join(missing)}"
        )
    name = known.name if known else f"{gpu_type or 'any GPU of the partition'}, unknown to graft"
    sources = [
        f"GPU: {name} (slurm.gpu_type: {gpu_type or 'null'})",
        f"memory {memory:g} GB per GPU, " + ("set (scale.gpu_memory_gb)" if memory_gb else known.memory_source),
    ]
    if peak:
        source = "set (workflow.gpu_peak_tflops)" if peak_tflops else "the vendor's datasheet"
        sources.append(f"peak {peak:g} TFLOP/s dense bf16 per GPU, {source}")
    if speed_vs_h200:
        sources.append(f"tokens/s {speed:g} x an H200's, set (workflow.gpu_speed_vs_h200)")
    elif known is REFERENCE:
        sources.append("tokens/s as the config gives them, an H200's")
    elif known:
        sources.append(
            f"tokens/s {speed:.2f} x an H200's, assumed: memory bandwidth {known.bandwidth_tb_s:g} over "
            f"{REFERENCE.bandwidth_tb_s:g} TB/s (the vendor's datasheets)"
        )
    return Gpu(name, memory, peak, speed, tuple(sources))
