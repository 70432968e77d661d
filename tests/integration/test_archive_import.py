"""Replay from other frameworks' runs: rollout dumps in verl's or a plain JSON Lines format become a
trajectory archive; replaying it equals replaying the original records."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

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


USER = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+3?"}]


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"step": 0, "prompt": "p"}, "lacks 'response'; jsonl needs step, prompt, and response or completion"),
        ({"step": "0", "prompt": "p", "completion": "c"}, "step '0' is not an integer"),
        ({"step": 0, "prompt": ["p"], "completion": "c"}, "the prompt is a list but not of messages"),
        ({"step": 0, "prompt": USER, "completion": USER}, "a list of 2 item.s.; expected one assistant message"),
    ],
)
def test_bad_json_lines_records_are_refused_with_one_line(tmp_path, record, message):
    (tmp_path / "rank0.jsonl").write_text(json.dumps(record) + "\n")
    with pytest.raises(ConfigError, match=message):
        read_dump(tmp_path, "jsonl")


def test_text_and_conversational_records_read_alike(tmp_path):
    rows = [
        {"step": 0, "prompt": "Be brief.\nWhat is 2+3?", "response": "so \\boxed{5}"},
        {"step": 0, "prompt": USER, "completion": [{"role": "assistant", "content": "so \\boxed{5}"}]},
    ]
    (tmp_path / "rank0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    first, second = read_dump(tmp_path, "jsonl")[0]
    assert first == second


@pytest.fixture(scope="module")
def grpo_run(forced_world, tmp_path_factory):
    """A toy GRPO run of model A, 3 steps with a checkpoint after each (the config file's other settings): the
    source every round trip exports."""
    config = load_config(forced_world["config"])
    config = dataclasses.replace(config, train=dataclasses.replace(config.train, checkpoint_every=1))
    source = tmp_path_factory.mktemp("grpo_A")
    Trainer(TrainRequest(config, get_method("grpo_n8"), ["A"], 0, source, 3)).run()
    return config, source, forced_world["config"]


def assert_same_records(original: Path, imported: Path, steps: int) -> None:
    """The imported archive holds the original records: prompts, rewards, and the tokens and log-probs of every
    response whose text kept its bytes (a byte-level model can sample bytes that are not UTF-8)."""
    exact = lossy = 0
    for step in range(steps):
        a, b = read_step(original, step), read_step(imported, step)
        assert b.prompt_ids == a.prompt_ids and torch.equal(b.rewards, a.rewards)
        for g in range(len(a.prompt_ids)):
            for i in range(a.n):
                if "\ufffd" in a.texts[g][i]:
                    lossy += 1
                    continue
                exact += 1
                assert b.token_ids[g][i] == a.token_ids[g][i]
                assert b.logprobs[g][i] == pytest.approx(a.logprobs[g][i], abs=1e-4)
    assert exact > lossy


def test_a_toy_grpo_run_exported_to_verl_and_imported_replays_as_the_original(grpo_run, tmp_path):
    config, source, _ = grpo_run
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
    assert_same_records(source / "trajectories" / "A", imported, 3)

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


def test_a_toy_grpo_run_saved_as_trls_completions_imports_as_the_original(grpo_run, tmp_path):
    """The run written as docs/own-models.md's TRL reward function writes it: one file per process (each a
    contiguous half of a step's rows), conversational prompts and completions, the step as TRL's global_step at
    the rollout, TRL's checkpoint-N directories. The records equal the original's, so replay does too (the verl
    round trip above replays an import)."""
    config, source, config_file = grpo_run
    problems = {k: v[0] for k, v in FORCED.items()}
    dump, checkpoints = tmp_path / "completions", tmp_path / "trl_output"
    dump.mkdir()
    checkpoints.mkdir()
    rows = []
    for step in range(3):
        rec = read_step(source / "trajectories" / "A", step)
        step_rows = [
            {
                "step": step,
                "prompt": [{"role": "user", "content": problems[pid]}],
                "completion": [{"role": "assistant", "content": rec.texts[g][i]}],
                "reward": float(rec.rewards[g, i]),
            }
            for g, pid in enumerate(rec.prompt_ids)
            for i in range(rec.n)
        ]
        half = len(step_rows) // 2
        rows.append((step_rows[:half], step_rows[half:]))
        if step:
            (checkpoints / f"checkpoint-{step}").symlink_to(source / "checkpoints" / f"step_{step:05d}" / "A")
    for rank in (0, 1):
        lines = [json.dumps(row) for halves in rows for row in halves[rank]]
        (dump / f"rank{rank}.jsonl").write_text("\n".join(lines) + "\n")
    imported = tmp_path / "imported"
    argv = ["archive", "import", "--format", "jsonl", "--in", str(dump), "--out", str(imported), "--model", "A"]
    assert main([*argv, "--config", str(config_file), "--source-model", str(checkpoints)]) == 0
    manifest = json.loads((imported / MANIFEST).read_text())
    assert [Path(manifest["steps"][str(t)]["weights"]).name for t in (0, 1, 2)] == [
        Path(config.models["A"].path).name,
        "checkpoint-1",
        "checkpoint-2",
    ]
    assert_same_records(source / "trajectories" / "A", imported, 3)
