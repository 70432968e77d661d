"""The exchange of one step: from what every model published to each receiver's training groups, as the method
prescribes (docs/design.md section 4). The trainer enters it once per step (``exchange``).

Here the switches of ``graft.methods.Method`` meet their rules (graft.train.rules, graft.engine.transfer,
graft.train.losses): which prompts transfer (selection and balancing, by the peer source: graft.train.peers), what
is sent (whole group, successes, one success), weighed by the receiver's gate after re-tokenization and scoring,
with which advantages (source, pooled, HACPO). A peer is a co-trained model of the same run or an archive; both
take this one path.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from graft.algo import CapabilityTracker, success_counts
from graft.data.problems import Problem
from graft.data.records import StepRecords
from graft.engine.distributed import SINGLE, World
from graft.engine.policy import Policy
from graft.engine.scoring import ScoringSettings
from graft.engine.trajectory import Group, Trajectory
from graft.engine.transfer import score_and_gate
from graft.methods import Method
from graft.seeding import generator
from graft.train.learner import Learner
from graft.train.losses import UPDATES
from graft.train.peers import PeerSource, PeerView
from graft.train.rules import ADVANTAGES, TRANSFERS, Capability
from graft.train.sampling import Rollout


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


def exchange(
    method: Method,
    peers: PeerSource,
    step: int,
    batch: list[Problem],
    records: dict[str, StepRecords],
    rollouts: dict[str, Rollout],
    capabilities: dict[str, CapabilityTracker],
    receivers: list[Learner],
    *,
    seed: int,
    scoring: ScoringSettings,
) -> dict[str, tuple[list[Group], dict]]:
    """Every receiver's training groups at ``step`` and its exchange metrics, from every model's published
    ``records`` (the same on every process), the receivers' own ``rollouts`` and each model's HACPO capability:
    the peer source selects (the same decisions on every process), then each receiver of this process takes, scores
    and weighs what is sent to it."""
    views = peers.views(step, batch, records, capabilities)
    out = {}
    for learner in receivers:
        view, rollout = views.get(learner.name), rollouts[learner.name]
        t0 = time.perf_counter()
        groups, stats = receive(
            method,
            learner.policy,
            rollout,
            view,
            capability=capabilities[learner.name].value,
            generator=generator(seed, "admit", step, learner.name),
            scoring=scoring,
            world=learner.world,
        )
        metrics = {**(view.metrics if view else {}), "scoring_s": time.perf_counter() - t0}
        metrics |= {"candidates": view.candidates if view else 0, **stats.metrics()}
        if view is not None:
            own_fail = success_counts(rollout.records.rewards) == 0
            metrics["all_fail"] = int(own_fail.sum())
            # Figure 1: how many of the receiver's all-fail prompts the peer solved at least once
            metrics["peer_solved_all_fail"] = int((own_fail & (success_counts(view.records.rewards) > 0)).sum())
        out[learner.name] = groups, metrics
    return out


def receive(
    method: Method,
    receiver: Policy,
    rollout: Rollout,
    view: PeerView | None,
    *,
    capability: float,
    generator: torch.Generator,
    scoring: ScoringSettings,
    world: World = SINGLE,
) -> tuple[list[Group], ExchangeStats]:
    """One receiver's training groups for one step (Algorithm 1 lines 17-29 and the presets' variants): its own
    trajectories, with the peer's sent ones where the method transfers them.

    Args:
        rollout: the receiver's records and own trajectories; its tokenization.
        view: what the receiver takes from its peer (the peer's records for the same prompts and the selection), or
            None (plain GRPO).
        capability: the receiver's HACPO capability (its peer's is the view's).
    """
    stats = ExchangeStats()
    own = rollout.records
    if view is None:
        return [Group(g, rows, False) for g, rows in enumerate(rollout.groups)], stats
    peer, selected = view.records, view.selected
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
    gated = score_and_gate(
        method,
        receiver,
        [rollout.prompt_texts[g] for g, _ in flat],
        [peer.texts[g][i] for g, i in flat],
        [not peer.truncated[g][i] for g, i in flat],
        src_mean,
        scoring,
        generator,
        world,
        old_logprobs=update.peer_old_logprobs,
    )
    stats.truncated = gated.cut
    stats.s_values = gated.s
    adv = advantage.advantages(own, peer, selected, Capability(capability, view.capability))

    peer_rows: dict[int, list[Trajectory]] = {}
    for (g, i), row in zip(flat, gated.rows, strict=True):
        correct = bool(peer.rewards[g, i] > 0)
        stats.transferred += 1
        stats.correct_transferred += correct
        if row.weight <= 0:
            continue
        stats.admitted += 1
        stats.correct_admitted += correct
        stats.weights.append(row.weight)
        row.advantage, row.capability_ratio = float(adv.peer[g, i]), adv.capability_ratio
        row.nll_only = update.peer_nll_only
        peer_rows.setdefault(g, []).append(row)

    groups = []
    for g, own_rows in enumerate(rollout.groups):
        grafted = bool(attach[g]) and g in sent
        keep = method.keep_own or not grafted
        for i, row in enumerate(own_rows):
            row.advantage = float(adv.own[g, i])
        groups.append(Group(g, (own_rows if keep else []) + peer_rows.get(g, []), grafted))
    return [grp for grp in groups if grp.rows], stats
