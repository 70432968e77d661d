"""The trained weights into a rollout engine before each rollout that follows an update, one parameter at a time.

A sharded model is gathered parameter by parameter (every process takes part in each gather, a collective), so no
process ever holds the whole model gathered, on its GPU or in memory; each gathered tensor is cast to the engine's
dtype, moved to the CPU and, on the first process of each node only, appended to one safetensors file, which every
engine of that node then reads tensor by tensor (memory-mapped). Per node and step that is one copy of the model in
the engine's dtype written and read, where gathering the whole model in float32 on every GPU and writing one file
per process cost the model in float32 on each GPU and the engine's copy once per process. A tied output projection
(the input embedding under another name) is written once, its name kept in the file's metadata.

The file lives in the node's memory (``/dev/shm``) or in ``scale.sync_dir``, never in ``TMPDIR``, which Slurm
carries over from the submitting shell and which is often a shared file system or a small tmpfs.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from graft.engine.distributed import World
from graft.engine.slurm_job import this_job_run
from graft.errors import ConfigError

SAFETENSORS_DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}


@dataclass(frozen=True)
class WeightStream:
    """A model's full tensors in state-dict order, gathered one at a time on every process."""

    model: torch.nn.Module
    """The trained module: plain, sharded with FSDP2 (DTensor parameters) or partitioned by DeepSpeed ZeRO-3."""
    unique: bool = False
    """Each tensor once: a name whose tensor an earlier name holds (a tied output projection) is left out and
    listed by ``aliases``; under FSDP2 and ZeRO-3 that also saves its gather."""

    def _items(self) -> Iterator[tuple[str, torch.Tensor]]:
        seen = set()
        for name, value in self.model.state_dict(keep_vars=True).items():
            if self.unique and id(value) in seen:
                continue
            seen.add(id(value))
            yield name, value

    def aliases(self) -> dict[str, str]:
        """Each name whose tensor an earlier name holds -> that name (what ``unique`` leaves out)."""
        first: dict[int, str] = {}
        out = {}
        for name, value in self.model.state_dict(keep_vars=True).items():
            if id(value) in first:
                out[name] = first[id(value)]
            else:
                first[id(value)] = name
        return out

    def entries(self) -> list[tuple[str, tuple[int, ...]]]:
        """Names and full shapes, known without gathering anything."""
        out = []
        for name, value in self._items():
            shape = getattr(value, "ds_shape", None) or value.shape  # a ZeRO-3 partition keeps its full shape
            out.append((name, tuple(shape)))
        return out

    def tensors(self) -> Iterator[tuple[str, torch.Tensor]]:
        """Each tensor whole, then released: a collective per tensor under FSDP2 or ZeRO-3, so every process must
        consume the whole stream."""
        for name, value in self._items():
            if hasattr(value, "full_tensor"):  # FSDP2's DTensor
                yield name, value.full_tensor().detach()
            elif hasattr(value, "ds_id"):  # a ZeRO-3 partition
                import deepspeed

                with deepspeed.zero.GatheredParameters([value], modifier_rank=None):
                    yield name, value.detach().clone()
            else:
                yield name, value.detach()


def sync_bytes(weights: WeightStream, dtype: torch.dtype) -> int:
    """The size of the weight sync's file: each tensor once, in the engine's dtype."""
    unique = WeightStream(weights.model, unique=True)
    return write_safetensors(None, unique.entries(), dtype, None, {ALIASES_KEY: json.dumps(unique.aliases())})


ALIASES_KEY = "graft_aliases"
"""The safetensors metadata entry naming the tensors written once under another name (JSON: alias -> name)."""
SHM = Path("/dev/shm")


def sync_directory(needed: int, configured: str | None) -> Path:
    """Where a node's weight file goes: ``scale.sync_dir`` when set, else ``/dev/shm`` when it has room for
    ``needed`` bytes; else one line asking for the setting (before any compute: the learner asks when it is built)."""
    if configured is not None:
        path = Path(configured)
        path.mkdir(parents=True, exist_ok=True)
        return path
    free = shutil.disk_usage(SHM).free if SHM.is_dir() else 0
    if free >= needed:
        return SHM
    where = f"/dev/shm has {free / 1e9:.1f} GB free" if SHM.is_dir() else "this node has no /dev/shm"
    raise ConfigError(
        f"scale.sync_dir: the weight sync writes {needed / 1e9:.1f} GB per node and step and {where}; set "
        "scale.sync_dir to a node-local directory with room (not a shared file system)"
    )


def gather_to_main(weights: WeightStream, world: World) -> dict[str, torch.Tensor]:
    """The whole model on the first process's CPU (an empty dict elsewhere), gathered one tensor at a time: what a
    checkpoint's Hugging Face copy is written from. Collective."""
    out = {}
    for name, tensor in weights.tensors():
        if world.is_main:
            out[name] = tensor.to("cpu", copy=True)
    return out


def write_safetensors(
    path: Path | None,
    entries: list[tuple[str, tuple[int, ...]]],
    dtype: torch.dtype,
    tensors: Iterable[torch.Tensor] | None,
    metadata: dict[str, str] | None = None,
) -> int:
    """Write a safetensors file tensor by tensor: the header from ``entries`` (and ``metadata``) first, then each
    tensor of ``tensors`` (in the entries' order) cast to ``dtype``, so at most one tensor is held at a time.
    ``tensors`` None: only count. Returns the bytes the file has."""
    itemsize = torch.empty(0, dtype=dtype).element_size()
    header: dict[str, dict] = {"__metadata__": metadata} if metadata else {}
    offset = 0
    for name, shape in entries:
        size = itemsize * int(torch.Size(shape).numel())
        header[name] = {
            "dtype": SAFETENSORS_DTYPES[dtype],
            "shape": list(shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the format aligns the data to 8 bytes
    if tensors is None:
        return 8 + len(encoded) + offset
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)))
        f.write(encoded)
        for (name, shape), tensor in zip(entries, tensors, strict=True):
            if tuple(tensor.shape) != shape:
                raise ValueError(f"{name}: shape {tuple(tensor.shape)}, the header says {shape}")
            data = tensor.detach().to("cpu", dtype).contiguous().reshape(-1)
            f.write(memoryview(data.view(torch.uint8).numpy()))
    return 8 + len(encoded) + offset


def _sync_file_owner(job: str | None, restart: int, pid: int | str) -> str:
    return f"job{job}.{restart}-pid{pid}" if job else f"pid{pid}"


def sync_file_prefix(pid: int) -> str:
    """The start of the name of a weight-sync file written by process ``pid`` of this process's Slurm job run
    (graft.engine.slurm_job.this_job_run): the job id and restart count, which every node's file of the run shares, then
    the pid; outside Slurm the pid alone. A requeued job's files are thus apart from its earlier run's, and the run
    that takes over a dead holder's lock (graft.train.lock, which records the same job run) finds the files it left
    on its node, whichever node that is."""
    job, restart = this_job_run()
    return f"graft-weights-{_sync_file_owner(job, restart, pid)}-"


def sync_file_pattern(job: str | None, restart: int, pid: int | None) -> str:
    """A glob for the weight-sync files of run ``restart`` of Slurm job ``job``: of its process ``pid``, or of all
    its processes with ``pid`` None; outside Slurm (``job`` None) of process ``pid``."""
    return f"graft-weights-{_sync_file_owner(job, restart, '*' if pid is None else pid)}-*.safetensors"


@contextmanager
def node_file(weights: WeightStream, world: World, dtype: torch.dtype, directory: Path) -> Iterator[Path]:
    """The whole model in ``dtype`` in one safetensors file per node in ``directory``, each tensor once, written
    by the node's first process while every process takes part in each gather; every process gets its node's
    file, which is removed once every process has left the block. Collective."""
    weights = WeightStream(weights.model, unique=True)
    tensors = (t for _, t in weights.tensors())
    mine = None
    if world.local_rank == 0:
        handle, name = tempfile.mkstemp(prefix=sync_file_prefix(os.getpid()), suffix=".safetensors", dir=directory)
        os.close(handle)
        mine = Path(name)
    try:
        if mine is not None:
            metadata = {ALIASES_KEY: json.dumps(weights.aliases())}
            write_safetensors(mine, weights.entries(), dtype, tensors, metadata)
        else:
            for _ in tensors:
                pass
        paths = world.gather(None if mine is None else str(mine))
        yield Path(paths[world.rank - world.local_rank])
        world.barrier()  # the file stays until every process of the node has read it
    finally:
        if mine is not None:
            mine.unlink()


def read_weights(files: list[Path], aliases: dict[str, str] | None = None) -> Iterator[tuple[str, torch.Tensor]]:
    """Each tensor of the safetensors ``files``, read one at a time (memory-mapped, never the whole file in
    memory), and again under each alias that a file's metadata or ``aliases`` names: vLLM's CPU build keeps its own
    packed copy of a tied output projection for its kernels, refreshed only when the projection is given by its
    name (an engine given only the embedding kept sampling from its old projection)."""
    from safetensors import safe_open

    for file in files:
        with safe_open(str(file), framework="pt") as f:
            named = {**json.loads((f.metadata() or {}).get(ALIASES_KEY, "{}")), **(aliases or {})}
            by_source: dict[str, list[str]] = {}
            for alias, source in named.items():
                by_source.setdefault(source, []).append(alias)
            for name in f.keys():  # noqa: SIM118 (a safetensors handle is no dict)
                tensor = f.get_tensor(name)
                yield name, tensor
                for alias in by_source.get(name, []):
                    yield alias, tensor


OUTPUT_PROJECTION = "lm_head.weight"
INPUT_EMBEDDINGS = ("model.embed_tokens.weight", "transformer.wte.weight")
"""The Hugging Face names of a causal LM's output projection and of its input embedding (Llama, Qwen3 and SmolLM3;
GPT-2)."""


def checkpoint_files(directory: Path) -> tuple[list[Path], dict[str, str]]:
    """A Hugging Face model directory's safetensors files and the tied output projection its config implies
    (``save_pretrained`` writes a tied projection once, under the embedding's name)."""
    from safetensors import safe_open

    files = sorted(Path(directory).glob("*.safetensors"))
    names = set()
    for file in files:
        with safe_open(str(file), framework="pt") as f:
            names.update(f.keys())
    config = json.loads((Path(directory) / "config.json").read_text())
    source = next((n for n in INPUT_EMBEDDINGS if n in names), None)
    tied = config.get("tie_word_embeddings", True) and OUTPUT_PROJECTION not in names and source is not None
    return files, {OUTPUT_PROJECTION: source} if tied else {}
