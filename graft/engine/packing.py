"""A forward pass over rows packed into one sequence: no padding, positions restarting at each row, attention kept
within each row (``train.packing``).

Transformers reads a packed batch from position ids that restart and from the cumulative row lengths
(``cu_seq_lens_q`` / ``cu_seq_lens_k``, its variable-length attention arguments), which every decoder passes down
to its attention function. Its SDPA attention would turn packed position ids into a dense block-diagonal mask over
the whole packed sequence, whose cost grows with the square of the packed length (36,864 tokens: 1.4 G entries a
layer), often more than the padding it removes. So the packed pass runs under an attention implementation of its
own, registered with transformers' ``AttentionInterface``: given the row bounds it attends within each row, on
GPUs with torch's variable-length flash attention over the whole pass in bf16/fp16 (torch 2.11 and later),
elsewhere with SDPA row by row (causal, no mask: the cost of each row's own tokens); without row bounds (any
unpacked call, generation included) it is transformers' SDPA, mask and all.
"""

from __future__ import annotations

import inspect
from itertools import pairwise

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from graft.engine.deepspeed_engine import is_engine

ROW_ATTENTION = "graft_rows"
"""The attention implementation a packed pass runs under (registered below)."""

VARLEN_DTYPES = (torch.float16, torch.bfloat16)
"""What torch's flash kernels take; a float32 pass on a GPU attends row by row."""


def _torch_varlen():
    """torch's variable-length flash attention where it takes a causal window (torch 2.11 and later); None before,
    and a packed pass attends row by row."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return None
    return varlen_attn if "window_size" in inspect.signature(varlen_attn).parameters else None


VARLEN = _torch_varlen()
VARLEN_GQA = VARLEN is not None and "enable_gqa" in inspect.signature(VARLEN).parameters
"""Whether torch's varlen attention takes fewer KV heads than query heads (``enable_gqa``, after torch 2.11);
where it does not, the KV heads are repeated to the query's, as transformers' ``repeat_kv`` does."""


def row_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    cu_seq_lens_q: torch.Tensor | None = None,
    max_length_q: int | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """Attention within each row of a packed pass: ``query`` [1, heads, N, d], ``key``/``value`` [1, kv heads,
    N, d], rows bounded by ``cu_seq_lens_q`` [rows + 1]. Returns [1, N, heads, d], as transformers' attention
    functions do. Without ``cu_seq_lens_q``: transformers' SDPA attention."""
    if cu_seq_lens_q is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    if VARLEN is not None and query.is_cuda and query.dtype in VARLEN_DTYPES:
        return _varlen_flash(query, key, value, cu_seq_lens_q, max_length_q, kwargs.get("scaling")), None
    rows = [
        sdpa_attention_forward(module, query[:, :, a:b], key[:, :, a:b], value[:, :, a:b], None, **kwargs)[0]
        for a, b in pairwise(cu_seq_lens_q.tolist())
    ]
    return torch.cat(rows, dim=1), None


def _varlen_flash(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    bounds: torch.Tensor,
    longest: int,
    scaling: float | None,
) -> torch.Tensor:
    """torch's variable-length flash attention over the whole packed pass, causal within each row (``longest``:
    the longest row's tokens)."""
    q, k, v = (t[0].transpose(0, 1) for t in (query, key, value))  # [N, heads, d]
    grouped = q.shape[1] != k.shape[1]
    if grouped and not VARLEN_GQA:
        group = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    gqa = {"enable_gqa": grouped} if VARLEN_GQA else {}
    out = VARLEN(q, k, v, bounds, bounds, longest, longest, scale=scaling, window_size=(-1, 0), **gqa)
    return out.unsqueeze(0)


def _row_mask(**kwargs) -> torch.Tensor | None:
    """No mask for a pass without padding (``row_attention`` bounds the rows itself); SDPA's for a padded one."""
    return None if kwargs.get("attention_mask") is None else sdpa_mask(**kwargs)


AttentionInterface.register(ROW_ATTENTION, row_attention)
AttentionMaskInterface.register(ROW_ATTENTION, _row_mask)


def attend_within_rows(model: torch.nn.Module) -> None:
    """Put ``model`` (a Hugging Face model, or the DeepSpeed engine around one) under ``ROW_ATTENTION``, for good:
    a checkpointed layer recomputed in the backward must attend as its forward did, and every unpacked call is
    SDPA's as before."""
    hf_model = model.module if is_engine(model) else model
    if hf_model.config._attn_implementation != ROW_ATTENTION:
        hf_model.config._attn_implementation = ROW_ATTENTION


def pack_rows(rows: list[list[int]], device: torch.device) -> tuple[torch.Tensor, dict[str, object]]:
    """Token rows end to end: ids [1, N] and the forward's keyword arguments that make them a packed batch
    (position ids restarting at 0 at each row, the rows' cumulative lengths, the longest row; no attention mask).
    """
    ids = torch.tensor([[t for row in rows for t in row]], dtype=torch.long, device=device)
    positions = torch.tensor([[p for row in rows for p in range(len(row))]], dtype=torch.long, device=device)
    bounds = [0]
    for row in rows:
        bounds.append(bounds[-1] + len(row))
    cu = torch.tensor(bounds, dtype=torch.int32, device=device)
    longest = max((len(row) for row in rows), default=0)
    inputs = {
        "position_ids": positions,
        "cu_seq_lens_q": cu,
        "cu_seq_lens_k": cu,
        "max_length_q": longest,
        "max_length_k": longest,
    }
    return ids, inputs
