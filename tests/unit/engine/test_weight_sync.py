"""The streamed weight sync's file (graft.engine.weight_sync) on one process: what safetensors reads back, a tied
embedding written once and read back under both its names, the file removed afterwards, where the file goes; the
gather for a checkpoint's copy."""

from __future__ import annotations

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
    node_file,
    read_weights,
    sync_bytes,
    sync_directory,
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


def test_a_tied_embedding_is_written_once_and_read_under_both_names(tmp_path):
    """Once in the file (Qwen3-1.7B's embedding is 0.62 GB of its 4.06 GB in bf16); the reader gives it under both
    names, because vLLM's CPU build repacks the output projection for its kernels only when it is given by name (an
    engine given only the embedding kept sampling from its old projection)."""
    model = tiny_qwen3(tied=True)
    with node_file(WeightStream(model), SINGLE, torch.float32, tmp_path) as path:
        loaded = load_file(path)
        read = dict(read_weights([path]))
        assert path.parent == tmp_path and path.stat().st_size == sync_bytes(WeightStream(model), torch.float32)
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
