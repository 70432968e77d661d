"""A model's rollout at one step: sample n responses per prompt, grade them, and build the step's records and the
model's own trajectories.

Each prompt is templated and tokenized once per model and step, here; its token ids travel with its trajectories to
the loss. Under torchrun each process samples and grades every ``size``-th prompt and the shares are gathered back
into batch order, so every process holds the whole step's records.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from graft.algo import group_advantages, success_counts
from graft.data.problems import Problem
from graft.data.records import StepRecords
from graft.engine.distributed import World
from graft.engine.reward import Grader, Grades
from graft.engine.rollout import Sample
from graft.engine.scoring import ScoringSettings, score_responses
from graft.engine.trajectory import Trajectory
from graft.seeding import derive
from graft.train.learner import Learner


def grade_in_shares(grader: Grader, world: World, texts: list[str], answers: list[str]) -> Grades:
    """Grade every ``size``-th item on each process and gather the rewards back into order."""
    if not world.distributed:
        return grader.grade(texts, answers)
    mine = grader.grade(world.share(texts), world.share(answers))
    timeouts, unparsed = world.sum([mine.timeouts, mine.unparsed])
    return Grades(world.gather_shares(mine.rewards, len(texts)), int(timeouts), int(unparsed))


@dataclass
class Rollout:
    """A model's step as it trains on it."""

    records: StepRecords
    """What it publishes: the step's trajectory records (graft.data.records)."""
    groups: list[list[Trajectory]]
    """Its own trajectories, one list per prompt: its tokenization, behaviour log-probs and GRPO advantages."""
    prompt_texts: list[str]
    """Its prompt strings (its template applied), one per prompt: the receiver's side of a re-tokenization."""


def own_trajectories(records: StepRecords, prompts: list[list[int]]) -> list[list[Trajectory]]:
    """A model's own trajectories from its records and its tokenization of each prompt."""
    return [
        [
            Trajectory(
                prompts[g], records.token_ids[g][i], records.behaviour_logprobs(g, i), float(records.advantages[g, i])
            )
            for i in range(records.n)
        ]
        for g in range(len(records.prompt_ids))
    ]


def _sample_and_grade(
    learner: Learner,
    step: int,
    batch: list[Problem],
    prompts: list[list[int]],
    n: int,
    seed: int,
    grader: Grader,
    world: World,
    round_: int,
) -> tuple[list[list[Sample]], Grades, dict]:
    mine, prompts = world.share(batch), world.share(prompts)
    # By the model's name, not its position: a replay run of one model draws the samples it drew when
    # co-trained with the same seed (and process count). A backend with per-prompt seeds gets one seed for all
    # processes and each prompt's position in the batch, so its samples do not depend on the process count.
    rank = 0 if learner.rollout.per_prompt_seeds else world.rank
    if round_ == 0:
        rollout_seed = derive(seed, "rollout", step, learner.name, rank)
    else:
        rollout_seed = derive(seed, "resample_rollout", step, round_, learner.name, rank)
    positions = world.share(range(len(batch)))  # the batch indices of this process's prompts
    t0 = time.perf_counter()
    samples = learner.rollout.generate(prompts, n, seed=rollout_seed, positions=positions) if mine else []
    t1 = time.perf_counter()
    grades = grader.grade([s.text for group in samples for s in group], [p.answer for p in mine for _ in range(n)])
    timings = {"rollout_s": t1 - t0, "reward_s": time.perf_counter() - t1}
    if not world.distributed:
        return samples, grades, timings
    per_prompt = [(group, grades.rewards[j * n : (j + 1) * n]) for j, group in enumerate(samples)]
    ordered = world.gather_shares(per_prompt, len(batch))
    timeouts, unparsed = world.sum([grades.timeouts, grades.unparsed])
    rewards = [r for _, row in ordered for r in row]
    return [group for group, _ in ordered], Grades(rewards, int(timeouts), int(unparsed)), timings


def _trained_logprobs(
    learner: Learner, prompts: list[list[int]], samples: list[list[Sample]], scoring: ScoringSettings, world: World
) -> list[list[list[float]]]:
    """The sampled tokens' log-probs under the training model (verl's old-log-prob recompute), so that own and
    peer tokens share one behaviour policy and rho = 1 before the first update (Sec. 4.2)."""
    policy, n = learner.policy, len(samples[0]) if samples else 0
    flat = [(g, s) for g, group in enumerate(samples) for s in group]
    logps, _ = score_responses(
        policy,
        [prompts[g] for g, _ in flat],
        [s.token_ids for _, s in flat],
        scoring,
        world,
    )
    return [logps[g * n : (g + 1) * n] for g in range(len(samples))]


def rollout_step(
    learner: Learner,
    step: int,
    batch: list[Problem],
    *,
    n: int,
    seed: int,
    grader: Grader,
    scoring: ScoringSettings,
    world: World,
    round_: int = 0,
) -> tuple[Rollout, dict]:
    """The learner's step records (GRPO advantages on its own groups, Eq. 1) with its own trajectories, and its
    rollout metrics; with the learner's ``recompute_old_logprobs``, the training forward's log-probs of the sampled
    tokens are their behaviour log-probs. ``round_``: dynamic sampling's extra draw of the step (0: the step's
    batch)."""
    texts = [learner.policy.prompt_text(p.problem) for p in batch]
    prompts = [learner.policy.encode(text) for text in texts]
    samples, grades, timings = _sample_and_grade(learner, step, batch, prompts, n, seed, grader, world, round_)
    rewards = torch.tensor(grades.rewards, dtype=torch.float32).reshape(len(batch), n)
    records = StepRecords.from_samples(
        learner.name, step, [p.id for p in batch], samples, rewards, group_advantages(rewards)
    )
    if learner.recompute_old_logprobs:
        t0 = time.perf_counter()
        records.trained_logprobs = _trained_logprobs(learner, prompts, samples, scoring, world)
        timings["recompute_s"] = time.perf_counter() - t0
    lengths = [len(s.token_ids) for group in samples for s in group]
    k = success_counts(rewards)
    info = {
        **timings,
        "reward_mean": float(rewards.mean()),
        "all_fail_frac": float((k == 0).float().mean()),
        "all_correct_frac": float((k == n).float().mean()),
        "response_len_mean": sum(lengths) / len(lengths),
        "truncated_frac": float(np.mean([s.truncated for group in samples for s in group])),
        "grader_timeouts": grades.timeouts,
        "unparsed": grades.unparsed,
        "rollouts": len(batch) * n,
    }
    return Rollout(records, own_trajectories(records, prompts), texts), info


def dynamic_rollout_step(
    learner: Learner,
    step: int,
    draw,
    *,
    target: int,
    rounds: int,
    n: int,
    seed: int,
    grader: Grader,
    scoring: ScoringSettings,
    world: World,
) -> tuple[Rollout, dict, list[Problem]]:
    """DAPO's dynamic sampling: roll out ``draw(0)`` (the step's batch), keep the groups with reward variance
    (0 < k < n), and roll out ``draw(1)``, ``draw(2)``... until ``target`` such groups are kept or ``rounds``
    extra draws were made; the first ``target`` kept groups, in draw order, make the step. When none is kept the
    step's own batch stays (every advantage 0: no gradient), so a step never has nothing to train on.

    Returns the kept groups' rollout, the metrics of the whole step (``rollouts`` counts every response sampled,
    ``ds_rounds`` the extra draws, ``ds_groups`` the informative groups kept) and the kept problems."""
    parts, groups, texts, problems, infos, kept = [], [], [], [], [], 0
    first: tuple[Rollout, list[Problem]] | None = None
    for round_ in range(rounds + 1):
        batch = draw(round_)
        rollout, info = rollout_step(
            learner, step, batch, n=n, seed=seed, grader=grader, scoring=scoring, world=world, round_=round_
        )
        infos.append(info)
        if first is None:
            first = (rollout, batch)
        k = success_counts(rollout.records.rewards)
        useful = [g for g in range(len(batch)) if 0 < int(k[g]) < n][: target - kept]
        if useful:
            parts.append(rollout.records.take(useful))
            groups += [rollout.groups[g] for g in useful]
            texts += [rollout.prompt_texts[g] for g in useful]
            problems += [batch[g] for g in useful]
            kept += len(useful)
        if kept >= target:
            break
    info = dict(infos[0])  # the step's own batch: reward_mean, all_fail_frac, ... as without dynamic sampling
    for name in ("rollout_s", "reward_s", "recompute_s", "rollouts"):
        if name in info:
            info[name] = sum(i[name] for i in infos)
    info.update(ds_rounds=len(infos) - 1, ds_groups=kept)
    if not parts:
        return first[0], info, first[1]
    return Rollout(StepRecords.concat(parts), groups, texts), info, problems
