"""One trajectory as a model trains on it, from its rollout (or its transfer) to the loss: the one row type of a
step's update (docs/design.md section 4)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Trajectory:
    """One response under the trainee's tokenization, with what its loss reads."""

    prompt_ids: list[int]
    """The prompt's token ids, tokenized once per model and step (shared by the responses of its group)."""
    response_ids: list[int]
    old_logp: list[float]
    """The trainee's behaviour-policy log-probs of the response's tokens (for its own responses the generation
    log-probs, or the training forward's where they were recomputed)."""
    advantage: float
    weight: float = 1.0
    """The compatibility weight of a sent response (Eqs. 7-8, 11); 1 for own responses."""
    is_peer: bool = False
    src_mean_ll: float = 0.0
    """The source's mean log-prob of a sent response (the gate's Eq. 6 term, HACPO's peer ratio)."""
    capability_ratio: float = 1.0
    """HACPO's clipped capability ratio of a sent response's source to the trainee, by which its loss scales the
    advantage; 1 for own responses and under every other rule."""
    nll_only: bool = False
    """SGT: the response enters only the supervised term."""


@dataclass
class Group:
    """The trajectories a trainee trains on for one prompt of the step."""

    prompt_index: int
    rows: list[Trajectory]
    grafted: bool
    """The prompt takes a peer's responses (the minibatch order places these groups)."""
