"""Score-then-gate: what a receiver makes of the responses a source sends it. One function for training's exchange
(graft.train.exchange) and the complementarity pre-flight (graft.eval.complementarity), so that Figure 1's
pre-flight admits what training would admit.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from graft.algo import compatibility, random_admission
from graft.engine.distributed import SINGLE, World
from graft.engine.policy import Policy
from graft.engine.scoring import ScoringSettings, cut_to_limit, retokenize_all, score_responses
from graft.methods import Method


@dataclass
class Gated:
    """Sent responses under the receiver's tokenization, with its behaviour-policy log-probs and their weights."""

    prompt_ids: list[list[int]]
    response_ids: list[list[int]]
    old_logps: list[list[float]]
    src_mean: torch.Tensor
    """Source's mean generation log-prob of each response (Eq. 6 under its own tokenization)."""
    weights: torch.Tensor
    """The weight of each response (Eqs. 7-8, 11); 0: not admitted."""
    s: list[float]
    """The compatibility score of each response, where the gate computes one (else empty)."""
    cut: int = 0
    """How many re-tokenized responses were cut to the receiver's length limit."""


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
) -> Gated:
    """Re-tokenize the sent responses for the receiver, cut them to its length limit, where the gate or the update
    needs them score them with one forward pass of its behaviour policy, and weigh them: the compatibility gate,
    random admission, or 1.

    Every method cuts a re-tokenized response longer than the receiver's ``max_response_tokens`` (HACPO's official
    code does so; a receiver cannot generate past its limit, so it never trains on more than it could sample).
    The gate then compares the receiver's mean over the kept prefix with the source's mean over its whole
    response; the count is the metric ``peer_truncated``."""
    p_ids, full = retokenize_all(receiver, prompt_texts, responses, generated_eos)
    r_ids, cut = cut_to_limit(full, scoring.max_response_tokens)
    if not (method.gate == "compat" or method.update == "clipped") or not responses:
        old_logps = [[0.0] * len(r) for r in r_ids]
        return Gated(p_ids, r_ids, old_logps, src_mean, torch.ones(len(responses)), [], cut)
    old_logps, recv_mean = score_responses(receiver, p_ids, r_ids, scoring, world)
    if method.gate != "compat":
        return Gated(p_ids, r_ids, old_logps, src_mean, torch.ones(len(responses)), [], cut)
    s, weights = compatibility(recv_mean.float(), src_mean, method.delta, method.cap)
    if method.admission == "random":
        weights = random_admission(s, torch.ones_like(s, dtype=torch.bool), method.delta, generator, method.cap)
    return Gated(p_ids, r_ids, old_logps, src_mean, weights, s.tolist(), cut)
