"""Which prompts exchange groups: complementary candidates, balancing, and the selection baselines.

Direction A -> B means B receives A's group. Every function takes and returns per-prompt tensors [G].
"""

from __future__ import annotations

import torch


def exchange_candidates(k_recv: torch.Tensor, k_src: torch.Tensor, n: int) -> torch.Tensor:
    """C_{A->B} of paper Eq. 4: the receiver failed all n samples and the source group is mixed.

    k_recv == 0 and 1 <= k_src < n. An all-correct source group is not a candidate: its advantages are
    all zero, so it carries no reward contrast.

    Args:
        k_recv: [G] receiver success counts k_B(q).
        k_src: [G] source success counts k_A(q).
        n: group size of the source.

    Returns:
        bool [G].
    """
    return (k_recv == 0) & (k_src >= 1) & (k_src < n)


def success_candidates(k_recv: torch.Tensor, k_src: torch.Tensor) -> torch.Tensor:
    """SGT's eligibility (Mutual RL, as the GRAFT paper ran it): k_recv == 0 and k_src >= 1.

    Unlike Eq. 4, an all-correct source group (k_src == n) qualifies.
    """
    return (k_recv == 0) & (k_src >= 1)


def select_with_ties(cand: torch.Tensor, k_src: torch.Tensor, m: int) -> torch.Tensor:
    """SelectWithTies of Algorithm 1: the top m candidates by k_src, plus every candidate tied with the m-th.

    Returns no prompt when m <= 0. The count may exceed m when there are ties at the boundary.
    """
    if m <= 0:
        return torch.zeros_like(cand)
    values = k_src[cand]
    if values.numel() <= m:
        return cand.clone()
    boundary = torch.topk(values, m).values[-1]
    return cand & (k_src >= boundary)


def balanced_selection(
    cand_ab: torch.Tensor,
    k_a: torch.Tensor,
    cand_ba: torch.Tensor,
    k_b: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Balanced exchange (paper Section 4.1, Algorithm 1 lines 13-16).

    m = min(|C_AB|, |C_BA|); each direction keeps its candidates ranked by the *source's* success count,
    the first m plus all ties at the boundary. Both models can compute this from the published rewards, so
    it is deterministic and symmetric. m = 0 selects nothing in either direction.

    Args:
        cand_ab: bool [G], prompts where B receives from A (ranked by k_a).
        k_a: [G] success counts of A.
        cand_ba: bool [G], prompts where A receives from B (ranked by k_b).
        k_b: [G] success counts of B.

    Returns:
        (sel_ab, sel_ba), bool [G] each.
    """
    m = min(int(cand_ab.sum()), int(cand_ba.sum()))
    return select_with_ties(cand_ab, k_a, m), select_with_ties(cand_ba, k_b, m)


PEER_CHOICES = ("most_successes", "random")


def group_selection(
    k: torch.Tensor,
    n: int | torch.Tensor,
    balanced: bool = True,
    choice: str = "most_successes",
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """The exchange in a group of K >= 2 models: for each receiver and prompt, the one peer whose whole group
    replaces the receiver's all-fail group, or -1 for none.

    1. Candidates (Eq. 4 for every direction): receiver r failed all n samples (k_r = 0) and peer s's group is
       mixed (1 <= k_s < n).
    2. One peer per candidate prompt. ``most_successes``: the peer with the largest k_s, the key by which
       SelectWithTies ranks a direction's prompts (the group with the most successes holds the most correct
       demonstrations the receiver lacks); ties go to the peer first in the group's order (deterministic and
       free: a tie-break by the gate's score would need the receiver's forward pass over every tied group).
       ``random``: a candidate peer drawn uniformly (``generator``), the ablation of that choice.
    3. Balancing (Algorithm 1 lines 13-16, per pair of models): for every pair {a, b}, m = the smaller of the
       counts of prompts b takes from a and a takes from b; each direction keeps its first m prompts ranked by its
       source's k, with the ties at the boundary (``select_with_ties``). A prompt dropped here is not offered to
       another peer: the receiver trains on its own group there.

    With K = 2 this is exactly ``balanced_selection`` of the two directions' ``exchange_candidates``.

    Args:
        k: [K, G] success counts of each model on each prompt of the step.
        n: group size, or [K] each model's (an archive's may differ from the receiver's).

    Returns:
        long [K, G]: the source model's index for each (receiver, prompt), -1 where it takes no peer group.
    """
    if choice not in PEER_CHOICES:
        raise ValueError(f"choice must be one of {PEER_CHOICES}, got {choice!r}")
    models = k.shape[0]
    mixed = (k >= 1) & (k < torch.as_tensor(n).reshape(-1, 1))
    cand = (k == 0)[:, None, :] & mixed[None, :, :]  # [receiver, source, G]; r == s never: k_r = 0 is not mixed
    if choice == "most_successes":
        score = torch.where(cand, k[None, :, :].to(torch.float32), -1.0)
    else:
        score = torch.where(cand, torch.rand(cand.shape, generator=generator), -1.0)
    source = torch.where(cand.any(dim=1), score.argmax(dim=1), -1)  # argmax: the first of tied maxima
    if balanced:
        for a in range(models):
            for b in range(a + 1, models):
                ab, ba = source[b] == a, source[a] == b  # b takes from a; a takes from b
                m = min(int(ab.sum()), int(ba.sum()))
                source[b] = torch.where(ab & ~select_with_ties(ab, k[a], m), -1, source[b])
                source[a] = torch.where(ba & ~select_with_ties(ba, k[b], m), -1, source[a])
    return source


def random_prompt_selection(count: int, num_prompts: int, generator: torch.Generator) -> torch.Tensor:
    """Count-matched random prompts (paper Appendix G): ``count`` prompts drawn uniformly from the batch.

    The draw ignores both models' rewards; ``count`` is the number GRAFT's own rule selects in this direction.
    """
    if not 0 <= count <= num_prompts:
        raise ValueError(f"count must be in [0, {num_prompts}], got {count}")
    chosen = torch.randperm(num_prompts, generator=generator)[:count]
    mask = torch.zeros(num_prompts, dtype=torch.bool)
    mask[chosen] = True
    return mask


def sample_one_success(rewards: torch.Tensor, select: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """SGT's transfer: one correct source response drawn uniformly per selected prompt.

    Args:
        rewards: [G, n] source rewards.
        select: bool [G] prompts that transfer.

    Returns:
        long [G]: the chosen response index, or -1 where the prompt is not selected or has no success.
    """
    correct = rewards > 0
    keys = torch.rand(rewards.shape, generator=generator)
    keys = torch.where(correct, keys, torch.full_like(keys, -1.0))
    choice = keys.argmax(dim=-1)
    valid = select & correct.any(dim=-1)
    return torch.where(valid, choice, torch.full_like(choice, -1))
