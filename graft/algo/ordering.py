"""Minibatch construction and order (paper Section 4.2 "Peer-last updates", Appendix G "peer position")."""

from __future__ import annotations

from typing import Literal

import torch

Order = Literal["peer_last", "peer_first", "uniform", "prompt", "self_first"]
ORDERS: tuple[str, ...] = ("peer_last", "peer_first", "uniform", "prompt", "self_first")


def minibatch_order(
    is_peer: torch.Tensor,
    num_minibatches: int,
    order: Order = "peer_last",
    generator: torch.Generator | None = None,
) -> list[torch.Tensor]:
    """Split a step's items (groups, or responses for ``self_first``) into minibatches and order them.

    Items are laid out own-first (peer_last, uniform, self_first), peer-first, or in prompt order (prompt),
    keeping their order within each kind, and cut into ``num_minibatches`` contiguous chunks of near-equal
    counts, so the number of optimizer updates per step stays as configured whatever the gate left of the
    grafted groups. ``peer_last`` puts every minibatch that holds a grafted group after the receiver's own
    on-policy minibatches, so that the first update, where rho = 1 and clipping cannot act, sees own data
    only. ``uniform`` builds the same minibatches and shuffles their order with ``generator`` (the paper's
    "uniform" ablation). ``prompt`` ignores where the peer is (original SGT, which has no peer ordering).
    ``self_first`` lays out responses rather than whole groups: every own response, then every peer
    response (HACPO's official trainer: own trajectories first, no shuffle), so updates are own-only, then
    peer-only.

    Args:
        is_peer: bool [G], True for a grafted (peer-containing) group, or for a peer response.
        num_minibatches: updates per step; fewer chunks are returned only when there are fewer items.
        order: one of ``ORDERS``.
        generator: required for "uniform".

    Returns:
        list of long tensors of group indices, in update order.
    """
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    if num_minibatches < 1:
        raise ValueError(f"num_minibatches must be >= 1, got {num_minibatches}")
    peer = is_peer.bool()
    own_idx = (~peer).nonzero().squeeze(-1)
    peer_idx = peer.nonzero().squeeze(-1)
    if order == "prompt":
        layout = torch.arange(peer.numel())
    elif order == "peer_first":
        layout = torch.cat([peer_idx, own_idx])
    else:
        layout = torch.cat([own_idx, peer_idx])
    if layout.numel() == 0:
        return []
    chunks = list(torch.tensor_split(layout, min(num_minibatches, layout.numel())))
    if order == "uniform":
        if generator is None:
            raise ValueError("order 'uniform' needs a seeded generator")
        chunks = [chunks[i] for i in torch.randperm(len(chunks), generator=generator).tolist()]
    return chunks
