"""The training engine on tiny models: log-probs, cross-tokenizer scoring, a forced GRAFT co-training, archive
replay and kill-and-resume."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
import yaml
from helpers.forced import FORCED, TEMPLATE
from helpers.run_dirs import tree_digest, unfinish
from helpers.step_records import receive_from

from graft.algo import exchange_candidates, minibatch_order, success_counts
from graft.cli import main
from graft.config import ModelSpec, load_config
from graft.data.records import read_step
from graft.engine.policy import load_policy, response_logprobs
from graft.engine.reward import Grader
from graft.engine.rollout import HFRollout
from graft.engine.scoring import ScoringSettings, retokenize, retokenize_all, score_peer_responses
from graft.errors import ConfigError
from graft.methods import get_method
from graft.seeding import generator
from graft.train.request import TrainRequest
from graft.train.rules import select_prompts
from graft.train.trainer import Trainer

TIMING_KEYS = {"rollout_s", "reward_s", "scoring_s", "update_s", "step_time_s", "gpu_hours"}


def policies(world):
    return (
        load_policy("A", ModelSpec(path=str(world["A"]), template=TEMPLATE)),
        load_policy("B", ModelSpec(path=str(world["B"]), template=TEMPLATE)),
    )


def metrics(path):
    rows = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows]


# GRAFT's selection without balancing: what the replay preset applies to one direction
UNBALANCED = {"graft_complementary_unbalanced": {"base": "graft", "balanced": False}}


def run(world, out, method="graft", models="A,B", steps=3, archive=None, resume=False, seed=0, overwrite=False):
    config = load_config(world["config"])
    archives = (archive,) if archive else ()
    method = get_method(method, UNBALANCED)
    req = TrainRequest(config, method, models.split(","), seed, out, steps, archives, resume, overwrite=overwrite)
    return Trainer(req)


@pytest.mark.parametrize("which", ["A", "B"])
def test_generation_logprobs_match_a_fresh_forward_pass(forced_world, which):
    pol = dict(zip("AB", policies(forced_world), strict=True))[which]
    prompts = [pol.encode(pol.prompt_text(p)) for p in ("What is 2+3?", "What is 4+4?", "What is 1+1?")]
    rollout = HFRollout(pol, max_new_tokens=6, temperature=1.0)
    samples = rollout.generate(prompts, n=4, seed=3)
    flat_prompts = [p for p, group in zip(prompts, samples, strict=True) for _ in group]
    flat = [s for group in samples for s in group]
    with torch.no_grad():
        logp, mask = response_logprobs(pol.model, flat_prompts, [s.token_ids for s in flat], pol.pad_token_id)
    for row, s in enumerate(flat):
        assert len(s.token_ids) == len(s.logprobs) == int(mask[row].sum())
        torch.testing.assert_close(logp[row, : len(s.token_ids)], torch.tensor(s.logprobs), atol=1e-4, rtol=0)
        # EOS ends a response and nothing follows it; a response without EOS hit the limit
        assert (pol.eos_token_id in s.token_ids) != s.truncated
        if not s.truncated:
            assert s.token_ids.index(pol.eos_token_id) == len(s.token_ids) - 1
        else:
            assert len(s.token_ids) == 6
    assert any(s.truncated for s in flat)  # 6 tokens is too short for "so \boxed{5}" in characters


def test_retokenize_splits_at_the_string_boundary(forced_world):
    a, b = policies(forced_world)
    prompt, response = a.prompt_text("What is 2+3?"), "so \\boxed{5}"
    for pol in (a, b):
        p_ids, r_ids = retokenize(pol, prompt, response, generated_eos=True)
        assert pol.tokenizer.decode(p_ids) == prompt
        assert r_ids[-1] == pol.eos_token_id
        assert pol.tokenizer.decode(r_ids[:-1]) == response
    # the char-level model uses one token per character, the BPE model fewer
    assert len(retokenize(a, prompt, response, False)[1]) == len(response)
    assert len(retokenize(b, prompt, response, False)[1]) < len(response)


def test_cross_tokenizer_scoring_and_self_consistency(forced_world):
    a, b = policies(forced_world)
    prompts = [a.encode(a.prompt_text("What is 2+3?"))] * 1
    own = HFRollout(a, max_new_tokens=16).generate(prompts, n=8, seed=0)[0]
    texts = [a.prompt_text("What is 2+3?")] * 8
    # A re-scoring its own text, re-tokenized from the string, reproduces its generation log-probs: s = 1.
    # (Only where the string round-trips: a byte-level model can sample bytes that are not valid UTF-8.)
    _, r_ids, _, mean_self = score_peer_responses(
        a, texts, [s.text for s in own], [not s.truncated for s in own], ScoringSettings()
    )
    src = torch.tensor([sum(s.logprobs) / len(s.logprobs) for s in own])
    same = torch.tensor([r == s.token_ids for r, s in zip(r_ids, own, strict=True)])
    assert same.sum() >= 4
    torch.testing.assert_close(mean_self[same], src[same], atol=1e-4, rtol=0)
    # B (BPE) scoring A's (char-level) responses: its own tokenization, its own mean log-likelihood
    _, r_ids_b, logps_b, mean_b = score_peer_responses(
        b, texts, [s.text for s in own], [not s.truncated for s in own], ScoringSettings()
    )
    for r, lp, m, s, ok in zip(r_ids_b, logps_b, mean_b, own, same, strict=True):
        assert b.tokenizer.decode(r, skip_special_tokens=True) == s.text
        assert len(lp) == len(r) and m.item() == pytest.approx(sum(lp) / len(lp), abs=1e-5)
        if ok:
            assert len(r) < len(s.token_ids)  # BPE merges characters


def test_forced_graft_co_training(forced_world, tmp_path):
    out = tmp_path / "graft"
    run(forced_world, out).run(log=lambda _: None)
    rows = metrics(out)
    assert [(r["step"], r["model"]) for r in rows] == [(s, m) for s in range(3) for m in "AB"]
    n = 8
    forced_seen = 0
    for step in range(3):
        rec = {m: read_step(out / "trajectories" / m, step) for m in "AB"}
        k = {m: success_counts(rec[m].rewards) for m in "AB"}
        cand_ab = exchange_candidates(k["B"], k["A"], n)  # B receives from A
        cand_ba = exchange_candidates(k["A"], k["B"], n)
        by_model = {r["model"]: r for r in rows if r["step"] == step}
        assert by_model["B"]["candidates"] == int(cand_ab.sum())
        assert by_model["A"]["candidates"] == int(cand_ba.sum())
        m = min(int(cand_ab.sum()), int(cand_ba.sum()))
        assert by_model["B"]["selected"] >= m and by_model["A"]["selected"] >= m
        p1 = rec["A"].prompt_ids.index("P1")
        forced_seen += bool(cand_ab[p1]) and bool(cand_ba[rec["A"].prompt_ids.index("P2")])
    assert forced_seen >= 1, "the forced all-fail / mixed case never occurred"

    # Rebuild step 0's groups from the archive with B's initial (behaviour) policy and check the replacement.
    _, b = policies(forced_world)
    rec = {m: read_step(out / "trajectories" / m, 0) for m in "AB"}
    k = {m: success_counts(rec[m].rewards) for m in "AB"}
    method = get_method("graft")
    selected, _ = select_prompts(method, k, {"A": 8, "B": 8}, [("A", "B"), ("B", "A")], generator(0, "select", 0))
    texts = [b.prompt_text(FORCED[pid][0]) for pid in rec["B"].prompt_ids]
    groups, stats = receive_from(
        method,
        b,
        rec["B"],
        rec["A"],
        selected[("A", "B")],
        texts,
        torch.Generator(),
        ScoringSettings(),
    )
    by_prompt = {g.prompt_index: g for g in groups}
    for g in selected[("A", "B")].nonzero().flatten().tolist():
        if g not in by_prompt:
            continue  # every peer response was gated out
        group = by_prompt[g]
        assert group.grafted and all(r.is_peer for r in group.rows)  # B's failed group is gone
        for row in group.rows:
            assert 0.8 < row.weight <= 1.0
            assert row.advantage in rec["A"].advantages[g].tolist()  # the source's own advantage
    for g in (~selected[("A", "B")]).nonzero().flatten().tolist():
        assert not by_prompt[g].grafted and len(by_prompt[g].rows) == 8
        assert [r.advantage for r in by_prompt[g].rows] == pytest.approx(rec["B"].advantages[g].tolist())
    assert stats.transferred == 8 * int(selected[("A", "B")].sum())
    chunks = minibatch_order(torch.tensor([grp.grafted for grp in groups]), 2, "peer_last")
    positions = [i for i, c in enumerate(chunks) if any(groups[j].grafted for j in c.tolist())]
    step0_b = next(r for r in rows if r["step"] == 0 and r["model"] == "B")
    assert step0_b["peer_minibatch_positions"] == positions
    if positions:
        assert positions[-1] == len(chunks) - 1


def test_the_complementarity_preflight_admits_what_training_admits(forced_world, tmp_path):
    """Figure 1's pre-flight scores and gates one step's records with training's function: on the records a GRAFT
    step published, its transfers, cuts and admissions per direction are the step's."""
    from graft.data.problems import load_problems
    from graft.eval.complementarity import exchange_report

    config = yaml.safe_load(forced_world["config"].read_text())
    config["train"]["max_response_tokens"] = 12  # B's 12 BPE tokens are more of A's characters: cut
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "graft"
    run({**forced_world, "config": path}, out, steps=1).run(log=lambda _: None)
    rows = {r["model"]: r for r in metrics(out)}
    records = {m: read_step(out / "trajectories" / m, 0) for m in "AB"}
    by_id = {p.id: p for p in load_problems(forced_world["data"], "data")}
    problems = [by_id[i] for i in records["A"].prompt_ids]
    scoring = ScoringSettings.from_train(load_config(path).train)
    report = exchange_report(list(policies(forced_world)), problems, records, get_method("graft"), scoring, 0)
    for src, recv in (("A", "B"), ("B", "A")):
        mine, trained = report["directions"][f"{src}->{recv}"], rows[recv]
        assert mine["would_transfer"] == trained["transferred"] > 0
        assert mine["admitted"] == trained["admitted"] and mine["truncated"] == trained["peer_truncated"]
        assert mine["weight_hist"] == trained["weight_hist"]
    assert sum(rows[m]["admitted"] for m in "AB") > 0 and sum(rows[m]["peer_truncated"] for m in "AB") > 0


def test_each_prompt_is_templated_and_tokenized_once_per_model_and_step(forced_world, tmp_path, monkeypatch):
    """From the rollout to the loss a prompt's token ids travel with its trajectories: a GRAFT step whose old
    log-probs are recomputed templates and tokenizes each of its 4 prompts once per model (the re-tokenization of
    a sent response tokenizes prompt and response together, not the prompt alone)."""
    import dataclasses
    from collections import Counter

    from graft.engine.policy import Policy

    calls = Counter()
    encode, prompt_text = Policy.encode, Policy.prompt_text

    def counted(name, real):
        def call(self, text):
            calls[name, self.name] += 1
            return real(self, text)

        return call

    monkeypatch.setattr(Policy, "encode", counted("encode", encode))
    monkeypatch.setattr(Policy, "prompt_text", counted("prompt_text", prompt_text))
    config = load_config(forced_world["config"])
    config = dataclasses.replace(config, train=dataclasses.replace(config.train, old_logprobs="recompute"))
    trainer = Trainer(TrainRequest(config, get_method("graft"), ["A", "B"], 0, tmp_path / "run", 1))
    trainer.run(log=lambda _: None)
    assert sum(r["admitted"] + r["transferred"] for r in metrics(tmp_path / "run")) > 0
    assert calls == {(kind, m): 4 for kind in ("encode", "prompt_text") for m in "AB"}


@pytest.mark.parametrize("method_name", ["graft", "hacpo", "graft_no_gate"])
def test_every_method_cuts_a_retokenized_peer_response_to_the_receivers_limit(forced_world, tmp_path, method_name):
    out = tmp_path / "graft"
    run(forced_world, out, steps=1).run(log=lambda _: None)
    _, b = policies(forced_world)
    rec = {m: read_step(out / "trajectories" / m, 0) for m in "AB"}
    selected = torch.ones(len(rec["B"].prompt_ids), dtype=torch.bool)
    texts = [b.prompt_text(FORCED[pid][0]) for pid in rec["B"].prompt_ids]
    full = len(retokenize_all(b, [texts[0]], [rec["A"].texts[0][0]], [True])[1][0])
    limit = max(full - 2, 1)

    def build(max_tokens):
        return receive_from(
            get_method(method_name),
            b,
            rec["B"],
            rec["A"],
            selected,
            texts,
            torch.Generator().manual_seed(0),
            ScoringSettings(max_response_tokens=max_tokens),
        )

    groups, stats = build(limit)
    peer_rows = [r for g in groups for r in g.rows if r.is_peer]
    assert peer_rows and all(len(r.response_ids) <= limit for r in peer_rows)
    assert all(len(r.old_logp) == len(r.response_ids) for r in peer_rows if method_name != "hacpo")
    assert stats.truncated >= 1 and stats.metrics()["peer_truncated"] == stats.truncated
    _, whole = build(None)
    assert whole.truncated == 0


def test_dynamic_sampling_trains_on_informative_groups_and_counts_its_rollouts(forced_world, tmp_path):
    out = tmp_path / "ds"
    trainer = run(forced_world, out, method="grpo_n8_ds", models="A", steps=2)
    trainer.run(log=lambda _: None)
    rows = metrics(out)
    size, n, cap = trainer.cfg.train.prompts_per_step, 8, get_method("grpo_n8_ds").resample_rounds
    for row in rows:
        assert 0 <= row["ds_rounds"] <= cap and row["rollouts"] == n * size * (row["ds_rounds"] + 1)
        assert row["ds_groups"] <= size
        # it stops drawing as soon as the batch is full, and draws until the cap otherwise
        assert (row["ds_groups"] == size) or (row["ds_rounds"] == cap)
        rec = read_step(out / "trajectories" / "A", row["step"])
        k = success_counts(rec.rewards)
        if row["ds_groups"]:
            assert len(rec.prompt_ids) == row["ds_groups"] and bool(((k > 0) & (k < n)).all())
    plain = tmp_path / "plain"
    run(forced_world, plain, method="grpo_n8", models="A", steps=1).run(log=lambda _: None)
    first = metrics(plain)[0]
    assert first["rollouts"] == n * size and first["reward_mean"] == rows[0]["reward_mean"]  # round 0 = the batch


def test_archive_replay_reproduces_the_live_runs_receiver(forced_world, tmp_path):
    live = tmp_path / "live"
    run(forced_world, live, method="graft_complementary_unbalanced", steps=2).run(log=lambda _: None)
    replay = tmp_path / "replay"
    run(forced_world, replay, method="replay", models="B", steps=2, archive=live / "trajectories" / "A").run(
        log=lambda _: None
    )
    live_b = [r for r in metrics(live) if r["model"] == "B"]
    replay_b = metrics(replay)
    for r in replay_b:
        assert r.pop("archive_rewards_changed") == 0
    assert replay_b == live_b
    for step in range(2):
        assert (
            read_step(replay / "trajectories" / "B", step).texts == read_step(live / "trajectories" / "B", step).texts
        )


def test_kill_and_resume_ends_as_an_uninterrupted_run(forced_world, tmp_path, monkeypatch):
    whole = tmp_path / "whole"
    run(forced_world, whole, steps=4).run(log=lambda _: None)

    killed = tmp_path / "killed"
    trainer = run(forced_world, killed, steps=4)
    original = trainer.step

    def dies_at_step_3(step):
        if step == 3:
            raise KeyboardInterrupt  # killed after the step-2 metrics, past the checkpoint at 2
        return original(step)

    monkeypatch.setattr(trainer, "step", dies_at_step_3)
    with pytest.raises(KeyboardInterrupt):
        trainer.run(log=lambda _: None)
    assert len(metrics(killed)) == 6  # steps 0-2 logged; the last checkpoint is at 2
    run(forced_world, killed, steps=4, resume=True).run(log=lambda _: None)
    assert metrics(killed) == metrics(whole)
    # the newest two checkpoints keep the optimizer state a resume needs (train.resumable_checkpoints)
    assert (killed / "checkpoints" / "step_00004" / "A" / "optimizer.pt").is_file()
    assert (killed / "checkpoints" / "step_00002" / "A" / "optimizer.pt").is_file()
    for m in "AB":
        from safetensors.torch import load_file

        w1 = load_file(whole / "checkpoints" / "step_00004" / m / "model.safetensors")
        w2 = load_file(killed / "checkpoints" / "step_00004" / m / "model.safetensors")
        assert all(torch.equal(w1[key], w2[key]) for key in w1)


def test_resume_without_resume_state_starts_over(forced_world, tmp_path):
    out = tmp_path / "run"
    run(forced_world, out, steps=3).run(log=lambda _: None)
    before = metrics(out)
    shutil.rmtree(out / "checkpoints" / "step_00003")
    for m in "AB":  # step 2 keeps its model but loses its optimizer state
        (out / "checkpoints" / "step_00002" / m / "optimizer.pt").unlink()
    unfinish(out)
    run(forced_world, out, steps=3, resume=True).run(log=lambda _: None)
    assert metrics(out) == before  # redone from step 0, with no duplicated rows


def test_a_finished_run_drops_its_resume_state_and_only_overwrite_trains_it_again(forced_world, tmp_path, capsys):
    """train.keep_resume_state: false (the default; the forced world keeps it for the resume tests): once done.json
    is written no checkpoint holds optimizer state and every one keeps its model. Resuming the finished run does
    nothing, file for file; asked for more steps it is refused, as it cannot continue; ``--resume --overwrite`` (as
    Snakemake's rule passes) trains it again and ends where it ended."""
    config = yaml.safe_load(forced_world["config"].read_text())
    del config["train"]["keep_resume_state"]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    world = {**forced_world, "config": path}
    out = tmp_path / "run"
    run(world, out, steps=3).run(log=lambda _: None)
    before, files = metrics(out), tree_digest(out)
    ckpts = sorted((out / "checkpoints").iterdir())
    assert [c.name for c in ckpts] == ["step_00002", "step_00003"] and (out / "done.json").is_file()
    assert all(
        (c / m / "model.safetensors").is_file() and not (c / m / "optimizer.pt").exists() for c in ckpts for m in "AB"
    )
    finished = run(world, out, steps=3, resume=True)
    finished.run(log=lambda _: None)
    assert "finished at 3 steps; nothing to do" in capsys.readouterr().err
    assert tree_digest(out) == files and "learners" not in vars(finished)  # no model was loaded
    with pytest.raises(ConfigError, match="resume state was removed"):
        run(world, out, steps=4, resume=True).run(log=lambda _: None)
    assert tree_digest(out) == files
    rerun = run(world, out, steps=3, resume=True, overwrite=True)
    rerun.run(log=lambda _: None)
    assert rerun.start_step == 0 and metrics(out) == before


def test_grader_scores_pathological_answers_zero_and_returns():
    bad = [
        "\\boxed{9^{9^{9^{9^{9}}}}}",
        "\\boxed{" + "{" * 2000 + "1" + "}" * 2000 + "}",
        "\\boxed{(10^{10^{10}})!}",
        "\\boxed{\\frac{\\frac{\\frac{\\frac{1}{2}}{3}}{4}}{5}" * 50 + "}",
        "no boxed answer at all",
    ]
    # refused as too costly, cut at the deadline or graded wrong: 0 whichever, however loaded the machine
    with Grader("math", timeout=2, workers=2) as grader:
        grades = grader.grade(bad, ["3", "1", "5", "7", "2"])
    assert grades.rewards == [0.0] * 5 and grades.unparsed == 1
    # a good answer, with a deadline no loaded machine reaches
    with Grader("math", timeout=600, workers=2) as grader:
        assert grader.grade(["so \\boxed{\\frac{1}{2}}"], ["0.5"]).rewards == [1.0]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--method", "graft", "--models", "A"],
            "--models: method with a live peer needs two or more models A,B,..., got 1",
        ),
        (["--method", "grpo_n8", "--models", "A,Z"], "--models: unknown model 'Z'; models: A, B"),
        (["--method", "replay", "--models", "B"], "--peer-archive: required by a method that replays"),
        (["--method", "graft_x", "--models", "A,B"], "unknown method preset 'graft_x'"),
        (["--method", "graft", "--models", "A,B", "--steps", "0"], "--steps: 0 is not allowed"),
    ],
)
def test_train_refuses_bad_arguments_before_compute(forced_world, tmp_path, capsys, argv, message):
    out = tmp_path / "never"
    code = main(["train", "--config", str(forced_world["config"]), "--seed", "0", "--out", str(out), *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1
    assert not out.exists()


def test_training_evaluates_every_checkpoint_and_fills_gaps_on_resume(forced_world, tmp_path):
    config = yaml.safe_load(forced_world["config"].read_text())
    config["eval"] = {"benchmarks": {"forced": str(forced_world["data"])}, "k": 2}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    cfg = load_config(path)
    evals = tmp_path / "evals"
    req = TrainRequest(cfg, get_method("graft"), ["A", "B"], 0, tmp_path / "run", 3, eval_dir=evals)
    Trainer(req).run()
    files = sorted(str(p.relative_to(evals)) for p in evals.rglob("*.json"))
    assert files == ["A/step_00002.json", "A/step_00003.json", "B/step_00002.json", "B/step_00003.json"]
    first = json.loads((evals / "B" / "step_00002.json").read_text())
    assert first["step"] == 2 and set(first["benchmarks"]) == {"forced"}
    assert len(first["benchmarks"]["forced"]["per_problem"]) == 4
    (evals / "B" / "step_00002.json").unlink()  # e.g. Snakemake cleared the directory of a killed job
    Trainer(
        TrainRequest(cfg, get_method("graft"), ["A", "B"], 0, tmp_path / "run", 3, resume=True, eval_dir=evals)
    ).run()
    assert json.loads((evals / "B" / "step_00002.json").read_text()) == first


def test_neighbouring_prompts_draw_different_streams_under_per_prompt_seeds(forced_world):
    """train.rollout_seeds: prompt seeds each prompt from its position: the same prompt at two neighbouring
    positions samples differently, and a position alone samples what it samples among others."""
    torch.set_num_threads(1)
    policy = load_policy("A", ModelSpec(path=str(forced_world["A"]), template=TEMPLATE))
    prompt = policy.encode(policy.prompt_text(next(iter(FORCED.values()))[0]))
    rollout = HFRollout(policy, max_new_tokens=12, per_prompt_seeds=True)
    first, second = rollout.generate([prompt, prompt], n=4, seed=3)
    assert [s.token_ids for s in first] != [s.token_ids for s in second]
    (alone,) = rollout.generate([prompt], n=4, seed=3, positions=[1])
    assert [s.token_ids for s in alone] == [s.token_ids for s in second]


def test_a_reevaluation_samples_the_benchmarks_only_and_as_the_full_evaluation_does(forced_world, tmp_path):
    """A selected checkpoint's re-evaluation skips the validation set, which only the selection reads: its result has
    none, it is kept under its own key, and the benchmarks' samples are those an evaluation with validation draws
    with the same seed (each benchmark samples from its own seed)."""
    from graft.eval.evaluate import Evaluator, evaluate_kept

    config = yaml.safe_load(forced_world["config"].read_text())
    config["eval"] = {"benchmarks": {"forced": str(forced_world["data"])}, "validation": str(forced_world["data"])}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    torch.set_num_threads(1)
    with Grader("toy", 5, 1) as grader, Evaluator(load_config(path), grader) as evaluate_one:
        full, _ = evaluate_kept(evaluate_one, "A", forced_world["A"], tmp_path / "full.json", tmp_path / "k1.json", 4)
        args = ("A", forced_world["A"], tmp_path / "again.json", tmp_path / "k2.json", 4)
        again, computed = evaluate_kept(evaluate_one, *args, validation=False)
    assert computed and "validation" in full and "validation" not in again
    assert again["benchmarks"] == full["benchmarks"] and again["average"] == full["average"]
    assert (tmp_path / "k1.key").read_text() != (tmp_path / "k2.key").read_text()
