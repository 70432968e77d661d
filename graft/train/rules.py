"""The exchange's rules, one registry per switch of ``graft.methods.Method``, as the policy losses are
(graft.train.losses): which prompts transfer (``select``, applied to a pair's directions by ``select_prompts``),
what is sent for them (``transfer``) and with which advantages (``advantage``). Each entry adapts a pure function
of ``graft.algo`` (the paper's equation it cites); the gate's registry lives beside the scoring it needs
(graft.engine.transfer). CONTRIBUTING.md says how to add a rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch

from graft.algo import (
    balanced_selection,
    capability_ratio,
    exchange_candidates,
    hacpo_advantages,
    pooled_advantages,
    random_prompt_selection,
    sample_one_success,
    success_candidates,
)
from graft.data.records import StepRecords
from graft.methods import Method, Registry

SELECTIONS = Registry("select")
"""Which prompts transfer, by the method's ``select`` (``none``, plain GRPO, selects nothing and has no entry)."""
TRANSFERS = Registry("transfer")
"""Which of the source's responses are sent for the selected prompts, by the method's ``transfer``."""
ADVANTAGES = Registry("advantage")
"""The advantages of the receiver's own and the sent responses, by the method's ``advantage``."""


@dataclass(frozen=True)
class SelectionRule:
    candidates: Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]
    """(receiver's success counts [G], source's [G], source's group size) -> bool [G] candidate prompts."""
    choose: Callable[[torch.Tensor, int, torch.Generator], torch.Tensor]
    """(the candidates, balanced where the method balances; the batch size; a generator) -> bool [G]."""


_keep = lambda chosen, size, generator: chosen  # noqa: E731
SELECTIONS.register("complementary")(SelectionRule(exchange_candidates, _keep))  # Eq. 4
SELECTIONS.register("any_success")(  # SGT's rule: an all-correct source group qualifies too
    SelectionRule(lambda k_recv, k_src, n: success_candidates(k_recv, k_src), _keep)
)
SELECTIONS.register("all")(  # HACPO: every prompt; the candidates only count
    SelectionRule(exchange_candidates, lambda chosen, size, generator: torch.ones_like(chosen))
)
SELECTIONS.register("random_prompts")(  # Appendix G: as many prompts as Eq. 4 selects, drawn from the batch
    SelectionRule(
        exchange_candidates,
        lambda chosen, size, generator: random_prompt_selection(int(chosen.sum()), size, generator),
    )
)


Sent = dict[int, list[int]]
"""Per selected prompt, the indices of the source's responses sent for it."""


@TRANSFERS.register("group")
def _group(peer: StepRecords, attach: torch.Tensor, generator: torch.Generator) -> Sent:
    return {g: list(range(peer.n)) for g in attach.nonzero().flatten().tolist()}


@TRANSFERS.register("success_only")
def _success_only(peer: StepRecords, attach: torch.Tensor, generator: torch.Generator) -> Sent:
    return {g: [i for i in range(peer.n) if peer.rewards[g, i] > 0] for g in attach.nonzero().flatten().tolist()}


@TRANSFERS.register("one_success")
def _one_success(peer: StepRecords, attach: torch.Tensor, generator: torch.Generator) -> Sent:
    choice = sample_one_success(peer.rewards, attach, generator)
    return {g: [int(choice[g])] for g in range(len(choice)) if choice[g] >= 0}


class Capability(NamedTuple):
    """HACPO's capabilities P (recent mean rewards) of a receiver and of its source at one step."""

    receiver: float
    source: float


class Advantages(NamedTuple):
    own: torch.Tensor
    """[G, n] the receiver's own responses."""
    peer: torch.Tensor
    """[G, m] the source's responses."""
    capability_ratio: float = 1.0
    """What the loss scales the sent responses' advantages by (HACPO's P_source / P_receiver, clipped)."""


@dataclass(frozen=True)
class AdvantageRule:
    advantages: Callable[[StepRecords, StepRecords, torch.Tensor, Capability], Advantages]
    """(own records, source records, the selected prompts bool [G], the capabilities) -> the advantages."""
    every_prompt: bool = False
    """The source's responses join the receiver's on every prompt (zero advantage off the selection)."""


def _source(own: StepRecords, peer: StepRecords, selected: torch.Tensor, capability: Capability) -> Advantages:
    """Each source's own GRPO advantages (Eq. 1)."""
    return Advantages(own.advantages.clone(), peer.advantages.clone())


def _pooled(own: StepRecords, peer: StepRecords, selected: torch.Tensor, capability: Capability) -> Advantages:
    """Pooled groups (Eq. 12) on the selected prompts only, "instead of replacing the receiver's all-fail group"
    (Appendix G), every other prompt keeping Eq. 1."""
    own_pooled, peer_pooled = pooled_advantages(own.rewards, peer.rewards)
    rows = selected.bool().unsqueeze(-1)
    return Advantages(torch.where(rows, own_pooled, own.advantages), torch.where(rows, peer_pooled, peer.advantages))


def _hacpo(own: StepRecords, peer: StepRecords, selected: torch.Tensor, capability: Capability) -> Advantages:
    """HACPO's capability-weighted advantages (zero for the source's responses off the selection); the loss scales
    the source's by the capability ratio P_source / P_receiver."""
    own_adv, peer_adv = hacpo_advantages(
        own.rewards, peer.rewards, capability_ratio(capability.receiver, capability.source)
    )
    ratio = capability_ratio(capability.source, capability.receiver)
    return Advantages(own_adv, peer_adv * selected.unsqueeze(-1), ratio)


ADVANTAGES.register("source")(AdvantageRule(_source))
ADVANTAGES.register("pooled")(AdvantageRule(_pooled))
# HACPO keeps its configuration: peer responses on every prompt, zero advantage off the selection
ADVANTAGES.register("hacpo")(AdvantageRule(_hacpo, every_prompt=True))


def select_prompts(
    method: Method,
    k: dict[str, torch.Tensor],
    sizes: dict[str, int],
    directions: list[tuple[str, str]],
    generator: torch.Generator,
) -> tuple[dict[tuple[str, str], torch.Tensor], dict[tuple[str, str], int]]:
    """Selected prompts per direction (source, receiver) and the candidate counts; ``sizes``: each source's group
    size, from its records (an archive's may differ from the receiver's).

    Balancing needs both directions of a live pair; archive replay passes one direction and is unbalanced.
    """
    rule = SELECTIONS.of(method)
    cand = {(src, recv): rule.candidates(k[recv], k[src], sizes[src]) for src, recv in directions}
    counts = {d: int(c.sum()) for d, c in cand.items()}
    if method.balanced:
        (a, b) = directions[0]
        if sorted(directions) != sorted([(a, b), (b, a)]):
            raise ValueError("balanced exchange needs both directions of one pair")
        sel_ab, sel_ba = balanced_selection(cand[(a, b)], k[a], cand[(b, a)], k[b])
        cand = {(a, b): sel_ab, (b, a): sel_ba}
    size = next(iter(k.values())).numel()
    selected = {d: rule.choose(chosen, size, generator) for d, chosen in cand.items()}
    return selected, counts
