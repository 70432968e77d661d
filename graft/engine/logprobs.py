"""Per-token log-probs from a causal LM without its whole ``[rows, tokens, vocabulary]`` logits.

At the paper's shapes one float32 copy of a micro-batch's logits is tens of GB (16 rows of 6,144 tokens over
Qwen3's 151,936 tokens: 59.8 GB), and ``log_softmax`` of them holds about three. Only the log-prob of each
response token is needed, so the model's output projection is applied here in chunks of positions: a chunk's
logits are made, turned into its tokens' log-probs and dropped before the next chunk. With gradients each chunk
is checkpointed, so the backward recomputes the chunk's logits instead of keeping them, as fused
linear-cross-entropy kernels do; what stays alive is the final hidden state of the response positions
(``[tokens, hidden]``), never a vocabulary-wide tensor beyond one chunk.

A chunk is ``logits_chunk_mib`` MiB of float32 logits. When a whole forward pass's logits fit in one chunk (every
toy model), the projection runs over the padded rows as one piece, the same operations in the same order as a
plain ``log_softmax`` of the model's logits, so the digits do not change.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from graft.engine.chunks import chunk_positions
from graft.engine.deepspeed_engine import is_engine


def _chunk_logprobs(
    hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, targets: torch.Tensor, temperature: float
) -> torch.Tensor:
    """log softmax(h W^T + b) / T) at each target: the policy's log-prob (paper Eq. 3's pi_theta), one chunk."""
    logits = F.linear(hidden, weight, bias).float()
    return torch.log_softmax(logits / temperature, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def chunked_token_logprobs(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    targets: torch.Tensor,
    temperature: float,
    chunk: int,
) -> torch.Tensor:
    """Log-probs of ``targets`` [N] after ``hidden`` [N, H] under the projection ``weight`` [V, H], ``chunk``
    positions at a time; with gradients enabled each chunk's logits are recomputed in the backward.

    Returns [N] float32.
    """
    grad = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    parts = []
    for start in range(0, hidden.shape[0], chunk):
        args = (hidden[start : start + chunk], weight, bias, targets[start : start + chunk], temperature)
        parts.append(checkpoint(_chunk_logprobs, *args, use_reentrant=False) if grad else _chunk_logprobs(*args))
    if not parts:
        return hidden.new_zeros(0, dtype=torch.float32)
    return torch.cat(parts)


class _ResponseHead:
    """Stands in for the output projection's ``forward`` during one forward pass: given the final hidden states
    [B, L, H] (padded rows, or one packed sequence) it returns the log-probs [N] of the ``targets`` at (``rows``,
    ``positions``), in that order.

    The projection module itself still runs (only its ``forward`` is replaced), so the hooks that FSDP2 and
    DeepSpeed ZeRO-3 put on it gather its weight around this call and its backward, as for the full logits.
    """

    def __init__(
        self,
        head: torch.nn.Module,
        ids: torch.Tensor,
        rows: torch.Tensor,
        positions: torch.Tensor,
        temperature: float,
        chunk_mib: float,
    ):
        self.head, self.ids, self.rows, self.positions = head, ids, rows, positions
        self.temperature, self.chunk_mib = temperature, chunk_mib

    def __call__(self, hidden: torch.Tensor) -> torch.Tensor:
        # the weight as gathered for this call (a shard or a placeholder outside it under FSDP2 / ZeRO-3)
        weight, bias = self.head.weight, getattr(self.head, "bias", None)
        chunk = chunk_positions(weight.shape[0], self.chunk_mib)
        if hidden.shape[0] * hidden.shape[1] <= chunk:
            # one chunk: the plain formula over the whole pass, operation for operation
            logits = F.linear(hidden, weight, bias)[:, :-1].float()
            logp_all = torch.log_softmax(logits / self.temperature, dim=-1)
            token_logp = logp_all.gather(-1, self.ids[:, 1:].unsqueeze(-1)).squeeze(-1)
            return token_logp[self.rows, self.positions]
        # only the positions that predict a response token are projected, packed without padding
        targets = self.ids[self.rows, self.positions + 1]
        return chunked_token_logprobs(hidden[self.rows, self.positions], weight, bias, targets, self.temperature, chunk)


@contextmanager
def response_head(model: torch.nn.Module, head: _ResponseHead) -> Iterator[None]:
    """Within the block the model's output projection returns ``head``'s packed log-probs instead of logits."""
    module = model.get_output_embeddings()
    if not isinstance(module, torch.nn.Linear):
        raise TypeError(f"{type(model).__name__}: output projection {type(module).__name__} is not a linear layer")
    module.forward = head
    try:
        yield
    finally:
        del module.forward  # the class's forward again


def response_token_logprobs(
    model: torch.nn.Module,
    ids: torch.Tensor,
    rows: torch.Tensor,
    positions: torch.Tensor,
    temperature: float,
    chunk_mib: float,
    **inputs,
) -> torch.Tensor:
    """Log-probs [N] of the tokens ``ids[rows, positions + 1]`` predicted at ``positions`` of the batch ``ids``
    [B, L], from one forward pass of ``model`` with ``inputs`` (right-padded rows: their attention mask; rows packed
    into one sequence: graft.engine.packing's arguments)."""
    hf_model = model.module if is_engine(model) else model
    head = _ResponseHead(hf_model.get_output_embeddings(), ids, rows, positions, temperature, chunk_mib)
    with response_head(hf_model, head):
        return model(input_ids=ids, use_cache=False, **inputs).logits
