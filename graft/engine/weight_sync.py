"""The trained weights into a rollout engine before each rollout that follows an update, one parameter at a time.

A sharded model is gathered parameter by parameter (every process takes part in each gather, a collective), so no
process ever holds the whole model gathered, on its GPU or in memory. Each tensor travels in the engine's dtype: a
shard is cast before its gather and a GPU's tensor before it leaves the GPU, so float32 masters bound for a bf16
engine cross NVLink and PCIe at half their bytes. On the first process of each node the tensors go through host
buckets (pinned where CUDA is available, so that the copies from the GPU run asynchronously while another bucket
is written) into safetensors files, one per thread of that process, written at the same time, a bucket per system
call; every engine of that node then reads them tensor by tensor, memory-mapped, without a copy (safetensors'
``safe_open``). Per node and step that is one copy of the model in the engine's dtype written and read, where
gathering the whole model in float32 on every GPU and writing one file per process cost the model in float32 on
each GPU and the engine's copy once per process. A tied output projection (the input embedding under another name)
is written once, its name kept in the files' metadata.

The files live in the node's memory (``/dev/shm``) or in ``scale.sync_dir``, never in ``TMPDIR``, which Slurm
carries over from the submitting shell and which is often a shared file system or a small tmpfs.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import tempfile
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch

from graft.engine.distributed import World
from graft.engine.slurm_job import this_job_run
from graft.errors import ConfigError

SAFETENSORS_DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}
BUCKET_BYTES = 64 * 2**20
"""The host buckets the sync's tensors pass through to its files: each file's writer has two of ``BUCKET_BYTES``
over the number of files, and writes a bucket's worth at a time (one system call per bucket, not per tensor)."""
IOV_MAX = os.sysconf("SC_IOV_MAX")


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

    def tensors(self, dtype: torch.dtype | None = None) -> Iterator[tuple[str, torch.Tensor]]:
        """Each tensor whole, then released: a collective per tensor under FSDP2 or ZeRO-3, so every process must
        consume the whole stream. ``dtype``: the dtype the values travel in (``travelling``); None: their own."""
        for name, value in self._items():
            if hasattr(value, "full_tensor"):  # FSDP2's DTensor: this process's shard cast, then gathered
                yield name, travelling(value.detach(), dtype).full_tensor()
            elif hasattr(value, "ds_id"):  # a ZeRO-3 partition
                import deepspeed

                # DeepSpeed gathers in the partitions' dtype, which is the engine's already: its bf16 mode
                # (graft.engine.deepspeed_engine) casts the module and keeps the float32 masters in the optimizer
                with deepspeed.zero.GatheredParameters([value], modifier_rank=None):
                    yield name, value.detach().to(dtype or value.dtype, copy=True)
            else:
                yield name, travelling(value.detach(), dtype)


def travelling(tensor: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    """``tensor`` in the dtype it is to move in, cast where it lies: an FSDP2 shard before its gather and a GPU's
    tensor before it leaves the GPU, so that only ``dtype``'s bytes cross NVLink and PCIe (half of float32's for
    bf16). A whole tensor in host memory is left as it is: the copy that takes it to the sync's file casts it, with
    no second pass over memory. ``dtype`` None: as it is."""
    if dtype is None or tensor.dtype == dtype:
        return tensor
    if hasattr(tensor, "full_tensor") or tensor.device.type != "cpu":
        return tensor.to(dtype)
    return tensor


def sync_bytes(weights: WeightStream, dtype: torch.dtype) -> int:
    """The size of the weight sync's files: each tensor once, in the engine's dtype, over ``writers()`` files."""
    unique = WeightStream(weights.model, unique=True)
    metadata = {ALIASES_KEY: json.dumps(unique.aliases())}
    return sum(parts_bytes(unique.entries(), dtype, metadata, writers()))


ALIASES_KEY = "graft_aliases"
"""The safetensors metadata entry naming the tensors written once under another name (JSON: alias -> name)."""
SHM = Path("/dev/shm")


def sync_directory(needed: int, configured: str | None) -> Path:
    """Where a node's weight files go: ``scale.sync_dir`` when set, else ``/dev/shm`` when it has room for
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


def safetensors_header(
    entries: list[tuple[str, tuple[int, ...]]], dtype: torch.dtype, metadata: dict[str, str] | None = None
) -> tuple[bytes, int]:
    """A safetensors file's start for tensors of ``entries`` in ``dtype`` laid out in that order (the header's
    length, then the header), and the bytes of the tensors that follow it."""
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
    return struct.pack("<Q", len(encoded)) + encoded, offset


def write_safetensors(
    path: Path | None,
    entries: list[tuple[str, tuple[int, ...]]],
    dtype: torch.dtype,
    tensors: Iterable[torch.Tensor] | None,
    metadata: dict[str, str] | None = None,
) -> int:
    """Write a safetensors file from a stream: the header from ``entries`` (and ``metadata``) first, then each
    tensor of ``tensors`` (in the entries' order) in ``dtype``, at most two buckets' worth held at a time
    (``write_parts``). ``tensors`` None: only count. Returns the bytes the file has."""
    if tensors is None:
        header, data = safetensors_header(entries, dtype, metadata)
        return len(header) + data
    return sum(write_parts([path], entries, dtype, tensors, metadata))


def parts_of(entries: list[tuple[str, tuple[int, ...]]], parts: int) -> list[int]:
    """The file of ``parts`` each entry goes to: in order, to the one with the fewest elements so far (so
    consecutive tensors mostly go to different files, written at the same time)."""
    sizes = [0] * parts
    out = []
    for _, shape in entries:
        part = sizes.index(min(sizes))
        sizes[part] += int(torch.Size(shape).numel())
        out.append(part)
    return out


def parts_bytes(
    entries: list[tuple[str, tuple[int, ...]]], dtype: torch.dtype, metadata: dict[str, str] | None, parts: int
) -> list[int]:
    """The size of each of the ``parts`` files ``write_parts`` makes of ``entries``."""
    sizes = []
    for group in _grouped(entries, parts_of(entries, parts), parts):
        header, data = safetensors_header(group, dtype, metadata)
        sizes.append(len(header) + data)
    return sizes


def _grouped(entries: list, where: list[int], parts: int) -> list[list]:
    return [[e for e, p in zip(entries, where, strict=True) if p == part] for part in range(parts)]


def write_parts(
    paths: list[Path],
    entries: list[tuple[str, tuple[int, ...]]],
    dtype: torch.dtype,
    tensors: Iterable[torch.Tensor],
    metadata: dict[str, str] | None = None,
) -> list[int]:
    """A stream of tensors in ``dtype`` as safetensors files at ``paths``, written at the same time: each entry goes
    to the file ``parts_of`` names, each file has its header first (``metadata`` in each) and a ``BucketWriter``
    with a thread of its own and two buckets of ``BUCKET_BYTES / len(paths)``. Returns the bytes of each file."""
    where = parts_of(entries, len(paths))
    headers = [safetensors_header(group, dtype, metadata)[0] for group in _grouped(entries, where, len(paths))]
    fds = []
    writers: list[BucketWriter] = []
    try:
        for path, header in zip(paths, headers, strict=True):
            fds.append(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
            writers.append(BucketWriter(fds[-1], dtype, BUCKET_BYTES // len(paths)))
            writers[-1].add(memoryview(header))
        for (name, shape), tensor, part in zip(entries, tensors, where, strict=True):
            if tuple(tensor.shape) != shape:
                raise ValueError(f"{name}: shape {tuple(tensor.shape)}, the header says {shape}")
            writers[part].add_tensor(tensor)
        for writer in writers:
            writer.close()
    finally:
        for writer in writers:
            writer.stop()
        for fd in fds:
            os.close(fd)
    return parts_bytes(entries, dtype, metadata, len(paths))


@dataclass
class _Batch:
    views: list[memoryview] = field(default_factory=list)
    """The batch's bytes in the file's order; each view keeps its tensor alive until it is written."""
    nbytes: int = 0
    used: int = 0
    """Elements of the batch's bucket taken."""
    device: torch.device | None = None
    """The GPU the batch's bucket was last copied from; None: none."""


class BucketWriter:
    """A file's bytes written in order by a thread of its own, a batch of about ``bucket_bytes`` at a time with one
    ``os.writev`` (which releases the GIL: the next batch fills meanwhile).

    A tensor already in host memory in the file's dtype joins the batch where it lies; any other is copied, a piece
    at a time, into the batch's bucket: a host tensor's copy is its cast, a GPU's tensor's an asynchronous copy
    into pinned memory, which the writer waits for (a CUDA event) before it writes. Two batches, each with its
    bucket: one fills while the other is written. Pinned where CUDA is available; elsewhere the same path with
    ordinary memory. The buckets are made at the first copy into one."""

    def __init__(self, fd: int, dtype: torch.dtype, bucket_bytes: int):
        self.fd = fd
        self.dtype = dtype
        itemsize = torch.empty(0, dtype=dtype).element_size()
        self.elements = max(bucket_bytes // itemsize, 1)
        self.limit = self.elements * itemsize
        self.pinned = torch.cuda.is_available()
        self.buckets: list[torch.Tensor] = []
        self.batches = [_Batch(), _Batch()]
        self.writing: list[Future | None] = [None, None]
        self.current = 0
        self.thread = ThreadPoolExecutor(max_workers=1)  # one thread: the file's batches in order

    def add(self, view: memoryview) -> None:
        """Host bytes, written as they lie."""
        batch = self.batches[self.current]
        batch.views.append(view)
        batch.nbytes += view.nbytes
        if batch.nbytes >= self.limit:  # a full bucket always is: its bytes alone are the limit
            self._next()

    def add_tensor(self, tensor: torch.Tensor) -> None:
        flat = tensor.detach().reshape(-1)
        if flat.device.type == "cpu" and flat.dtype == self.dtype:
            self.add(_host_bytes(flat))
            return
        if not self.buckets:
            self.buckets = [torch.empty(self.elements, dtype=self.dtype, pin_memory=self.pinned) for _ in range(2)]
        start = 0
        while start < flat.numel():
            batch, bucket = self.batches[self.current], self.buckets[self.current]
            count = min(self.elements - batch.used, flat.numel() - start)
            piece = bucket[batch.used : batch.used + count]
            piece.copy_(flat[start : start + count], non_blocking=self.pinned)
            if flat.is_cuda:
                batch.device = flat.device
            batch.used += count
            start += count
            self.add(_host_bytes(piece))

    def close(self) -> None:
        """Write what is left and wait for every write."""
        self._submit()
        for index in (0, 1):
            self._wait(index)

    def stop(self) -> None:
        """Let the thread finish what it was given and end (after ``close``, or after an error)."""
        self.thread.shutdown(wait=True)

    def _next(self) -> None:
        self._submit()
        self.current ^= 1
        self._wait(self.current)  # its bucket is filled again next: the write from it must be done

    def _submit(self) -> None:
        batch = self.batches[self.current]
        ready = None
        if batch.device is not None:
            ready = torch.cuda.Event()
            ready.record(torch.cuda.current_stream(batch.device))  # the stream the bucket's copies ran on
        self.writing[self.current] = self.thread.submit(_write_batch, self.fd, batch.views, ready, batch.device)
        self.batches[self.current] = _Batch()

    def _wait(self, index: int) -> None:
        if self.writing[index] is not None:
            self.writing[index].result()  # a failed write raises here
            self.writing[index] = None


def _write_batch(fd: int, views: list[memoryview], ready: torch.cuda.Event | None, device: torch.device | None) -> None:
    if ready is not None:
        with torch.cuda.device(device):  # the writer's thread has no current device of its own
            ready.synchronize()
    write_all(fd, views)


def _host_bytes(flat: torch.Tensor) -> memoryview:
    """The bytes of a one-dimensional host tensor, without a copy (the view keeps the tensor alive)."""
    return memoryview(flat.detach().view(torch.uint8).numpy())


def write_all(fd: int, views: list[memoryview]) -> None:
    """Every byte of ``views`` in order: ``os.writev`` takes at most IOV_MAX buffers a call and may write fewer
    bytes than asked (Linux: at most 2 GiB less a page)."""
    views = [v for v in views if v.nbytes]
    first = 0
    while first < len(views):
        written = os.writev(fd, views[first : first + IOV_MAX])
        while first < len(views) and written >= views[first].nbytes:
            written -= views[first].nbytes
            first += 1
        if written:
            views[first] = views[first][written:]


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


def writers() -> int:
    """How many files of the sync a node's first process writes at once: one per thread it is given
    (``torch.get_num_threads()``, the job's ``workflow.threads``)."""
    return torch.get_num_threads()


@contextmanager
def node_files(weights: WeightStream, world: World, dtype: torch.dtype, directory: Path) -> Iterator[list[Path]]:
    """The whole model in ``dtype`` in safetensors files in ``directory``, each tensor once, in one file per
    thread of the node's first process (``writers``), which writes them at the same time while every process
    takes part in each gather; every process gets its node's files, which are removed once every process has left
    the block. Collective."""
    weights = WeightStream(weights.model, unique=True)
    tensors = (t for _, t in weights.tensors(dtype))
    mine: list[Path] = []
    try:
        if world.local_rank == 0:
            for _ in range(writers()):
                handle, name = tempfile.mkstemp(
                    prefix=sync_file_prefix(os.getpid()), suffix=".safetensors", dir=directory
                )
                os.close(handle)
                mine.append(Path(name))
            metadata = {ALIASES_KEY: json.dumps(weights.aliases())}
            write_parts(mine, weights.entries(), dtype, tensors, metadata)
        else:
            for _ in tensors:
                pass
        paths = world.gather([str(p) for p in mine])
        yield [Path(p) for p in paths[world.rank - world.local_rank]]
        world.barrier()  # the files stay until every process of the node has read them
    finally:
        for path in mine:
            path.unlink()


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
