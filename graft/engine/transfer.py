"""Score-then-gate: what a receiver makes of the responses a source sends it. One function for training's exchange
(graft.train.exchange) and the complementarity pre-flight (graft.eval.complementarity), so that Figure 1's
pre-flight admits what training would admit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from graft.algo import compatibility, random_admission
from graft.engine.distributed import SINGLE, World
from graft.engine.policy import Policy
from graft.engine.scoring import ScoringSettings, cut_to_limit, retokenize_all, score_responses
from graft.engine.trajectory import Trajectory
from graft.methods import Method, Registry


@dataclass
class Gated:
    """Sent responses as the receiver trains on them, weighed."""

    rows: list[Trajectory]
    """One per sent response, in the order sent: the receiver's tokenization, its behaviour log-probs where the
    gate or the update scored them (else zeros), the weight (0: not admitted) and the source's mean log-prob; the
    advantage is the exchange's to set (graft.train.rules.ADVANTAGES)."""
    s: list[float]
    """The compatibility score of each response, where the gate computes one (else empty)."""
    cut: int = 0
    """How many re-tokenized responses were cut to the receiver's length limit."""


GATES = Registry("gate")
"""How a receiver weighs the responses sent to it, by the method's ``gate``."""
ADMISSIONS = Registry("admission")
"""Which of the scored responses the compatibility gate admits, by the method's ``admission``."""

Weigh = Callable[[torch.Tensor, torch.Tensor, Method, torch.Generator], tuple[list[float], torch.Tensor]]


@dataclass(frozen=True)
class GateRule:
    scores: bool
    """The rule reads the receiver's mean log-likelihood of each response: one forward pass over them."""
    weigh: Weigh
    """(receiver's means, source's means, method, generator) -> (compatibility scores, or none; weights)."""


def _compatibility(recv_mean, src_mean, method, generator):
    s, weights = compatibility(recv_mean.float(), src_mean, method.delta, method.cap)
    return s.tolist(), ADMISSIONS.of(method)(s, weights, method, generator)


GATES.register("compat")(GateRule(True, _compatibility))
GATES.register("none")(GateRule(False, lambda recv_mean, src_mean, method, generator: ([], torch.ones(len(src_mean)))))
ADMISSIONS.register("floor")(lambda s, weights, method, generator: weights)  # Eq. 8: w = 1[s > delta] min(s, cap)
ADMISSIONS.register("random")(  # Eq. 11: as many as pass the floor, drawn uniformly
    lambda s, weights, method, generator: random_admission(
        s, torch.ones_like(s, dtype=torch.bool), method.delta, generator, method.cap
    )
)


def score_and_gate(
    method: Method,
    receiver: Policy,
    prompt_texts: list[str],
    responses: list[str],
    generated_eos: list[bool],
    src_mean: torch.Tensor,
    scoring: ScoringSettings,
    generator: torch.Generator,
    world: World = SINGLE,
    *,
    old_logprobs: bool = False,
) -> Gated:
    """Re-tokenize the sent responses for the receiver, cut them to its length limit, where the gate or the update
    needs them (``old_logprobs``: the update's ratio reads the receiver's behaviour log-probs) score them with one
    forward pass of its behaviour policy, and weigh them by the method's gate (``GATES``).

    Every method cuts a re-tokenized response longer than the receiver's ``max_response_tokens`` (HACPO's official
    code does so; a receiver cannot generate past its limit, so it never trains on more than it could sample).
    The gate then compares the receiver's mean over the kept prefix with the source's mean over its whole
    response; the count is the metric ``peer_truncated``."""
    gate = GATES.of(method)
    p_ids, full = retokenize_all(receiver, prompt_texts, responses, generated_eos)
    r_ids, cut = cut_to_limit(full, scoring.max_response_tokens)
    if not responses or not (gate.scores or old_logprobs):
        old_logps, s, weights = [[0.0] * len(r) for r in r_ids], [], torch.ones(len(responses))
    else:
        old_logps, recv_mean = score_responses(receiver, p_ids, r_ids, scoring, world)
        s, weights = gate.weigh(recv_mean, src_mean, method, generator)
    rows = [
        Trajectory(p, r, old, 0.0, weight=float(w), is_peer=True, src_mean_ll=float(src))
        for p, r, old, w, src in zip(p_ids, r_ids, old_logps, weights, src_mean, strict=True)
    ]
    return Gated(rows, s, cut)
