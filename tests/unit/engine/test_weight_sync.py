"""The streamed weight sync's files (graft.engine.weight_sync) on one process: what safetensors reads back, each
bucketed file byte for byte the per-tensor writer's, a tied embedding written once and read back under both its
names, the files removed afterwards, where they go, which file each tensor goes to, where each tensor is cast; the
gather for a checkpoint's copy."""

from __future__ import annotations

import os

import pytest
import torch
from helpers.tiny_qwen3 import tiny_qwen3
from safetensors.torch import load_file

from graft.engine import weight_sync
from graft.engine.distributed import SINGLE
from graft.engine.weight_sync import (
    WeightStream,
    checkpoint_files,
    gather_to_main,
    node_files,
    parts_of,
    read_weights,
    safetensors_header,
    sync_bytes,
    sync_directory,
    travelling,
    write_all,
    write_safetensors,
)
from graft.errors import ConfigError


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_streamed_file_reads_back_as_the_tensors(tmp_path, dtype):
    model = tiny_qwen3(tied=False)
    stream = WeightStream(model)
    size = write_safetensors(tmp_path / "w.safetensors", stream.entries(), dtype, (t for _, t in stream.tensors()))
    assert size == (tmp_path / "w.safetensors").stat().st_size
    assert size == write_safetensors(tmp_path / "unused", stream.entries(), dtype, None)  # counted without writing
    loaded = load_file(tmp_path / "w.safetensors")
    assert loaded.keys() == model.state_dict().keys()
    for name, value in model.state_dict().items():
        assert torch.equal(loaded[name], value.to(dtype)), name


@pytest.mark.parametrize("writers", [1, 3])
def test_a_tied_embedding_is_written_once_and_read_under_both_names(tmp_path, monkeypatch, writers):
    """Once in the files (Qwen3-1.7B's embedding is 0.62 GB of its 4.06 GB in bf16); the reader gives it under both
    names, because vLLM's CPU build repacks the output projection for its kernels only when it is given by name (an
    engine given only the embedding kept sampling from its old projection)."""
    monkeypatch.setattr(weight_sync, "writers", lambda: writers)
    model = tiny_qwen3(tied=True)
    with node_files(WeightStream(model), SINGLE, torch.float32, tmp_path) as paths:
        loaded = {name: t for path in paths for name, t in load_file(path).items()}
        read = dict(read_weights(paths))
        assert len(paths) == writers and all(path.parent == tmp_path for path in paths)
        assert sum(path.stat().st_size for path in paths) == sync_bytes(WeightStream(model), torch.float32)
    assert list(tmp_path.iterdir()) == []
    assert loaded.keys() == model.state_dict().keys() - {"lm_head.weight"}
    assert read.keys() == model.state_dict().keys()
    assert torch.equal(read["lm_head.weight"], read["model.embed_tokens.weight"])
    assert gather_to_main(WeightStream(model), SINGLE).keys() == model.state_dict().keys()
    untied = tiny_qwen3(tied=False)
    assert WeightStream(untied, unique=True).entries() == WeightStream(untied).entries()


def test_a_checkpoint_directory_reads_with_its_tied_projection(tmp_path):
    """``save_pretrained`` writes a tied projection once; the directory's reader adds it back from the config."""
    for tied in (True, False):
        model = tiny_qwen3(tied=tied)
        model.save_pretrained(tmp_path / str(tied))
        files, aliases = checkpoint_files(tmp_path / str(tied))
        assert aliases == ({"lm_head.weight": "model.embed_tokens.weight"} if tied else {})
        read = dict(read_weights(files, aliases))
        assert read.keys() == model.state_dict().keys()
        assert all(torch.equal(read[k], v) for k, v in model.state_dict().items())


def test_the_sync_file_goes_to_shared_memory_or_the_configured_directory(tmp_path, monkeypatch):
    """Never TMPDIR (Slurm carries it over from the submitting shell): /dev/shm when it has room, else the
    configured node-local directory, else one line before any compute."""
    assert sync_directory(1, None) == weight_sync.SHM
    assert sync_directory(1, str(tmp_path / "local")) == tmp_path / "local" and (tmp_path / "local").is_dir()
    with pytest.raises(ConfigError, match=r"writes 1000000\.0 GB per node and step and /dev/shm has .* GB free"):
        sync_directory(10**15, None)
    monkeypatch.setattr(weight_sync, "SHM", tmp_path / "no-shm")
    with pytest.raises(ConfigError, match=r"this node has no /dev/shm; set scale\.sync_dir to a node-local"):
        sync_directory(1, None)


def test_a_tensor_whose_shape_disagrees_with_the_header_is_refused(tmp_path):
    with pytest.raises(ValueError, match="shape"):
        write_safetensors(tmp_path / "w", [("a", (2, 3))], torch.float32, [torch.zeros(3, 2)])


def per_tensor_file(path, entries, dtype, tensors, metadata=None) -> None:
    """The writer before the buckets, as the reference: each tensor cast on the host and written by itself."""
    header, _ = safetensors_header(entries, dtype, metadata)
    with open(path, "wb") as f:
        f.write(header)
        for tensor in tensors:
            f.write(memoryview(tensor.detach().to("cpu", dtype).contiguous().reshape(-1).view(torch.uint8).numpy()))


def odd_tensors() -> dict[str, torch.Tensor]:
    """Shapes a bucket boundary can cut anywhere (none, a scalar, odd and prime sizes, one larger than many
    buckets), each source dtype, a transposed (non-contiguous) one, and the values a cast must keep exactly: NaN,
    infinities, -0.0, subnormals, float32 values halfway between two bf16 values, and float16's overflow."""
    g = torch.Generator().manual_seed(0)
    special = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 1e-40, 1 + 2**-8, 1 + 3 * 2**-8, 7e4])
    return {
        "empty": torch.zeros(0),
        "scalar": torch.tensor(3.25),
        "one": torch.tensor([-1.5]),
        "special": special,
        "odd": torch.randn(3, 5, 7, generator=g),
        "prime": torch.randn(1009, generator=g, dtype=torch.float64),
        "transposed": torch.randn(13, 11, generator=g).t(),
        "bf16": torch.randn(37, 3, generator=g).to(torch.bfloat16),
        "f16": torch.randn(5, 29, generator=g).to(torch.float16),
        "long": torch.randn(4099, generator=g),
    }


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float16])
@pytest.mark.parametrize("bucket_bytes", [6, 128, weight_sync.BUCKET_BYTES])
def test_the_bucketed_file_is_the_per_tensor_writers_byte_for_byte(tmp_path, monkeypatch, dtype, bucket_bytes):
    """Buckets of 3 and 64 bf16 elements cut every tensor larger than that into pieces, and batches mix tensors
    written where they lie (already host tensors of the file's dtype) with pieces copied through a bucket."""
    monkeypatch.setattr(weight_sync, "BUCKET_BYTES", bucket_bytes)
    tensors = odd_tensors()
    entries = [(name, tuple(t.shape)) for name, t in tensors.items()]
    metadata = {"graft_aliases": "{}"}
    size = write_safetensors(tmp_path / "bucketed", entries, dtype, tensors.values(), metadata)
    per_tensor_file(tmp_path / "per_tensor", entries, dtype, tensors.values(), metadata)
    assert (tmp_path / "bucketed").read_bytes() == (tmp_path / "per_tensor").read_bytes()
    assert size == (tmp_path / "bucketed").stat().st_size
    loaded = load_file(tmp_path / "bucketed")
    bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[torch.empty(0, dtype=dtype).element_size()]
    for name, tensor in tensors.items():
        assert loaded[name].dtype == dtype and loaded[name].shape == tensor.shape, name
        assert torch.equal(loaded[name].view(bits), tensor.to(dtype).contiguous().view(bits)), name


@pytest.mark.parametrize("writers", [1, 2, 5])
def test_a_tied_model_syncs_to_the_per_tensor_writers_bytes(tmp_path, monkeypatch, writers):
    """float32 masters to a bf16 engine through 400 bytes of buckets shared by the writers: each of the node's
    files is what the per-tensor writer makes of its tensors, and together they read back as each tensor cast to
    bf16, the tied output projection under its own name too."""
    monkeypatch.setattr(weight_sync, "BUCKET_BYTES", 400)
    monkeypatch.setattr(weight_sync, "writers", lambda: writers)
    model = tiny_qwen3(tied=True)
    unique = WeightStream(model, unique=True)
    metadata = {weight_sync.ALIASES_KEY: '{"lm_head.weight": "model.embed_tokens.weight"}'}
    entries, tensors = unique.entries(), [t for _, t in unique.tensors()]
    where = parts_of(entries, writers)
    for part in range(writers):
        mine = [i for i, p in enumerate(where) if p == part]
        chosen = ([entries[i] for i in mine], torch.bfloat16, [tensors[i] for i in mine], metadata)
        per_tensor_file(tmp_path / f"reference{part}", *chosen)
    with node_files(WeightStream(model), SINGLE, torch.bfloat16, tmp_path) as paths:
        for part, path in enumerate(paths):
            assert path.read_bytes() == (tmp_path / f"reference{part}").read_bytes()
        read = dict(read_weights(paths))
    assert read.keys() == model.state_dict().keys()
    for name, value in model.state_dict().items():
        assert torch.equal(read[name].view(torch.int16), value.to(torch.bfloat16).view(torch.int16)), name


def test_short_writes_and_the_buffer_limit_lose_no_byte(tmp_path, monkeypatch):
    """``os.writev`` may write less than it was given and takes at most IOV_MAX buffers: a writev that takes at
    most two buffers and 5 bytes a call still writes every byte once, in order."""
    real = os.writev
    calls = []

    def short(fd, buffers):
        buffers = list(buffers)
        assert len(buffers) <= 2
        calls.append(len(buffers))
        return real(fd, [bytes(b)[:5] for b in buffers[:1]])

    monkeypatch.setattr(weight_sync, "IOV_MAX", 2)
    monkeypatch.setattr(os, "writev", short)
    parts = [b"header..", b"", b"0123456789abc", b"x", bytes(range(256)) * 3]
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    try:
        write_all(fd, [memoryview(p) for p in parts])
    finally:
        os.close(fd)
    assert (tmp_path / "f").read_bytes() == b"".join(parts)
    assert len(calls) > len(parts)


def test_a_tensor_is_cast_where_it_lies_before_it_moves():
    """A tensor off the host (a GPU's; the meta device stands in for it here) is cast where it is, before it is
    copied to the host; a host tensor is left for the copy into its bucket to cast; a tensor already in the dtype,
    or no dtype, is left as it is. A sharded tensor is cast before its gather: tests/integration/test_distributed.py
    (FSDP2 over gloo)."""
    off_host = torch.empty(4, 3, device="meta")
    assert travelling(off_host, torch.bfloat16).dtype == torch.bfloat16
    assert travelling(off_host, torch.bfloat16).device == off_host.device
    host = torch.randn(4, 3)
    assert travelling(host, torch.bfloat16) is host
    assert travelling(host, None) is host and travelling(host, torch.float32) is host


def test_tensors_go_to_the_file_with_the_fewest_elements_so_far():
    """In order, ties to the first: consecutive tensors mostly land in different files, written at once."""
    entries = [(str(i), shape) for i, shape in enumerate([(10,), (2, 2), (3,), (1,), (0,), (5, 2), (3,)])]
    assert parts_of(entries, 1) == [0] * 7
    assert parts_of(entries, 2) == [0, 1, 1, 1, 1, 1, 0]  # running totals 10, 13 | 4, 7, 8, 8, 18
    assert parts_of(entries, 3) == [0, 1, 2, 2, 1, 1, 2]  # 10 | 4, 4, 14 | 3, 4, 7
