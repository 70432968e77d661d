"""Replay from other frameworks' runs: rollout dumps in verl's or a plain JSON Lines format become a
trajectory archive; replaying it equals replaying the original records."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from helpers.forced import FORCED

from graft.cli import main
from graft.config import load_config
from graft.data.imports import MANIFEST, follows_prompts, import_archive, read_dump
from graft.data.records import read_step
from graft.engine.policy import load_policy
from graft.errors import ConfigError
from graft.methods import get_method
from graft.train.request import TrainRequest
from graft.train.trainer import Trainer

TIMING = {"rollout_s", "reward_s", "scoring_s", "update_s", "recompute_s", "step_time_s", "gpu_hours"}


def write_verl_dump(directory, steps):
    """``steps``: {verl step (1-based): [(input, output, score), ...]}, as verl's rollout_data_dir writes them."""
    directory.mkdir(parents=True, exist_ok=True)
    for step, rows in steps.items():
        lines = [json.dumps({"input": i, "output": o, "score": s, "gts": "", "step": step}) for i, o, s in rows]
        (directory / f"{step}.jsonl").write_text("\n".join(lines) + "\n")


def chat(problem: str) -> str:
    return f"system\nYou are helpful.\nuser\n{problem} Let's think step by step.\nassistant\n"


def test_a_verl_dump_becomes_records_with_reverified_rewards(forced_world, tmp_path):
    p1, p2 = FORCED["P1"][0], FORCED["P2"][0]
    dump = tmp_path / "dump"
    write_verl_dump(
        dump,
        {
            1: [  # the stored scores are wrong on purpose
                (chat(p1), "so \\boxed{5}", 0.0),
                (chat(p1), "so \\boxed{6}", 1.0),
                (chat(p2), "so \\boxed{8}", 1.0),
                (chat(p2), "so \\boxed{3}", 0.0),
            ],
            2: [(chat(p2), "so \\boxed{8}", 1.0), (chat(p2), "so \\boxed{8}", 1.0)],
        },
    )
    out = tmp_path / "archive"
    argv = ["archive", "import", "--format", "verl", "--in", str(dump), "--out", str(out)]
    assert main([*argv, "--config", str(forced_world["config"]), "--model", "A"]) == 0
    first, second = read_step(out, 0), read_step(out, 1)
    assert first.prompt_ids == ["P1", "P2"] and second.prompt_ids == ["P2"]
    assert first.rewards.tolist() == [[1.0, 0.0], [1.0, 0.0]]  # re-verified, not the dump's scores
    assert first.advantages[0, 0] > 0 > first.advantages[0, 1]
    policy = load_policy("A", load_config(forced_world["config"]).models["A"])
    ids = first.token_ids[0][0]
    assert ids[-1] == policy.eos_token_id and policy.tokenizer.decode(ids[:-1]) == "so \\boxed{5}"
    assert len(first.logprobs[0][0]) == len(ids) and all(lp <= 0 for lp in first.logprobs[0][0])
    assert follows_prompts(out) and json.loads((out / MANIFEST).read_text())["steps"]["1"]["source_step"] == 1


def test_too_few_matching_prompts_are_refused_with_the_counts(forced_world, tmp_path, capsys):
    dump = tmp_path / "dump"
    write_verl_dump(dump, {1: [(chat(FORCED["P1"][0]), "x", 0.0), ("What is the capital of France?", "y", 0.0)]})
    argv = ["archive", "import", "--format", "verl", "--in", str(dump), "--out", str(tmp_path / "a")]
    assert main([*argv, "--config", str(forced_world["config"]), "--model", "A"]) == 2
    err = capsys.readouterr().err
    assert "only 1 of 2 dumped prompts match" in err and err.count("\n") == 1
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("1.jsonl", '{"input": "x"}\n', "lacks 'output'"),
        ("1.jsonl", "not json\n", "line 1 is not valid JSON"),
        ("last.jsonl", '{"input": "x", "output": "y"}\n', "is not a verl rollout dump"),
    ],
)
def test_bad_dumps_are_refused_with_one_line(tmp_path, name, text, message):
    (tmp_path / name).write_text(text)
    with pytest.raises(ConfigError, match=message):
        read_dump(tmp_path, "verl")


def test_a_toy_grpo_run_exported_to_verl_and_imported_replays_as_the_original(forced_world, tmp_path):
    config = load_config(forced_world["config"])
    config = dataclasses.replace(config, train=dataclasses.replace(config.train, checkpoint_every=1))
    source = tmp_path / "grpo_A"
    Trainer(TrainRequest(config, get_method("grpo_n8"), ["A"], 0, source, 3)).run()
    policy = load_policy("A", config.models["A"])
    problems = {k: v[0] for k, v in FORCED.items()}
    dump = tmp_path / "verl_dump"
    steps = {}
    for step in range(3):
        rec = read_step(source / "trajectories" / "A", step)
        steps[step + 1] = [
            (policy.prompt_text(problems[pid]), rec.texts[g][i], float(rec.rewards[g, i]))
            for g, pid in enumerate(rec.prompt_ids)
            for i in range(rec.n)
        ]
    write_verl_dump(dump, steps)
    imported = tmp_path / "imported"
    manifest = import_archive(config, "A", "verl", dump, imported, source=source / "checkpoints")
    # step t was sampled by the weights after t updates: the initial model, then checkpoints 1 and 2
    assert [manifest["steps"][str(t)]["weights"].split("/")[-2:] for t in (1, 2)] == [
        ["step_00001", "A"],
        ["step_00002", "A"],
    ]
    assert manifest["steps"]["0"]["weights"] == config.models["A"].path
    exact = lossy = 0
    for step in range(3):
        original, back = read_step(source / "trajectories" / "A", step), read_step(imported, step)
        assert back.prompt_ids == original.prompt_ids and torch.equal(back.rewards, original.rewards)
        for g in range(len(original.prompt_ids)):
            for i in range(original.n):
                if "\ufffd" in original.texts[g][i]:  # sampled bytes that are not UTF-8: the text lost them
                    lossy += 1
                    continue
                exact += 1
                assert back.token_ids[g][i] == original.token_ids[g][i]
                assert back.logprobs[g][i] == pytest.approx(original.logprobs[g][i], abs=1e-4)
    assert exact > lossy

    def replay(archive, out):
        req = TrainRequest(config, get_method("replay"), ["B"], 0, out, 3, peer_archives=(archive,))
        Trainer(req).run()
        rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]

    a, b = replay(source / "trajectories" / "A", tmp_path / "r1"), replay(imported, tmp_path / "r2")
    assert sum(r["selected"] for r in a) > 0, "no prompt was selected: the comparison would be empty"
    for row_a, row_b in zip(a, b, strict=True):
        assert row_a.keys() == row_b.keys()
        for key, value in row_a.items():
            if isinstance(value, float):
                assert row_b[key] == pytest.approx(value, abs=1e-4, rel=1e-4), key
            else:
                assert row_b[key] == value, key
