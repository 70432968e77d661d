"""Which rows each process runs in which forward pass: a budget of rows and tokens bounds a pass's activations,
and the rows are split over the processes with their tokens balanced."""

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


def pack_by_tokens(indices: list[int], lengths: list[int], max_rows: int, max_tokens: int | None) -> list[list[int]]:
    """``indices`` packed into micro-batches of at most ``max_rows`` rows and, when ``max_tokens`` is set, at most
    that many tokens in all (a packed pass computes its rows' own tokens, no padding): longest row first, each
    into the first micro-batch it fits (first-fit decreasing; ties by index); a row longer than ``max_tokens``
    goes alone."""
    micro: list[list[int]] = []
    load: list[int] = []
    for i in sorted(indices, key=lambda i: (-lengths[i], i)):
        for k, rows in enumerate(micro):
            if len(rows) < max_rows and (max_tokens is None or load[k] + lengths[i] <= max_tokens):
                rows.append(i)
                load[k] += lengths[i]
                break
        else:
            micro.append([i])
            load.append(lengths[i])
    return micro


def plan_passes(
    lengths: list[int], world_size: int, max_rows: int, max_tokens: int | None, packed: bool
) -> list[list[list[int]]]:
    """``plan[rank][pass]``: the rows (indices into ``lengths``) each process runs in each forward pass.

    Rows go to processes longest first, each to the one with the fewest tokens so far, so that the processes'
    token totals are balanced. Each process then cuts its rows into passes: ``packed``, by ``pack_by_tokens``;
    else in their original order, padded (``pack_micro_batches``; on one process the consecutive chunks the
    embedded default's digits rest on). Every process gets the same number of passes (padded with empty ones)
    because a sharded forward pass is collective. A pure function of the lengths: every process computes the
    same plan.
    """
    load = [0] * world_size
    mine: list[list[int]] = [[] for _ in range(world_size)]
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        rank = min(range(world_size), key=lambda r: (load[r], r))
        load[rank] += lengths[i]
        mine[rank].append(i)
    if packed:
        plan = [pack_by_tokens(indices, lengths, max_rows, max_tokens) for indices in mine]
    else:
        plan = [pack_micro_batches(sorted(indices), lengths, max_rows, max_tokens) for indices in mine]
    most = max((len(m) for m in plan), default=0)
    return [m + [[] for _ in range(most - len(m))] for m in plan]
