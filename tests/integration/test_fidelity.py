"""Fidelity to the paper and the official baselines on the forced world: one behaviour policy for own
and peer tokens, HACPO's official minibatches, and what a fully gated prompt leaves."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from helpers.forced import FORCED, TEMPLATE
from helpers.step_records import receive_from

from graft.algo import success_counts
from graft.config import ModelSpec, load_config
from graft.data.records import read_step
from graft.engine import transfer
from graft.engine.policy import load_policy, response_logprobs
from graft.engine.scoring import ScoringSettings
from graft.methods import get_method
from graft.seeding import generator
from graft.train import trainer
from graft.train.request import TrainRequest
from graft.train.rules import select_prompts
from graft.train.trainer import Trainer

SHIFT = 0.3
"""How far the test double's generation log-probs are from the training forward's."""


class ShiftedRollout:
    """A rollout engine whose log-probs differ from the training forward (as vLLM's bf16 kernels do)."""

    per_prompt_seeds = False

    def __init__(self, inner):
        self.inner = inner

    def generate(self, prompts, n, seed, positions=None):
        groups = self.inner.generate(prompts, n, seed, positions)
        return [[dataclasses.replace(s, logprobs=[lp + SHIFT for lp in s.logprobs]) for s in g] for g in groups]

    def sync_from(self, weights, world):
        self.inner.sync_from(weights, world)

    def close(self):
        self.inner.close()


def shifted_trainer(world, out, method, old_logprobs, **train_changes):
    config = load_config(world["config"])
    train = dataclasses.replace(config.train, old_logprobs=old_logprobs, **train_changes)
    req = TrainRequest(dataclasses.replace(config, train=train), get_method(method), ["A", "B"], 0, out, 3)
    t = Trainer(req)
    for learner in t.learners:
        learner.rollout = ShiftedRollout(learner.rollout)
    return t


def capture_minibatches(monkeypatch):
    """Record every minibatch's rows and their token ratios under the model as it is before that update."""
    seen = []
    real = trainer.minibatch_update

    def spy(method, policy, optimizer, rows, **kwargs):
        with torch.no_grad():
            logp, _ = response_logprobs(
                policy.model, [r.prompt_ids for r in rows], [r.response_ids for r in rows], policy.pad_token_id
            )
        ratios = [(logp[j, : len(r.old_logp)] - torch.tensor(r.old_logp)).exp() for j, r in enumerate(rows)]
        seen.append({"model": policy.name, "index": kwargs["update_index"], "rows": rows, "ratios": ratios})
        return real(method, policy, optimizer, rows, **kwargs)

    monkeypatch.setattr(trainer, "minibatch_update", spy)
    return seen


@pytest.mark.parametrize("old_logprobs", ["recompute", "rollout"])
def test_first_minibatch_ratios_are_one_for_own_and_peer_tokens_only_when_recomputed(
    forced_world, tmp_path, monkeypatch, old_logprobs
):
    seen = capture_minibatches(monkeypatch)
    t = shifted_trainer(forced_world, tmp_path / "run", "graft", old_logprobs, minibatches=1)
    for step in range(3):
        t.step(step)
    firsts = [mb for mb in seen if mb["index"] == 0]
    own = torch.cat([r for mb in firsts for r, row in zip(mb["ratios"], mb["rows"], strict=True) if not row.is_peer])
    peer = [r for mb in firsts for r, row in zip(mb["ratios"], mb["rows"], strict=True) if row.is_peer]
    assert peer, "no grafted response reached a first minibatch"
    peer = torch.cat(peer)
    assert (peer - 1).abs().max() < 1e-5  # peer tokens are always scored by the training forward
    if old_logprobs == "recompute":
        assert (own - 1).abs().max() < 1e-5
    else:  # the engine's log-probs: own ratios start away from 1
        assert torch.allclose(own, torch.full_like(own, torch.tensor(-SHIFT).exp().item()), atol=1e-4)


def test_auto_recomputes_only_when_the_sampler_is_not_the_training_model(forced_world, tmp_path):
    t = shifted_trainer(forced_world, tmp_path / "run", "graft", "auto")
    assert [learner.recompute_old_logprobs for learner in t.learners] == [False, False]  # one CPU process, HF
    t = shifted_trainer(forced_world, tmp_path / "run", "graft", "recompute")
    assert [learner.recompute_old_logprobs for learner in t.learners] == [True, True]


def test_hacpo_official_minibatches_source_logprobs_and_truncation(forced_world, tmp_path, monkeypatch):
    seen = capture_minibatches(monkeypatch)
    limit = 6
    # the paper's 4 updates: 4 prompts x (8 own + 8 peer) responses, own first, two own-only then two peer-only
    t = shifted_trainer(forced_world, tmp_path / "run", "hacpo", "recompute", max_response_tokens=limit, minibatches=4)
    rows = t.step(0)
    for model in "AB":
        mbs = [mb for mb in seen if mb["model"] == model]
        assert [mb["index"] for mb in mbs] == [0, 1, 2, 3]
        assert [{r.is_peer for r in mb["rows"]} for mb in mbs] == [{False}, {False}, {True}, {True}]
        assert all(len(mb["rows"]) == 16 for mb in mbs)
        assert next(r for r in rows if r["model"] == model)["peer_minibatch_positions"] == [2, 3]
        peer_rows = [r for mb in mbs for r in mb["rows"] if r.is_peer]
        assert max(len(r.response_ids) for r in peer_rows) <= limit  # cut to the receiver's limit
    # the source's mean log-prob comes from its training forward, not the (shifted) engine's
    stored = read_step(tmp_path / "run" / "trajectories" / "A", 0)
    b_peer = [r for mb in seen if mb["model"] == "B" for r in mb["rows"] if r.is_peer]
    gen_means = sorted(stored.mean_logprob(g, i) for g in range(len(stored.prompt_ids)) for i in range(stored.n))
    src_means = sorted(r.src_mean_ll for r in b_peer)
    assert src_means == pytest.approx([m - SHIFT for m in gen_means], abs=1e-4)


def test_hacpo_makes_the_runs_update_count_like_every_method(forced_world, tmp_path, monkeypatch):
    """HACPO's 64-prompt minibatches of a 128-prompt step are the paper's 4 updates, not a fixed 4: at the run's 2
    it makes one own-only and one peer-only update, as many as GRAFT (and GRPO, whose preset takes the same count)."""
    seen = capture_minibatches(monkeypatch)
    for method in ("hacpo", "graft"):
        seen.clear()
        t = shifted_trainer(forced_world, tmp_path / method, method, "recompute")
        assert t.cfg.train.minibatches == 2
        t.step(0)
        for model in "AB":
            mbs = [mb for mb in seen if mb["model"] == model]
            assert [mb["index"] for mb in mbs] == [0, 1], method
            if method == "hacpo":
                assert [{r.is_peer for r in mb["rows"]} for mb in mbs] == [{False}, {True}]
                assert [len(mb["rows"]) for mb in mbs] == [32, 32]


def test_a_fully_gated_prompt_leaves_no_group_and_the_update_count_stays(forced_world, tmp_path, monkeypatch):
    """Algorithm 1 lines 20-26: a selected prompt adds only its admitted peer responses; when the gate drops
    them all, the receiver's own all-fail group does not come back (it carries no signal, only loss tokens)."""
    out = tmp_path / "run"
    config = load_config(forced_world["config"])
    Trainer(TrainRequest(config, get_method("graft"), ["A", "B"], 0, out, 1)).run()
    rec = {m: read_step(out / "trajectories" / m, 0) for m in "AB"}
    k = {m: success_counts(rec[m].rewards) for m in "AB"}
    method = get_method("graft_unbalanced")  # selects every prompt B failed and A solved at least once
    selected, _ = select_prompts(method, k, {"A": 8, "B": 8}, [("A", "B"), ("B", "A")], generator(0, "select", 0))
    chosen = selected[("A", "B")]
    assert chosen.any(), "the forced case (B fails, A solves) did not occur at step 0"
    b = load_policy("B", ModelSpec(path=str(forced_world["B"]), template=TEMPLATE))
    texts = [b.prompt_text(FORCED[pid][0]) for pid in rec["B"].prompt_ids]

    def gate_drops_all(recv_mean, src_mean, delta, cap):
        return torch.zeros_like(recv_mean), torch.zeros_like(recv_mean)

    monkeypatch.setattr(transfer, "compatibility", gate_drops_all)
    groups, stats = receive_from(
        method,
        b,
        rec["B"],
        rec["A"],
        chosen,
        texts,
        torch.Generator(),
        ScoringSettings(),
    )
    assert stats.admitted == 0 and stats.transferred > 0
    assert {g.prompt_index for g in groups} == set((~chosen).nonzero().flatten().tolist())
    assert all(len(g.rows) == 8 and not g.grafted for g in groups)


def test_a_models_own_learning_rate_reaches_its_optimizer(forced_world, tmp_path):
    """models.<name>.lr overrides train.lr for that model only."""
    config = load_config(forced_world["config"])
    models = {**config.models, "B": dataclasses.replace(config.models["B"], lr=3e-4)}
    req = TrainRequest(dataclasses.replace(config, models=models), get_method("graft"), ["A", "B"], 0, tmp_path, 3)
    rates = {learner.name: learner.optimizer.param_groups[0]["lr"] for learner in Trainer(req).learners}
    assert rates == {"A": config.train.lr, "B": 3e-4}
