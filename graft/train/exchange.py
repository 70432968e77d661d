"""From published trajectory records to a receiver's training groups, as a method preset prescribes.

This is where the switches of ``graft.methods.Method`` meet the algorithm layer: which prompts transfer
(selection and balancing), what is sent (whole group, successes, one success), with which advantages (source,
pooled, HACPO) and weights (gate, random admission), re-tokenized and scored by the receiver. The peer is a
source of ``StepRecords``, either a co-trained model of the same run or an archive; both take this one path.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from graft.algo import balanced_selection, group_advantages
from graft.data.records import StepRecords
from graft.engine.distributed import SINGLE, World
from graft.engine.policy import Policy
from graft.engine.scoring import ScoringSettings
from graft.engine.transfer import score_and_gate
from graft.methods import Method
from graft.train.losses import UPDATES
from graft.train.rules import ADVANTAGES, SELECTIONS, TRANSFERS, Capability


@dataclass
class Row:
    """One response as the receiver trains on it (receiver tokenization)."""

    prompt_ids: list[int]
    response_ids: list[int]
    old_logp: list[float]
    """Receiver behaviour-policy log-probs (generation log-probs for own responses)."""
    advantage: float
    weight: float = 1.0
    is_peer: bool = False
    src_mean_ll: float = 0.0
    """Source's mean generation log-prob (HACPO's peer ratio)."""
    capability_ratio: float = 1.0
    """HACPO's clipped capability ratio of the response's source to the receiver, by which its loss scales the
    advantage of a sent response."""
    nll_only: bool = False
    """SGT: enters only the supervised term."""


@dataclass
class Group:
    prompt_index: int
    rows: list[Row]
    grafted: bool


@dataclass
class ExchangeStats:
    """What one receiver's exchange did at one step (its metrics row)."""

    selected: int = 0
    transferred: int = 0
    """Peer responses sent for the selected prompts."""
    admitted: int = 0
    """Of those, how many enter the update (weight > 0)."""
    s_values: list[float] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    correct_transferred: int = 0
    correct_admitted: int = 0
    truncated: int = 0
    """Sent responses whose re-tokenization exceeded the receiver's max_response_tokens and was cut."""

    def metrics(self) -> dict[str, float | int | list[int]]:
        hist = torch.histc(torch.tensor(self.weights or [0.0]), bins=10, min=0.0, max=1.0)
        if not self.weights:
            hist.zero_()
        s = torch.tensor(self.s_values) if self.s_values else None
        wrong_transferred = self.transferred - self.correct_transferred
        wrong_admitted = self.admitted - self.correct_admitted
        return {
            "selected": self.selected,
            "transferred": self.transferred,
            "admitted": self.admitted,
            "gate_pass_rate": self.admitted / self.transferred if self.transferred else None,
            "gate_pass_rate_correct": self.correct_admitted / self.correct_transferred
            if self.correct_transferred
            else None,
            "gate_pass_rate_wrong": wrong_admitted / wrong_transferred if wrong_transferred else None,
            "correct_transferred": self.correct_transferred,
            "correct_admitted": self.correct_admitted,
            "peer_truncated": self.truncated,
            "s_median": float(s.median()) if s is not None else None,
            "weight_hist": [int(v) for v in hist.tolist()],
        }


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


def build_groups(
    method: Method,
    receiver: Policy,
    own: StepRecords,
    peer: StepRecords | None,
    *,
    selected: torch.Tensor | None,
    prompt_texts: list[str],
    generator: torch.Generator,
    scoring: ScoringSettings,
    capability: Capability | None,
    world: World = SINGLE,
) -> tuple[list[Group], ExchangeStats]:
    """The receiver's training groups for one step (Algorithm 1 lines 17-29 and the presets' variants).

    Args:
        own: the receiver's records; own.token_ids are in its vocabulary.
        peer: the source's records for the same prompts, or None (plain GRPO).
        selected: bool [G], prompts where the receiver takes the peer's responses.
        prompt_texts: the receiver's prompt strings (its template applied), one per prompt.
        capability: the receiver's and the source's HACPO capabilities; None without a peer.
    """
    stats = ExchangeStats()
    own_prompts = [receiver.encode(text) for text in prompt_texts]

    def own_row(g: int, i: int, advantage: float) -> Row:
        return Row(own_prompts[g], own.token_ids[g][i], own.behaviour_logprobs(g, i), advantage)

    if peer is None or selected is None:
        return [
            Group(g, [own_row(g, i, float(own.advantages[g, i])) for i in range(own.n)], False)
            for g in range(len(own.prompt_ids))
        ], stats

    if own.prompt_ids != peer.prompt_ids:
        raise ValueError(f"peer records of step {peer.step} are for other prompts than the receiver's batch")
    stats.selected = int(selected.sum())
    advantage, update = ADVANTAGES.of(method), UPDATES.of(method)
    attach = torch.ones_like(selected) if advantage.every_prompt else selected
    sent = TRANSFERS.of(method)(peer, attach, generator)
    flat = [(g, i) for g, items in sent.items() for i in items]
    # HACPO's official code takes the source's log-probs from its training model; GRAFT's gate uses the
    # generation log-probs (docs/design.md section 10).
    trained = update.source_trained_logprobs
    src_mean = torch.tensor([peer.mean_logprob(g, i, trained=trained) for g, i in flat], dtype=torch.float32)
    scored = score_and_gate(
        method,
        receiver,
        [prompt_texts[g] for g, _ in flat],
        [peer.texts[g][i] for g, i in flat],
        [not peer.truncated[g][i] for g, i in flat],
        src_mean,
        scoring,
        generator,
        world,
        old_logprobs=update.peer_old_logprobs,
    )
    stats.truncated = scored.cut
    stats.s_values = scored.s
    weights = scored.weights
    adv = advantage.advantages(own, peer, selected, capability)
    own_adv, peer_adv = adv.own, adv.peer

    peer_rows: dict[int, list[Row]] = {}
    for j, (g, i) in enumerate(flat):
        correct = bool(peer.rewards[g, i] > 0)
        stats.transferred += 1
        stats.correct_transferred += correct
        w = float(weights[j])
        if w <= 0:
            continue
        stats.admitted += 1
        stats.correct_admitted += correct
        stats.weights.append(w)
        row = Row(
            scored.prompt_ids[j],
            scored.response_ids[j],
            scored.old_logps[j],
            float(peer_adv[g, i]),
            weight=w,
            is_peer=True,
            src_mean_ll=float(scored.src_mean[j]),
            capability_ratio=adv.capability_ratio,
            nll_only=update.peer_nll_only,
        )
        peer_rows.setdefault(g, []).append(row)

    groups = []
    for g in range(len(own.prompt_ids)):
        grafted = bool(attach[g]) and g in sent
        keep = method.keep_own or not grafted
        own_rows = [own_row(g, i, float(own_adv[g, i])) for i in range(own.n)] if keep else []
        groups.append(Group(g, own_rows + peer_rows.get(g, []), grafted))
    return [grp for grp in groups if grp.rows], stats


def recompute_rewards(records: StepRecords, rewards: list[float]) -> tuple[StepRecords, int]:
    """Replace an archive's stored rewards by re-verified ones and recompute its advantages on its own groups.

    Returns the records and how many rewards changed.
    """
    new = torch.tensor(rewards, dtype=torch.float32).reshape(records.rewards.shape)
    changed = int((new != records.rewards).sum())
    records.rewards = new
    records.advantages = group_advantages(new)
    return records, changed
