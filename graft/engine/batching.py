"""Forward passes cut by a budget of rows and padded tokens: what bounds the activations of a pass."""

from __future__ import annotations


def pack_micro_batches(
    indices: list[int], lengths: list[int], max_rows: int, max_tokens: int | None
) -> list[list[int]]:
    """``indices`` in their order, packed into micro-batches of at most ``max_rows`` rows and, when ``max_tokens``
    is set, at most that many padded tokens (rows x the longest row's length; a longer row goes alone).
    ``lengths[i]``: prompt + response tokens of row ``i``."""
    micro: list[list[int]] = []
    width = 0
    for i in indices:
        wider = max(width, lengths[i])
        fits = micro and len(micro[-1]) < max_rows
        if fits and max_tokens is not None:
            fits = wider * (len(micro[-1]) + 1) <= max_tokens
        if fits:
            micro[-1].append(i)
            width = wider
        else:
            micro.append([i])
            width = lengths[i]
    return micro
