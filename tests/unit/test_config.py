"""The run config: the shipped configs load, bad fields are refused with one line, the plan counts cells."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from helpers.own_pair import EXAMPLE, own_pair_config

from graft.cli import main
from graft.config import config_from_dict, load_config
from graft.errors import ConfigError
from graft.planning.plan import checkpoint_steps, describe, main_cells, training_cells
from graft.planning.site import rule_resources

CONFIGS = ("config/config.yaml", "config/smoke.yaml", "config/paper.yaml", "config/examples/own-pair.yaml")


@pytest.mark.parametrize("path", CONFIGS)
def test_shipped_configs_load_and_plan(path):
    cfg = load_config(path)
    cells = training_cells(cfg)
    assert cells and all(len(c.models) in (1, 2) for c in cells)
    assert checkpoint_steps(cfg)[-1] == cfg.train.steps
    assert "{results}" not in cfg.models[next(iter(cfg.models))].path


def test_paper_config_matches_the_papers_settings():
    cfg = load_config("config/paper.yaml")
    t = cfg.train
    assert (t.steps, t.prompts_per_step, t.minibatches, t.lr, t.weight_decay, t.grad_clip) == (
        174,
        128,
        4,
        1e-6,
        0.01,
        1.0,
    )
    assert (t.max_prompt_tokens, t.max_response_tokens, t.temperature, t.top_p) == (2048, 4096, 1.0, 1.0)
    assert (cfg.eval.k, cfg.eval.temperature, cfg.eval.top_p) == (8, 0.6, 0.95)
    assert cfg.pairs == {"P1": ["smollm3", "qwen3"], "P2": ["qwen3", "octothinker"], "P3": ["smollm3", "octothinker"]}
    # 3 models x (3 + 1 + 1 + 1) GRPO (n=8 x 3 seeds, n=16, n=32, n=8 + DS), 3 pairs x (3 GRAFT + HACPO + SGT + 2
    # replays), 17 ablations
    assert len(training_cells(cfg)) == 18 + 21 + 17


def test_baseline_models_and_pairs_limit_only_the_baselines():
    raw = yaml.safe_load(Path("config/smoke.yaml").read_text())
    raw["workflow"].update(grpo=["grpo_n8", "grpo_n32"], pair_methods=["graft", "hacpo"], replay=True, ablations=[])
    full = training_cells(config_from_dict(raw))
    raw["workflow"].update(baseline_models=[], baseline_pairs=[])
    main_only = training_cells(config_from_dict(raw))
    assert {c.method for c in main_only} == {"grpo_n8", "graft"}
    assert {c for c in full if c.method in ("grpo_n8", "graft")} == set(main_only)
    first_model, first_pair = next(iter(raw["models"])), next(iter(raw["pairs"]))
    raw["workflow"].update(baseline_models=[first_model], baseline_pairs=[first_pair])
    some = {(c.method, c.cell) for c in training_cells(config_from_dict(raw))} - {(c.method, c.cell) for c in main_only}
    a, b = raw["pairs"][first_pair]
    replays = {("replay", f"{a}_from_{b}"), ("replay", f"{b}_from_{a}")}
    assert some == {("grpo_n32", first_model), ("hacpo", first_pair), *replays}


def test_method_seeds_set_one_presets_seeds_and_leave_the_rest():
    raw = yaml.safe_load(Path("config/smoke.yaml").read_text())
    raw["workflow"].update(
        grpo=["grpo_n8", "grpo_n32"], pair_methods=["graft", "hacpo"], replay=True, main_seeds=[0, 1, 2]
    )
    raw["workflow"].update(other_seeds=[0, 1, 2], method_seeds={"grpo_n32": [0], "replay": [1]})
    seeds = {}
    for c in training_cells(config_from_dict(raw)):
        seeds.setdefault(c.method, set()).add(c.seed)
    assert seeds.pop("grpo_n32") == {0}
    assert seeds.pop("replay") == {1}
    assert all(s == {0, 1, 2} for s in seeds.values()), seeds
    raw["workflow"].update(method_seeds={"replay": [5]})
    with pytest.raises(ConfigError, match=r"replay cell .* seed 5 needs .*'s grpo_n8 run of seed 5"):
        training_cells(config_from_dict(raw))


def test_cell_seeds_set_every_method_of_a_cell_before_method_seeds():
    raw = yaml.safe_load(Path("config/config.yaml").read_text())  # three models, three pairs
    models, pairs = list(raw["models"]), list(raw["pairs"])
    first_pair, (a, b) = pairs[0], raw["pairs"][pairs[0]]
    other_model = next(m for m in models if m not in (a, b))
    raw["workflow"].update(
        grpo=["grpo_n8", "grpo_n32"], pair_methods=["graft", "hacpo"], replay=True, baseline_pairs=[first_pair]
    )
    raw["workflow"].update(
        main_seeds=[0, 1, 2],
        other_seeds=[0],
        method_seeds={"hacpo": [0, 1, 2]},
        cell_seeds={pairs[1]: [0], other_model: [0], a: [0, 2]},
    )
    seeds = {}
    for c in training_cells(config_from_dict(raw)):
        seeds.setdefault((c.method, c.cell), set()).add(c.seed)
    assert seeds[("hacpo", first_pair)] == seeds[("graft", first_pair)] == {0, 1, 2}  # method_seeds, main_seeds
    assert seeds[("graft", pairs[1])] == {0}  # the pair's entry wins over main_seeds
    assert seeds[("grpo_n8", other_model)] == {0} and seeds[("grpo_n8", b)] == {0, 1, 2}
    assert seeds[("grpo_n8", a)] == seeds[("grpo_n32", a)] == {0, 2}  # a model's entry covers its GRPO cells
    assert seeds[("replay", f"{a}_from_{b}")] == {0, 2}  # and its replay cells, as receiver
    assert seeds[("replay", f"{b}_from_{a}")] == {0}  # other_seeds, and a has seed 0 stored


def test_cell_seeds_name_models_or_pairs_and_replay_needs_the_peers_stored_seed():
    raw = yaml.safe_load(Path("config/smoke.yaml").read_text())
    first_pair = next(iter(raw["pairs"]))
    a, b = raw["pairs"][first_pair]
    raw["workflow"].update(cell_seeds={"P9": [0]})
    with pytest.raises(
        ConfigError, match=r"workflow\.cell_seeds: 'P9' is neither a model, a pair nor a group; allowed: "
    ):
        config_from_dict(raw)
    raw["workflow"].update(cell_seeds={a: [1, 1]})
    with pytest.raises(ConfigError, match=r"workflow.cell_seeds.\w+: \[1, 1\] is not allowed; expected distinct"):
        config_from_dict(raw)
    raw["workflow"].update(replay=True, baseline_pairs=[first_pair], main_seeds=[0], cell_seeds={b: [1]})
    with pytest.raises(ConfigError, match=f"replay cell {a}_from_{b} seed 0 needs {b}'s grpo_n8 run of seed 0"):
        training_cells(config_from_dict(raw))


def test_only_methods_plans_the_cells_of_the_methods_it_names_and_refuses_another():
    raw = yaml.safe_load(EXAMPLE.read_text())  # two models, one pair
    planned = training_cells(config_from_dict(raw))
    assert sorted((c.method, c.cell, c.seed) for c in planned) == sorted(
        [("grpo_n8", m, s) for m in raw["models"] for s in (0, 1, 2)] + [("graft", "P", s) for s in (0, 1, 2)]
    )
    del raw["workflow"]["only_methods"]
    every = training_cells(config_from_dict(raw))
    # grpo_n8 x 3 seeds, n=16, n=32, n=8 with dynamic sampling per model; graft x 3, hacpo, sgt, 2 replays; 17 ablations
    assert len(every) == 2 * 6 + 7 + 17 and set(planned) < set(every)
    raw["workflow"]["only_methods"] = ["grpo_n8", "grpo_n4"]
    with pytest.raises(
        ConfigError, match=r"^workflow\.only_methods: 'grpo_n4' is no method this config schedules; allowed: \w+"
    ):
        training_cells(config_from_dict(raw))
    raw["workflow"]["only_methods"] = ["replay"]  # without the peers' stored grpo_n8 runs
    with pytest.raises(ConfigError, match=r"replay cell \w+ seed 0 needs \w+'s grpo_n8 run of seed 0"):
        training_cells(config_from_dict(raw))


def test_the_own_pair_example_plans_with_its_models_downloaded(tmp_path, capsys):
    """config/examples/own-pair.yaml with tiny model directories in place of the downloads: graft plan reads their
    config.json and tokenizers and prints the 9 cells."""
    config = own_pair_config(tmp_path)
    capsys.readouterr()
    assert main(["plan", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "9 training cells" in out
    assert re.search(r"^grpo_n8 +6$", out, re.M) and re.search(r"^graft +3$", out, re.M)
    assert "prompt of smollm2: \"{problem} Let's think step by step" in out


def test_main_cells_pick_every_seed_of_the_cells_they_name_and_refuse_an_unknown_one():
    raw = yaml.safe_load(Path("config/config.yaml").read_text())
    every = training_cells(config_from_dict(raw))
    picked = main_cells(config_from_dict(raw), every)
    assert {(c.method, c.cell) for c in picked} == {("grpo_n8", "smol"), ("grpo_n8", "qwen"), ("graft", "P1")}
    assert sorted(c.seed for c in picked if c.cell == "P1") == [0, 1, 2]
    assert picked == [c for c in every if c in picked]  # in the order of every cell
    assert "rule all runs 9 of them (workflow.main_cells: " in describe(config_from_dict(raw), "config.yaml")
    raw["workflow"]["main_cells"] = []
    assert main_cells(config_from_dict(raw), every) == every
    raw["workflow"]["main_cells"] = ["graft/P1", "graft/P4"]
    with pytest.raises(
        ConfigError, match=r"workflow\.main_cells: 'graft/P4' is no training cell of this config; cells: "
    ):
        main_cells(config_from_dict(raw), every)


def test_paper_scale_matches_the_slurm_resources():
    """One process per GPU: the training job's GPUs per node are the processes torchrun starts on it."""
    cfg = load_config("config/paper.yaml")
    train = rule_resources(cfg, "train")
    assert train["gres"] == f"gpu:h200:{cfg.scale.processes}" and train["tasks_per_gpu"] == 0
    assert cfg.scale.rollout == "vllm" and cfg.scale.gradient_checkpointing
    assert cfg.train.micro_batch_tokens >= cfg.train.max_prompt_tokens + cfg.train.max_response_tokens


def test_rehearsal_is_the_paper_config_in_shape():
    """config/rehearsal.yaml runs paper.yaml's DAG on the scale path: the same cells per method, evaluation jobs,
    vLLM rollouts under torchrun, chat prompts with the paper's suffix and its evaluation protocol."""
    from graft.planning.plan import training_cells

    paper, rehearsal = load_config("config/paper.yaml"), load_config("config/rehearsal.yaml")
    shape = lambda cfg: sorted((c.method, c.cell, c.seed) for c in training_cells(cfg))  # noqa: E731
    assert list(rehearsal.models) == list(paper.models) and rehearsal.pairs == paper.pairs
    assert shape(rehearsal) == shape(paper)
    assert not rehearsal.workflow.eval_in_train and rehearsal.scale.rollout == "vllm"
    assert rehearsal.scale.processes == 2 and rehearsal.scale.gradient_checkpointing
    for model in rehearsal.models.values():
        assert model.chat and model.template == paper.models["qwen3"].template
    for field in ("k", "temperature", "top_p", "selection_runs"):
        assert getattr(rehearsal.eval, field) == getattr(paper.eval, field), field
    assert rehearsal.report.selection == paper.report.selection


def base() -> dict:
    return yaml.safe_load(Path("config/smoke.yaml").read_text())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c["train"].update(steps=0), "train.steps: 0 is not allowed; expected an integer >= 1"),
        (lambda c: c["train"].update(top_p=1.5), "train.top_p: 1.5 is not allowed"),
        (lambda c: c["train"].update(lr="fast"), "config.train.lr: 'fast' is not allowed; expected a number > 0"),
        (
            lambda c: c["train"].update(stpes=3),
            "config.train: unknown field 'stpes' (did you mean 'steps'?); allowed fields: steps",
        ),
        (lambda c: c["pairs"].update(P2=["smol", "zeta"]), "pairs.P2: unknown model 'zeta'"),
        (
            lambda c: c["models"]["smol"].update(lr=-1.0),
            "models.smol.lr: -1.0 is not allowed; expected a number > 0, or null",
        ),
        (lambda c: c["models"]["smol"].update(template="x"), "models.smol.template: 'x' has no '{problem}' slot"),
        (
            lambda c: c["models"]["smol"].update(
                sizes={
                    "layers": 0,
                    "hidden": 8,
                    "intermediate": 8,
                    "heads": 1,
                    "kv_heads": 1,
                    "head_dim": 8,
                    "vocab": 9,
                }
            ),
            "models.smol.sizes.layers: 0 is not allowed; expected an integer >= 1",
        ),
        (
            lambda c: c["train"].update(logits_chunk_mib=0),
            "train.logits_chunk_mib: 0 is not allowed; expected a number > 0",
        ),
        (lambda c: c["reward"].update(kind="exact"), "config.reward.kind: 'exact' is not allowed; expected one of"),
        (lambda c: c["toy"]["models"]["smol"]["mix"].update(pow=1.0), "toy.models.smol.mix: unknown family 'pow'"),
        (lambda c: c["workflow"].update(grpo=["grpo_n64"]), "workflow.grpo: unknown preset 'grpo_n64'"),
        (lambda c: c["workflow"].update(baseline_pairs=["P9"]), "workflow.baseline_pairs: unknown pair 'P9'"),
        (lambda c: c["workflow"].update(baseline_models=["gpt5"]), "workflow.baseline_models: unknown model 'gpt5'"),
        (
            lambda c: c["train"].update(steps=2**63 - 1, checkpoint_every=1),
            f"train.steps: {2**63 - 1} steps with checkpoint_every 1 make {2**63 - 1} checkpoints",
        ),
        (
            lambda c: c.setdefault("report", {}).update(paper_models={"gpt5": "qwen3"}),
            "report.paper_models: unknown model 'gpt5'",
        ),
        (
            lambda c: c["workflow"].update(method_seeds={"grpo_n64": [0]}),
            "workflow.method_seeds: 'grpo_n64' is not scheduled; allowed: ",
        ),
        (
            lambda c: c["workflow"].update(method_seeds={"graft": [1, 1]}),
            "workflow.method_seeds.graft: [1, 1] is not allowed; expected distinct seeds",
        ),
        (
            lambda c: c["workflow"].update(main_seeds=[]),
            "config.workflow.main_seeds: empty; expected at least one entry",
        ),
        (
            lambda c: c["workflow"].update(other_seeds=[0, -1]),
            "config.workflow.other_seeds[1]: -1 is not allowed; expected an integer in [0, 9223372036854775807]",
        ),
        (
            lambda c: c["toy"].update(families=["add", "pow"]),
            "config.toy.families[1]: 'pow' is not allowed; expected one of",
        ),
        (lambda c: c["toy"].update(families=["add", "add"]), "toy.families: families must be distinct"),
        (
            lambda c: c["toy"].update(level2_share=1.5),
            "toy.level2_share: 1.5 is not allowed; expected a number in [0, 1]",
        ),
        (
            lambda c: c["toy"].update(min_slip_points=0),
            "toy.min_slip_points: 0 is not allowed; expected an integer >= 1",
        ),
        (lambda c: c["toy"].update(mismatch=1.5), "toy.mismatch: 1.5 is not allowed; expected a number in [0, 1]"),
        (
            lambda c: c["toy"]["models"]["smol"].update(dialect=3),
            "toy.models.smol.dialect: 3 is not allowed; expected one of 0, 1, 2",
        ),
        (
            lambda c: c["toy"].update(slip_unit="point"),
            "toy: unknown field 'slip_unit'",
        ),
        (
            lambda c: c["toy"]["models"]["smol"].update(micro_batches=9),
            "toy.models.smol.micro_batches: 9 is not allowed; expected 1 to batch_size (8)",
        ),
        (
            lambda c: c["models"]["smol"].update(chat=True),
            "models.smol.chat_template: a toy tokenizer ships no chat template; set one",
        ),
        (lambda c: c.update(models=[]), "config.models: expected a mapping, got list"),
        (
            lambda c: c.update(scale={"vllm_cpu_kv_cache_mib": 0}),
            "scale.vllm_cpu_kv_cache_mib: 0 is not allowed; expected an integer >= 1",
        ),
    ],
)
def test_bad_fields_are_refused_with_one_line(change, message):
    config = base()
    change(config)
    with pytest.raises(ConfigError, match=re.escape(message)) as err:
        config_from_dict(config)
    assert "\n" not in str(err.value)


def test_bad_config_files(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: [unclosed\n")
    assert main(["plan", "--config", str(bad)]) == 2
    assert "is not valid YAML at line" in capsys.readouterr().err
    assert main(["plan", "--config", str(tmp_path / "missing.yaml")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_plan_command(capsys):
    assert main(["plan", "--config", "config/paper.yaml"]) == 0
    out = capsys.readouterr().out
    assert "56 training cells" in out and "GPU-hours: training " in out
    # the step time: Pair 1's GRAFT under both placements, priced with the GPU check's measured utilization
    assert "smollm3's architecture: scoring at 31%, the update at 41% of the peak, measured" in out
    pair = next(x.split() for x in out.splitlines() if x.startswith("  graft ") and "smollm3 + qwen3" in x)
    colocated, split = float(pair[4]), float(pair[5])
    assert 0 < colocated < split  # unequal models: split, the larger one's half of the GPUs sets the pace
    assert "then evaluated 5 more times" in out
    assert "evaluation memory: one vLLM engine per job at a time, eval.vllm_memory 0.85 of its GPU" in out
    suffix = "Let's think step by step and output the final answer within \\\\boxed{}."
    for model in ("smollm3", "qwen3", "octothinker"):
        line = next(x for x in out.splitlines() if x.startswith(f"prompt of {model}: "))
        assert "{problem} " + suffix in line, line
    # the memory plan: every model and pair, each phase, a peak within the 150.75 GB CUDA reports for an H200
    plan = out[out.index("placement and memory per GPU") :].splitlines()
    head = ["models", "placement", "nodes", "GPUs", "shards", "rollout", "scoring", "update", "weight", "sync", "peak"]
    assert plan[1].split() == head
    assert all(line.split()[-9:-5] == ["colocated", "1", "4", "4"] for line in plan[2:8])
    rows = {line.rsplit(None, 9)[0].strip(): [float(x) for x in line.split()[-5:]] for line in plan[2:8]}
    assert set(rows) == {
        "smollm3",
        "qwen3",
        "octothinker",
        "smollm3 + qwen3",
        "qwen3 + octothinker",
        "smollm3 + octothinker",
    }
    assert all(values[-1] == max(values[:-1]) <= 150.75 for values in rows.values())


def test_a_config_that_cannot_fit_is_refused_before_anything_runs(tmp_path, capsys):
    raw = yaml.safe_load(Path("config/paper.yaml").read_text())
    raw["train"]["micro_batch_tokens"] = 16 * 36864  # 96 full-length rows per forward pass
    path = tmp_path / "paper_big.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["plan", "--config", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert re.fullmatch(
        r".*memory: the update phase of \w+ needs [\d.]+ GB per GPU, more than scale.gpu_memory_gb = 150.75 GB; "
        r"lower train.micro_batch_tokens or train.logits_chunk_mib or raise scale.processes or scale.nodes",
        err,
    ), err
    with pytest.raises(ConfigError, match="memory: the update phase"):
        training_cells(load_config(path))  # what the Snakefile asks: refused before any job is submitted


def test_the_paper_models_a_config_may_name_are_those_the_report_has_numbers_for():
    import typing

    from graft.config import PaperModel
    from graft.report.paper import PAPER_MODELS

    assert set(typing.get_args(PaperModel)) == set(PAPER_MODELS)
