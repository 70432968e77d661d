"""The packed pass's GPU attention call (torch's variable-length flash attention), run here through a stand-in
with the installed GPU builds' signatures: torch 2.11 takes no ``enable_gqa`` (its KV heads must match the
query's), later versions do. The stand-in keeps flash's rules that a CPU would not enforce: int32 row bounds, a
causal window of (-1, 0), equal head counts unless ``enable_gqa``."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from graft.engine import packing


def _attend(q, k, v, bounds, scale):
    rows = []
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        qa, ka, va = (t[a:b].transpose(0, 1) for t in (q, k, v))  # [heads, n, d]
        rows.append(F.scaled_dot_product_attention(qa, ka, va, is_causal=True, scale=scale).transpose(0, 1))
    return torch.cat(rows)


def varlen_2_11(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, return_aux=None, scale=None,
                window_size=(-1, -1)):  # fmt: skip
    assert cu_seq_q.dtype == torch.int32 and cu_seq_k.dtype == torch.int32, "flash takes int32 row bounds"
    assert window_size == (-1, 0), "causal"
    assert query.shape[1] == key.shape[1] == value.shape[1], "no enable_gqa: KV heads must match the query's"
    assert max_q == int((cu_seq_q[1:] - cu_seq_q[:-1]).max())
    return _attend(query, key, value, cu_seq_q, scale)


def varlen_later(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, return_aux=None, scale=None,
                 window_size=(-1, -1), enable_gqa=False):  # fmt: skip
    if query.shape[1] != key.shape[1]:
        assert enable_gqa
        group = query.shape[1] // key.shape[1]
        key, value = key.repeat_interleave(group, dim=1), value.repeat_interleave(group, dim=1)
    return varlen_2_11(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, scale=scale, window_size=window_size)


def test_varlen_call_attends_within_rows_under_both_signatures(monkeypatch):
    """Grouped KV heads (16 query heads over 8, Qwen3-1.7B's ratio scaled down), three rows packed: the GPU call
    under either signature equals transformers' SDPA row by row, the path a CPU takes."""
    g = torch.Generator().manual_seed(0)
    lengths = [5, 1, 9]
    n, heads, kv_heads, d = sum(lengths), 4, 2, 8
    query = torch.randn(1, heads, n, d, generator=g)
    key, value = (torch.randn(1, kv_heads, n, d, generator=g) for _ in range(2))
    _, inputs = packing.pack_rows([[1] * length for length in lengths], torch.device("cpu"))
    bounds, longest = inputs["cu_seq_lens_q"], inputs["max_length_q"]
    module = torch.nn.Module()
    module.num_key_value_groups, module.is_causal, module.training = heads // kv_heads, True, False
    monkeypatch.setattr(packing, "VARLEN", None)
    row_by_row, _ = packing.row_attention(module, query, key, value, None, bounds, longest, scaling=d**-0.5)
    for varlen, gqa in ((varlen_2_11, False), (varlen_later, True)):
        monkeypatch.setattr(packing, "VARLEN", varlen)
        monkeypatch.setattr(packing, "VARLEN_GQA", gqa)
        out = packing._varlen_flash(query, key, value, bounds, longest, d**-0.5)
        assert out.shape == (1, n, heads, d)
        torch.testing.assert_close(out, row_by_row)
