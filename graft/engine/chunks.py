"""How many positions one chunk of log-prob computation takes (graft.engine.logprobs), as a torch-free function:
the memory plan (graft.planning.memory) prices the same chunk when the workflow is planned, where torch is not
imported."""

from __future__ import annotations

FLOAT32_BYTES = 4


def chunk_positions(vocab_size: int, chunk_mib: float) -> int:
    """Positions whose float32 logits fill ``chunk_mib`` MiB (at least one)."""
    return max(1, int(chunk_mib * 2**20) // (vocab_size * FLOAT32_BYTES))
