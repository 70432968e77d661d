"""The toy world: task generator, splits, tokenizers, a tiny build end to end, and the complementarity report."""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from graft.cli import main
from graft.config import load_config
from graft.engine.policy import load_policy
from graft.engine.reward import toy_reward
from graft.toy import task
from graft.toy.models import build_tokenizer
from graft.toy.task import DEFAULT_FAMILIES, FAMILIES, make_problem, make_splits


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("level", [1, 2])
def test_every_worked_solution_is_graded_correct(family, level):
    for ops in itertools.islice(task._space(family, level), 0, None, 97):
        p = make_problem(family, level, ops)
        assert toy_reward(p.solution, p.answer) == 1.0, p
        assert p.solution.endswith(f"\\boxed{{{p.answer}}}")


@given(st.integers(10, 99), st.integers(10, 99))
def test_column_addition_steps_are_right(a, b):
    text = task.solve_add(a, b)
    for step in text.split(": ", 1)[1].split(", so")[0].split(", "):
        lhs, rhs = step.split(" = ")
        assert sum(int(x) for x in lhs.split("+")) == int(rhs)


@pytest.mark.parametrize("level", [1, 2])
def test_three_term_families_carry_and_borrow_at_most_one(level):
    """add3 and sub3 keep the one-token "+1" / "-1" step of add and sub: no column carries or borrows 2."""
    for ops in itertools.islice(task._space("add3", level), 0, None, 211):
        steps = make_problem("add3", level, ops).solution.split(": ", 1)[1].split(", so")[0].split(", ")
        assert all(int(step.split(" = ")[1]) < 20 for step in steps[:-1]), ops
    for ops in itertools.islice(task._space("sub3", level), 0, None, 211):
        steps = make_problem("sub3", level, ops).solution.split(": ", 1)[1].split(", so")[0].split(", ")
        assert not any(step[0] == "2" and step[1] != "-" for step in steps), ops


def test_hand_worked_solutions():
    assert task.solve_add(47, 38) == "47+38: 7+8 = 15, 4+3+1 = 8, so \\boxed{85}"
    assert task.solve_sub(83, 47) == "83-47: 13-7 = 6, 8-1-4 = 3, so \\boxed{36}"
    assert task.solve_mul(6, 85) == "6*85: 6*5 = 30, 6*8 = 48, 48+3 = 51, so \\boxed{510}"
    assert task.solve_div(511, 7) == "511/7: 51/7 = 7 r 2, 21/7 = 3 r 0, so \\boxed{73}"
    assert task.solve_add(47, 38, 29) == "47+38+29: 7+8+9 = 24, 4+3+2+2 = 11, so \\boxed{114}"
    assert task.solve_sub(95, 37, 28) == "95-37-28: 15-7-8 = 0, 9-1-3-2 = 3, so \\boxed{30}"
    assert task.solve_sub(402, 39, 38) == "402-39-38: 22-9-8 = 5, 10-2-3-3 = 2, 4-1-0-0 = 3, so \\boxed{325}"
    assert task._largest_carry(402, (39, 38), sign=-1) == 2 and task._largest_carry(47, (38, 29), sign=1) == 2
    assert task._largest_carry(95, (37, 28), sign=-1) == 1 and task._largest_carry(523, (37, 28), sign=1) == 1


def test_splits_are_disjoint_deterministic_and_per_family():
    a, b = make_splits(3, 20, 5, level2_share=0.25), make_splits(3, 20, 5, level2_share=0.25)
    assert [p.id for p in a.train] == [p.id for p in b.train]
    test_ids = {p.id for ps in a.test.values() for p in ps}
    val_ids = {p.id for p in a.validation}
    train_ids = {p.id for p in a.train}
    assert not (test_ids & val_ids) and not (test_ids & train_ids) and not (val_ids & train_ids)
    assert set(a.test) == set(DEFAULT_FAMILIES) and all(len(v) == 20 for v in a.test.values())
    assert all(sum(p.level == 2 for p in ps) == 5 for ps in a.test.values())
    assert [p.id for p in make_splits(4, 20, 5).train] != [p.id for p in a.train]
    three = make_splits(3, 20, 5, level2_share=0.25, families=("add3", "sub3"))
    assert set(three.test) == {"add3", "sub3"} and {p.family for p in three.train} == {"add3", "sub3"}


def test_min_slip_points_keeps_only_problems_a_blind_model_rarely_solves_by_chance():
    splits = make_splits(3, 20, 5, level2_share=1.0, families=("add", "sub3", "mul"), min_slip_points=2)
    problems = splits.train + splits.validation + [p for ps in splits.test.values() for p in ps]
    assert {p.level for p in problems} == {2}
    for p in problems[::50]:
        assert task.slip_points(p.family, p.operands) >= 2, p.id
    # two-digit problems (level 1) carry or borrow at most once, so they cannot meet a minimum of 2
    with pytest.raises(ValueError, match=r"level-1 problems left with enough slip points.*toy.level2_share"):
        make_splits(3, 20, 5, level2_share=0.5, families=("add",), min_slip_points=2)


def test_tokenizers_differ_but_have_comparable_granularity():
    texts = [
        make_problem(f, 1, ops).solution
        for f in DEFAULT_FAMILIES
        for ops in itertools.islice(task._space(f, 1), 0, 400, 7)
    ]
    ratios = {}
    for pre, vocab in (("gpt2_regex", 400), ("digit_runs", 320), ("space_words", 300)):
        tok = build_tokenizer(texts, pre, vocab)
        ratios[pre] = sum(len(tok(t)["input_ids"]) for t in texts) / sum(len(t) for t in texts)
        assert tok.decode(tok(texts[0])["input_ids"]) == texts[0]
    assert max(ratios.values()) / min(ratios.values()) < 1.6, ratios


TINY = {
    "smol": {"arch": "smollm3", "pre_tokenizer": "gpt2_regex"},
    "qwen": {"arch": "qwen3", "pre_tokenizer": "digit_runs"},
    "octo": {"arch": "gpt2", "pre_tokenizer": "space_words"},
}


@pytest.fixture(scope="module")
def tiny_toy(tmp_path_factory):
    root = tmp_path_factory.mktemp("toy")
    config = yaml.safe_load(Path("config/config.yaml").read_text())
    config["results"] = str(root / "results")
    config["toy"]["test_per_family"], config["toy"]["validation_per_family"] = 4, 2
    config["toy"]["train_per_family"] = 10
    for name, spec in TINY.items():
        config["toy"]["models"][name] = {
            **spec,
            "vocab_size": 280,
            "hidden": 32,
            "layers": 2,
            "heads": 2,
            "mix": {"add": 1.0, "mul": 1.0},
            "steps": 3,
            "examples": 64,
            "batch_size": 8,
        }
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["toy", "build", "--config", str(path), "--summary", str(root / "build.json")]) == 0
    return path


def test_toy_build_writes_data_and_loadable_models(tiny_toy):
    config = load_config(tiny_toy)
    root = tiny_toy.parent / "results" / "toy"
    families = config.toy.families
    assert sorted(p.name for p in (root / "data" / "test").iterdir()) == sorted(f"{f}.jsonl" for f in families)
    assert len((root / "data" / "train.jsonl").read_text().splitlines()) == 10 * len(families)
    summary = json.loads((tiny_toy.parent / "build.json").read_text())
    archs = set()
    for name in TINY:
        pol = load_policy(name, config.models[name])
        archs.add(type(pol.model).__name__)
        assert summary[name]["parameters"] == sum(p.numel() for p in pol.model.parameters())
    assert len(archs) == 3


def test_toy_model_build_is_deterministic(tiny_toy, tmp_path):
    out = tmp_path / "again"
    assert main(["toy", "build", "--config", str(tiny_toy), "--out", str(out)]) == 0
    first = tiny_toy.parent / "results" / "toy" / "models"
    for name in TINY:
        a = hashlib.sha256((first / name / "model.safetensors").read_bytes()).hexdigest()
        b = hashlib.sha256((out / "models" / name / "model.safetensors").read_bytes()).hexdigest()
        assert a == b, name


def test_a_world_with_mismatch_chat_prompts_and_a_llama_model_builds(tiny_toy, tmp_path):
    """The rehearsal's and the mismatch sweep's toy settings: models in dialects of their own (toy.mismatch 1),
    warmed up through a chat template, one of them a Llama decoder: the build completes, each model's warm-up
    solutions are in its dialect (up to the exposure to the other), and the chat model's saved prompt format is the
    one its warm-up used."""
    from graft.toy.build import warmup_examples
    from graft.toy.data import read_problems

    config = yaml.safe_load(tiny_toy.read_text())
    config["results"] = str(tmp_path)
    config["toy"]["mismatch"] = 1.0
    for name, dialect in (("smol", 1), ("qwen", 2)):
        config["toy"]["models"][name]["dialect"] = dialect
    config["toy"]["models"]["octo"]["arch"] = "llama"
    config["models"]["qwen"].update(chat=True, chat_template="config/chat_templates/chatml_user.jinja")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["toy", "build", "--config", str(path)]) == 0
    cfg = load_config(path)
    warmup = read_problems(tmp_path / "toy" / "data" / "warmup.jsonl")
    smol = [s for _, s in warmup_examples("smol", warmup, cfg.toy)]
    qwen = [s for _, s in warmup_examples("qwen", warmup, cfg.toy)]
    # at mismatch 1 no feature is common: each is the model's own dialect's, or (exposure) the other's
    for own, other, solutions in ((" by columns: ", "We work out ", smol), ("We work out ", " by columns: ", qwen)):
        assert all(own in s or other in s for s in solutions)
        assert sum(own in s for s in solutions) > 0.8 * len(solutions)
    qwen_policy = load_policy("qwen", cfg.models["qwen"])
    assert qwen_policy.prompt_text("1+2").startswith("<|im_start|>user\n1+2")
    assert type(load_policy("octo", cfg.models["octo"]).model).__name__ == "LlamaForCausalLM"


def test_complementarity_report(forced_world, tmp_path):
    out = tmp_path / "comp.json"
    code = main(
        [
            "complementarity",
            "--config",
            str(forced_world["config"]),
            "--models",
            "A,B",
            "--data",
            str(forced_world["data"]),
            "--out",
            str(out),
        ]
    )
    assert code == 0
    report = json.loads(out.read_text())
    for direction in ("A->B", "B->A"):
        d = report["directions"][direction]
        for key in ("all_fail", "peer_mixed_given_all_fail", "selected_after_balancing", "gate_pass_rate"):
            assert key in d
        assert 0 <= d["selected_after_balancing"] <= d["candidates"]
        # the score distribution split by the peer response's correctness brackets the whole one's median
        split = [d[f"s_quantiles_{k}"] for k in ("correct", "incorrect") if d[f"s_quantiles_{k}"]]
        if d["s_quantiles"]:
            assert split and min(q["p50"] for q in split) <= d["s_quantiles"]["p50"] <= max(q["p50"] for q in split)
    # the forced set: B fails P1 where A is mixed, A fails P2 where B is mixed
    assert report["directions"]["A->B"]["candidates"] >= 1 and report["directions"]["B->A"]["candidates"] >= 1


def test_complementarity_refuses_an_unbuilt_model_before_compute(tmp_path, capsys):
    config = yaml.safe_load(Path("config/config.yaml").read_text())
    config["results"] = str(tmp_path / "nothing")
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["complementarity", "--config", str(path), "--models", "smol,qwen"]) == 2
    err = capsys.readouterr().err
    assert "models.smol.path" in err and "toy/models/smol': no such directory" in err and err.count("\n") == 1
