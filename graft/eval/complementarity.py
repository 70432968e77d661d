"""``graft complementarity``: would GRAFT have anything to exchange between two models? (paper Figure 1)

For a set of prompts and n samples per model it reports, per direction "A->B" (B receives): the receiver's
all-fail prompts, the fraction of them on which the peer's group is mixed (the candidates of Eq. 4) or has any
success, the selection after balancing, and how the compatibility gate would treat the would-be transfers
(pass rate, weights, s quantiles, correct vs incorrect). A pre-flight check before paying for co-training.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from graft.algo import balanced_selection, exchange_candidates, group_advantages, success_counts
from graft.config import RunConfig
from graft.data.problems import Problem
from graft.data.records import StepRecords
from graft.engine.policy import Policy
from graft.engine.reward import Grader
from graft.engine.rollout import HFRollout
from graft.engine.scoring import ScoringSettings
from graft.engine.transfer import score_and_gate
from graft.errors import ConfigError
from graft.methods import PRESETS, Method
from graft.seeding import derive, generator


def _quantiles(values: torch.Tensor) -> dict[str, float] | None:
    if values.numel() == 0:
        return None
    q = torch.quantile(values.double(), torch.tensor([0.1, 0.25, 0.5, 0.75, 0.9], dtype=torch.float64))
    return {k: round(float(v), 4) for k, v in zip(("p10", "p25", "p50", "p75", "p90"), q, strict=True)}


def analyse(
    policies: list[Policy],
    problems: list[Problem],
    grader: Grader,
    n: int = 8,
    seed: int = 0,
    max_new_tokens: int = 128,
    temperature: float = 1.0,
    top_p: float = 1.0,
    delta: float = Method.delta,
    sets: list[str] | None = None,
    scoring: ScoringSettings | None = None,
) -> dict:
    """Sample, grade and score; returns a JSON-ready report for the two policies.

    ``sets`` labels each problem with the benchmark it came from, for per-set accuracies. ``scoring``: how a
    receiver scores the peer's responses (its forward passes' budgets, its length limit); None: the defaults at
    ``temperature``.
    """
    scoring = scoring or ScoringSettings(temperature=temperature)
    records = {}
    for pol in policies:
        prompts = [pol.encode(pol.prompt_text(p.problem)) for p in problems]
        rollout = HFRollout(pol, max_new_tokens, temperature, top_p)
        samples = rollout.generate(prompts, n, seed=derive(seed, "complementarity", pol.name))
        grades = grader.grade(
            [s.text for group in samples for s in group], [p.answer for p in problems for _ in range(n)]
        )
        rewards = torch.tensor(grades.rewards).reshape(len(problems), n)
        records[pol.name] = StepRecords.from_samples(
            pol.name, 0, [p.id for p in problems], samples, rewards, group_advantages(rewards)
        )
    method = dataclasses.replace(PRESETS["graft"].method, n=n, delta=delta)
    report = exchange_report(policies, problems, records, method, scoring, seed)
    if sets is not None:
        labels = sorted(set(sets), key=sets.index)
        report["accuracy_by_set"] = {
            label: {
                name: round(float(r.rewards[torch.tensor([s == label for s in sets])].mean()), 4)
                for name, r in records.items()
            }
            for label in labels
        }
    return report


def exchange_report(
    policies: list[Policy],
    problems: list[Problem],
    records: dict[str, StepRecords],
    method: Method,
    scoring: ScoringSettings,
    seed: int,
    step: int = 0,
) -> dict:
    """What GRAFT's exchange makes of two models' records of one step's ``problems``, per direction: the
    candidates, the balanced selection, and what the receiver's gate admits of the transferred responses, scored
    and gated by the function training calls (graft.engine.transfer.score_and_gate)."""
    a, b = (p.name for p in policies)
    k = {name: success_counts(r.rewards) for name, r in records.items()}
    cand = {
        (a, b): exchange_candidates(k[b], k[a], records[a].n),
        (b, a): exchange_candidates(k[a], k[b], records[b].n),
    }
    sel_ab, sel_ba = balanced_selection(cand[(a, b)], k[a], cand[(b, a)], k[b])
    selected = {(a, b): sel_ab, (b, a): sel_ba}
    report: dict = {
        "prompts": len(problems),
        "n": method.n,
        "delta": method.delta,
        "accuracy": {name: round(float(r.rewards.mean()), 4) for name, r in records.items()},
        "directions": {},
    }
    by_name = {p.name: p for p in policies}
    for (src, recv), chosen in selected.items():
        report["directions"][f"{src}->{recv}"] = _direction(
            by_name[recv],
            problems,
            src=records[src],
            k_recv=k[recv],
            candidates=cand[(src, recv)],
            chosen=chosen,
            method=method,
            scoring=scoring,
            generator=generator(seed, "admit", step, recv),
        )
    return report


def _direction(
    receiver: Policy,
    problems: list[Problem],
    *,
    src: StepRecords,
    k_recv: torch.Tensor,
    candidates: torch.Tensor,
    chosen: torch.Tensor,
    method: Method,
    scoring: ScoringSettings,
    generator: torch.Generator,
) -> dict:
    """One direction's figures: the receiver's all-fail prompts, what the source has for them, and how the gate
    treats the responses that balancing would transfer."""
    k_src = success_counts(src.rewards)
    all_fail = k_recv == 0
    flat = [(g, i) for g in chosen.nonzero().flatten().tolist() for i in range(src.n)]
    gated = score_and_gate(
        method,
        receiver,
        [receiver.prompt_text(problems[g].problem) for g, _ in flat],
        [src.texts[g][i] for g, i in flat],
        [not src.truncated[g][i] for g, i in flat],
        torch.tensor([src.mean_logprob(g, i) for g, i in flat], dtype=torch.float32),
        scoring,
        generator,
    )
    s, w = torch.tensor(gated.s), torch.tensor([row.weight for row in gated.rows])
    correct = torch.tensor([bool(src.rewards[g, i] > 0) for g, i in flat], dtype=torch.bool)
    passed = w > 0
    n_fail = int(all_fail.sum())
    return {
        "all_fail": n_fail,
        "all_fail_frac": round(n_fail / len(problems), 4),
        "peer_mixed_given_all_fail": round(int(candidates.sum()) / n_fail, 4) if n_fail else None,
        "peer_solved_given_all_fail": round(int((all_fail & (k_src >= 1)).sum()) / n_fail, 4) if n_fail else None,
        "candidates": int(candidates.sum()),
        "selected_after_balancing": int(chosen.sum()),
        "would_transfer": len(flat),
        "admitted": int(passed.sum()),
        "truncated": gated.cut,
        "gate_pass_rate": round(float(passed.float().mean()), 4) if flat else None,
        "gate_pass_rate_correct": round(float(passed[correct].float().mean()), 4) if correct.any() else None,
        "gate_pass_rate_incorrect": round(float(passed[~correct].float().mean()), 4) if (~correct).any() else None,
        "s_quantiles": _quantiles(s),
        "s_quantiles_correct": _quantiles(s[correct]),
        "s_quantiles_incorrect": _quantiles(s[~correct]),
        "weight_quantiles_admitted": _quantiles(w[passed]),
        "weight_hist": [int(v) for v in torch.histc(w[passed], bins=10, min=0, max=1).tolist()]
        if passed.any()
        else [0] * 10,
    }


def complementarity(
    config: RunConfig, names: list[str], files: list[Path], *, prompts: int | None, n: int, seed: int, delta: float
) -> dict:
    """``graft complementarity``: the analysis for two of the config's models on the first ``prompts`` problems
    of each file (all when None), sampled with the config's training settings."""
    from graft.data.problems import load_problems
    from graft.engine.policy import check_model_dir, load_policy

    if len(names) != 2 or len(set(names)) != 2:
        raise ConfigError(f"--models: expected two different models A,B, got {','.join(names)!r}")
    for name in names:
        if name not in config.models:
            raise ConfigError(f"--models: unknown model {name!r}; models: {', '.join(config.models)}")
        check_model_dir(config.models[name].path, f"models.{name}.path", config, name)
    problems, sets = [], []
    for file in files:
        loaded = load_problems(file, "--data", config.reward.kind)[: prompts or None]
        problems += loaded
        sets += [file.stem] * len(loaded)
    policies = [load_policy(name, config.models[name]) for name in names]
    t = config.train
    with Grader(config.reward.kind, config.reward.timeout, config.reward.workers) as grader:
        report = analyse(
            policies,
            problems,
            grader,
            n,
            seed,
            t.max_response_tokens,
            t.temperature,
            t.top_p,
            delta,
            sets,
            ScoringSettings.from_train(t),
        )
    report["data"] = [str(f) for f in files]
    return report
