"""Where a receiver's transferred responses come from: the co-trained model of a live pair, the co-trained peers
of a group of three or more, or an archive of another model's stored GRPO trajectories (archive replay). Each
gives, per step and receiver, one ``PeerView``; the exchange that turns it into training groups is the same code
for all (graft.train.exchange)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from graft.algo import CapabilityTracker, group_advantages, group_selection, success_counts
from graft.data.imports import follows_prompts
from graft.data.problems import Problem
from graft.data.records import StepRecords, read_step
from graft.engine.reward import Grades
from graft.errors import ConfigError
from graft.methods import Method
from graft.seeding import generator
from graft.train.rules import select_prompts


@dataclass
class PeerView:
    """What one receiver takes from its peer at one step."""

    records: StepRecords
    """The peer's records for the step's prompts (its tokenization, generation log-probs, advantages)."""
    selected: torch.Tensor
    """bool [G]: prompts whose group the receiver takes."""
    candidates: int
    """Candidate prompts in this direction before balancing."""
    capability: float
    """The peer's capability P (HACPO's recent mean reward)."""
    metrics: dict = field(default_factory=dict)
    """Extra per-step metrics for the receiver's row."""


class NoPeer:
    """Plain GRPO: nothing is transferred."""

    def views(self, step: int, batch: list[Problem], records: dict[str, StepRecords], capabilities: dict):
        return {}


class LivePair:
    """Two co-trained models exchange in both directions, balanced when the method says so."""

    def __init__(self, method: Method, seed: int):
        self.method, self.seed = method, seed

    def views(
        self,
        step: int,
        batch: list[Problem],
        records: dict[str, StepRecords],
        capabilities: dict[str, CapabilityTracker],
    ) -> dict[str, PeerView]:
        """Every model's view, computed alike on every process from every model's records."""
        a, b = records
        k = {name: success_counts(rec.rewards) for name, rec in records.items()}
        directions = [(a, b), (b, a)]
        sizes = {name: rec.n for name, rec in records.items()}
        selected, counts = select_prompts(self.method, k, sizes, directions, generator(self.seed, "select", step))
        return {
            recv: PeerView(records[src], selected[(src, recv)], counts[(src, recv)], capabilities[src].value)
            for src, recv in directions
        }


class LiveGroup:
    """Three or more co-trained models: each all-fail prompt of a receiver takes at most one peer's mixed group
    (graft.algo.group_selection), balanced per pair of models when the method says so."""

    def __init__(self, method: Method, seed: int):
        self.method, self.seed = method, seed

    def views(
        self,
        step: int,
        batch: list[Problem],
        records: dict[str, StepRecords],
        capabilities: dict[str, CapabilityTracker],
    ) -> dict[str, PeerView]:
        """Every model's view: its peers' records mixed prompt by prompt (the chosen peer's group where one is
        chosen, else the group of the peer with the most successes), and how many prompts it takes from each."""
        names = list(records)
        k = torch.stack([success_counts(records[name].rewards) for name in names])
        n = torch.tensor([records[name].n for name in names]).reshape(-1, 1)
        source = group_selection(
            k, n, self.method.balanced, self.method.peer_choice, generator(self.seed, "select", step)
        )
        mixed = ((k >= 1) & (k < n)).any(dim=0)
        views = {}
        for r, receiver in enumerate(names):
            peers = [i for i in range(len(names)) if i != r]
            best = [peers[int(k[peers, g].argmax())] for g in range(k.shape[1])]
            pick = [int(s) if s >= 0 else best[g] for g, s in enumerate(source[r].tolist())]
            metrics = {f"received_from_{names[s]}": int((source[r] == s).sum()) for s in peers}
            views[receiver] = PeerView(
                StepRecords.mix([records[name] for name in names], pick, "peers"),
                source[r] >= 0,
                int(((k[r] == 0) & mixed).sum()),
                sum(capabilities[names[s]].value for s in peers) / len(peers),
                metrics,
            )
        return views


def recompute_rewards(records: StepRecords, rewards: list[float]) -> tuple[StepRecords, int]:
    """Replace an archive's stored rewards by re-verified ones and recompute its advantages on its own groups.

    Returns the records and how many rewards changed.
    """
    new = torch.tensor(rewards, dtype=torch.float32).reshape(records.rewards.shape)
    changed = int((new != records.rewards).sum())
    records.rewards = new
    records.advantages = group_advantages(new)
    return records, changed


class ArchivePeer:
    """One model replays other models' stored trajectories: one direction, unbalanced, rewards re-verified. With
    several archives each all-fail prompt takes one archive's group (``group_selection`` without balancing)."""

    def __init__(
        self, method: Method, seed: int, archives: list[Path], grade: Callable[[list[str], list[str]], Grades]
    ):
        self.method, self.seed, self.archives, self.grade = method, seed, archives, grade
        self.follows_prompts = follows_prompts(archives[0])
        """An imported archive: each step's batch is the archive's prompts, not the receiver's sampler's."""
        self._read: tuple[int, list[StepRecords]] | None = None

    def stored(self, step: int) -> list[StepRecords]:
        if self._read is None or self._read[0] != step:
            self._read = (step, [read_step(archive, step) for archive in self.archives])
        return self._read[1]

    def batch_ids(self, step: int) -> list[str] | None:
        """The prompt ids of ``step``'s batch when the archive sets them (an import), else None."""
        return self.stored(step)[0].prompt_ids if self.follows_prompts else None

    def views(
        self,
        step: int,
        batch: list[Problem],
        records: dict[str, StepRecords],
        capabilities: dict[str, CapabilityTracker],
    ) -> dict[str, PeerView]:
        (me,) = records
        regraded, changed = [], 0
        for archive, stored in zip(self.archives, self.stored(step), strict=True):
            if stored.prompt_ids != [p.id for p in batch]:
                raise ConfigError(
                    f"--peer-archive: step {step} of {str(archive)!r} holds other prompts than this run's batch; "
                    "replay needs the peer's GRPO run with the same data and seed"
                )
            answers = [p.answer for p in batch for _ in range(stored.n)]
            grades = self.grade([t for row in stored.texts for t in row], answers)
            stored, count = recompute_rewards(stored, grades.rewards)
            regraded.append(stored)
            changed += count
        if len(regraded) == 1:
            (stored,) = regraded
            k = {me: success_counts(records[me].rewards), "peer": success_counts(stored.rewards)}
            direction = ("peer", me)
            gen = generator(self.seed, "select", step)
            sizes = {me: records[me].n, "peer": stored.n}
            selected, counts = select_prompts(self.method, k, sizes, [direction], gen)
            capability = float(stored.rewards.mean())
            metrics = {"archive_rewards_changed": changed}
            return {me: PeerView(stored, selected[direction], counts[direction], capability, metrics)}
        k = torch.stack([success_counts(r.rewards) for r in [records[me], *regraded]])
        n = torch.tensor([r.n for r in [records[me], *regraded]]).reshape(-1, 1)  # each source's own group size
        source = group_selection(k, n, False, self.method.peer_choice, generator(self.seed, "select", step))[0]
        best = (k[1:].argmax(dim=0) + 1).tolist()  # an unselected prompt shows the archive with most successes
        pick = [int(s) - 1 if s >= 0 else best[g] - 1 for g, s in enumerate(source.tolist())]
        names = [archive.name for archive in self.archives]
        metrics = {"archive_rewards_changed": changed}
        metrics |= {f"received_from_{name}": int((source == i + 1).sum()) for i, name in enumerate(names)}
        candidates = int(((k[0] == 0) & ((k[1:] >= 1) & (k[1:] < n[1:])).any(dim=0)).sum())
        capability = float(torch.stack([r.rewards.mean() for r in regraded]).mean())
        mixed = StepRecords.mix(regraded, pick, "peers")
        return {me: PeerView(mixed, source >= 0, candidates, capability, metrics)}


PeerSource = NoPeer | LivePair | LiveGroup | ArchivePeer
"""Where a run's receivers take transferred responses from (the method's ``peer``)."""
