"""The streamed weight sync's file (graft.engine.weight_sync) on one process: what safetensors reads back, a tied
embedding written under both its names, the file removed afterwards; the gather for a checkpoint's copy."""

from __future__ import annotations

import tempfile

import pytest
import torch
from safetensors.torch import load_file
from transformers import Qwen3Config, Qwen3ForCausalLM

from graft.engine.distributed import SINGLE
from graft.engine.weight_sync import WeightStream, gather_to_main, node_file, write_safetensors


def tiny(tied: bool) -> torch.nn.Module:
    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=300,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        tie_word_embeddings=tied,
    )
    return Qwen3ForCausalLM(config)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_streamed_file_reads_back_as_the_tensors(tmp_path, dtype):
    model = tiny(tied=False)
    stream = WeightStream(model)
    size = write_safetensors(tmp_path / "w.safetensors", stream.entries(), dtype, (t for _, t in stream.tensors()))
    assert size == (tmp_path / "w.safetensors").stat().st_size
    assert size == write_safetensors(tmp_path / "unused", stream.entries(), dtype, None)  # counted without writing
    loaded = load_file(tmp_path / "w.safetensors")
    assert loaded.keys() == model.state_dict().keys()
    for name, value in model.state_dict().items():
        assert torch.equal(loaded[name], value.to(dtype)), name


def test_a_tied_embedding_is_written_under_both_names_and_the_file_removed(tmp_path, monkeypatch):
    """Both names: vLLM's CPU build repacks the output projection for its kernels and takes it from the file (an
    engine given only the embedding kept sampling from its old projection, seen in the killed-and-resumed vLLM run)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    model = tiny(tied=True)
    with node_file(WeightStream(model), SINGLE, torch.float32) as path:
        loaded = load_file(path)
        assert path.parent == tmp_path
    assert list(tmp_path.iterdir()) == []
    assert loaded.keys() == model.state_dict().keys()
    assert torch.equal(loaded["lm_head.weight"], loaded["model.embed_tokens.weight"])
    assert gather_to_main(WeightStream(model), SINGLE).keys() == model.state_dict().keys()


def test_a_tensor_whose_shape_disagrees_with_the_header_is_refused(tmp_path):
    with pytest.raises(ValueError, match="shape"):
        write_safetensors(tmp_path / "w", [("a", (2, 3))], torch.float32, [torch.zeros(3, 2)])
