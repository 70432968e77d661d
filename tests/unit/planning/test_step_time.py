"""The step time's parts as pure functions (hand-worked), and its reading of the config and a GPU check."""

from __future__ import annotations

import dataclasses
import json

import pytest

from graft.config import ModelSizes, WorkflowSpec, load_config
from graft.errors import ConfigError
from graft.methods import get_method
from graft.planning import step_time as st

TINY = ModelSizes(layers=1, hidden=4, intermediate=8, heads=2, kv_heads=1, head_dim=2, vocab=10)
PAPER = "config/paper.yaml"


def test_a_rows_forward_flops_by_hand():
    """One layer, hidden 4, MLP 8, 2 query heads of 2 over 1 KV head: attention projections 4 x (4 + 2 + 2) + 4 x 4
    = 48 weights, the MLP 3 x 4 x 8 = 96, so 144; a row of 2 + 3 tokens: body 2 x 144 x 5 = 1,440, attention
    4 x 1 x 2 x 2 x 5 x 5 / 2 = 200, the head on the 3 response tokens 2 x 10 x 4 x 3 = 240."""
    assert st.matmul_weights(TINY) == 144
    assert st.row_forward_flops(TINY, 2, 3) == 1440 + 200 + 240


def test_rows_per_method_by_hand():
    """4 prompts, n = 8, a quarter of the prompts exchanged (one group)."""
    grpo = get_method("grpo_n8")
    assert st.step_rows(grpo, 4, 0.25, recompute=True) == st.StepRows(32, 32, 32)
    assert st.step_rows(grpo, 4, 0.25, recompute=False) == st.StepRows(32, 0, 32)
    # GRAFT: the peer's group of 8 replaces the receiver's and is scored for the gate
    assert st.step_rows(get_method("graft"), 4, 0.25, recompute=True) == st.StepRows(32, 40, 32)
    # SGT: one peer response beside the receiver's own group
    sgt = get_method("sgt")
    assert (sgt.keep_own, sgt.transfer) == (True, "one_success")
    assert st.step_rows(sgt, 4, 0.25, recompute=True).trained == 33
    # HACPO: every prompt's peer group beside the receiver's own, whatever the share
    hacpo = get_method("hacpo")
    rows = st.step_rows(hacpo, 4, 0.25, recompute=True)
    assert rows.trained == 64 and rows.generated == 32
    assert rows.scored == 32 + (32 if hacpo.gate == "compat" or hacpo.update == "clipped" else 0)


def test_a_models_step_and_the_two_placements():
    rows = st.StepRows(generated=10, scored=10, trained=20)
    flops = st.row_forward_flops(TINY, 2, 3)
    step = st.model_step(TINY, rows, 2, 3, gpus=2, rollout_tokens_per_s=5, flops_per_s=(flops, 2 * flops),
                         sync_bytes_per_s=2.0)  # fmt: skip
    assert step.generation == 10 * 3 / (2 * 5)
    assert step.scoring == 10 / 2
    assert step.update == 20 * st.UPDATE_FORWARDS / (2 * 2)
    assert step.sync == st.parameters(TINY) * 2 / 2.0
    other = dataclasses.replace(step, generation=step.generation + 7)
    assert st.step_seconds([step, other], "colocated") == step.total + other.total
    assert st.step_seconds([step, other], "split") == other.total


def test_measured_utilization_is_the_checks_flops_over_its_seconds():
    prompt, response = st.GPU_CHECK_ROW
    forward = st.row_forward_flops(st.GPU_CHECK_ARCHITECTURES["qwen3"], prompt, response)
    report = {
        "memory_qwen3_score_tokens": 4 * (prompt + response),
        "memory_qwen3_score_s": 2.0,
        "memory_qwen3_update_tokens": 2 * (prompt + response),
        "memory_qwen3_update_s": 4.0,
        "memory_smollm3_score_tokens": 1,  # incomplete: left out
    }
    measured = st.measured_utilization(report, peak_flops=forward)
    assert measured == {"qwen3": (4 / 2.0, 2 * st.UPDATE_FORWARDS / 4.0)}
    # a check run with other rows (--row) says so, and its rows are priced at their own length
    short = {**report, "memory_row": [100, 2048], "memory_qwen3_score_tokens": 4 * 2148}
    flops = st.row_forward_flops(st.GPU_CHECK_ARCHITECTURES["qwen3"], 100, 2048)
    assert st.measured_utilization(short, peak_flops=forward)["qwen3"][0] == 4 * flops / 2.0 / forward


def test_the_measured_architectures_are_the_gpu_checks_and_the_paper_configs():
    """The sizes the step time prices a GPU check's rows at are those of the models the check builds, and of the
    paper config's models of the same names."""
    import importlib.util
    from pathlib import Path

    from graft.planning.memory import sizes_from_config

    path = Path(__file__).resolve().parents[3] / "bench" / "checks" / "gpu_check.py"
    spec = importlib.util.spec_from_file_location("gpu_check", path)
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    built = check.settings(tiny=False).memory
    assert {name: sizes_from_config(c) for name, c in built.items()} == st.GPU_CHECK_ARCHITECTURES
    paper = load_config(PAPER)
    assert all(paper.models[name].sizes == sizes for name, sizes in st.GPU_CHECK_ARCHITECTURES.items())


def _paper(**workflow):
    cfg = load_config(PAPER)
    return dataclasses.replace(cfg, workflow=dataclasses.replace(cfg.workflow, **workflow))


def test_a_gpu_checks_figures_replace_the_assumed_ones(tmp_path):
    """Without a report the assumed utilization and bandwidth; with one, its figures, and a model it did not
    measure takes the mean of those it did."""
    assumed = st.gpu_rates(_paper(gpu_check=str(tmp_path / "absent.json"), model_flops_utilization=0.25))
    assert set(assumed.utilization.values()) == {(0.25, 0.25)}
    assumed_sync = WorkflowSpec.sync_gb_per_s * 1e9  # the default: paper.yaml leaves it to the GPU check
    assert assumed.sync_bytes_per_s == assumed_sync and "absent.json is not there" in " ".join(assumed.sources)
    (tmp_path / "empty.json").write_text("{}")
    nothing = st.gpu_rates(_paper(gpu_check=str(tmp_path / "empty.json")))
    assert "empty.json measured no architecture" in " ".join(nothing.sources)
    prompt, response = st.GPU_CHECK_ROW
    report = {
        "memory_qwen3_score_tokens": prompt + response,
        "memory_qwen3_score_s": 1.0,
        "memory_qwen3_update_tokens": prompt + response,
        "memory_qwen3_update_s": 1.0,
        "sync_gb_per_s": 2.0,
    }
    (tmp_path / "check.json").write_text(json.dumps(report))
    rates = st.gpu_rates(_paper(gpu_check=str(tmp_path / "check.json")))
    assert rates.sync_bytes_per_s == 2.0e9
    assert rates.utilization["octothinker"] == rates.utilization["smollm3"] == rates.utilization["qwen3"]
    assert rates.utilization["qwen3"][0] > 0
    assert "qwen3's architecture: scoring at" in " ".join(rates.sources)


def test_a_corrupt_gpu_check_is_one_line(tmp_path):
    (tmp_path / "check.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"workflow.gpu_check: cannot read .*check.json"):
        st.gpu_rates(_paper(gpu_check=str(tmp_path / "check.json")))


def test_cells_step_needs_every_models_rollout_rate():
    cfg = _paper(rollout_tokens_per_s={"smollm3": 1000.0})
    rates = st.gpu_rates(cfg)
    assert st.cell_steps(cfg, rates, "graft", ("smollm3", "qwen3"), "colocated") is None
    steps = st.cell_steps(cfg, rates, "grpo_n8", ("smollm3",), "colocated")
    assert len(steps) == 1 and steps[0].generation > 0
    # split: each model on half of the job's GPUs, so its step's parts double but the sync's
    both = _paper(rollout_tokens_per_s={"smollm3": 1000.0, "qwen3": 1000.0})
    colocated = st.cell_steps(both, rates, "graft", ("smollm3", "qwen3"), "colocated")
    split = st.cell_steps(both, rates, "graft", ("smollm3", "qwen3"), "split")
    assert split[0].update == pytest.approx(2 * colocated[0].update)
    assert split[0].sync == colocated[0].sync


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("exchange_share", 0.0, "workflow.exchange_share: 0.0 is not allowed; expected a number in (0, 1]"),
        ("model_flops_utilization", 1.5, "workflow.model_flops_utilization: 1.5 is not allowed"),
        ("gpu_peak_tflops", -1, "workflow.gpu_peak_tflops: -1 is not allowed; expected a number > 0, or null"),
        ("rollout_tokens_per_s", {"nobody": 5}, "workflow.rollout_tokens_per_s: unknown model 'nobody'"),
    ],
)
def test_step_time_fields_are_checked_when_the_config_loads(field, value, message):
    from graft.config import config_from_dict, read_yaml

    data = read_yaml(PAPER)
    data["workflow"][field] = value
    with pytest.raises(ConfigError) as caught:
        config_from_dict(data)
    assert message in str(caught.value)
