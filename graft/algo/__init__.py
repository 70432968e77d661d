"""The paper's algorithms as pure tensor functions: no I/O, no model, CPU-tested (docs/design.md section 2)."""

from graft.algo.advantages import group_advantages, pooled_advantages, success_counts
from graft.algo.gate import compatibility, mean_token_logprob, random_admission
from graft.algo.hacpo import (
    CapabilityTracker,
    capability_ratio,
    hacpo_advantages,
    hacpo_cross_clip_lower,
    hacpo_loss,
    hacpo_own_objective,
    hacpo_peer_objective,
    low_var_kl,
)
from graft.algo.objectives import (
    RATIO_OBJECTIVES,
    clipped_surrogate,
    clipped_token_objective,
    luffy_objective,
    luffy_shaping,
    sequence_ratio_objective,
    sgt_nll,
)
from graft.algo.ordering import ORDERS, minibatch_order
from graft.algo.selection import (
    PEER_CHOICES,
    balanced_selection,
    exchange_candidates,
    group_selection,
    random_prompt_selection,
    sample_one_success,
    select_with_ties,
    success_candidates,
)

__all__ = [
    "ORDERS",
    "PEER_CHOICES",
    "RATIO_OBJECTIVES",
    "CapabilityTracker",
    "balanced_selection",
    "capability_ratio",
    "clipped_surrogate",
    "clipped_token_objective",
    "compatibility",
    "exchange_candidates",
    "group_advantages",
    "group_selection",
    "hacpo_advantages",
    "hacpo_cross_clip_lower",
    "hacpo_loss",
    "hacpo_own_objective",
    "hacpo_peer_objective",
    "low_var_kl",
    "luffy_objective",
    "luffy_shaping",
    "mean_token_logprob",
    "minibatch_order",
    "pooled_advantages",
    "random_admission",
    "random_prompt_selection",
    "sample_one_success",
    "select_with_ties",
    "sequence_ratio_objective",
    "sgt_nll",
    "success_candidates",
    "success_counts",
]
