"""The Slurm site (graft/planning/site.py, graft/planning/preflight.py): each rule's resources from the config's
slurm section, the warning's lead per training cell, and the check of recorded sinfo and scontrol output."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from graft.config import config_from_dict, load_config
from graft.errors import ConfigError
from graft.planning.disk import checkpoint_bytes, resume_bytes
from graft.planning.job_lengths import job_hours, job_kinds
from graft.planning.plan import base_evaluations, checkpoint_steps, training_cells
from graft.planning.preflight import site_check
from graft.planning.site import (
    GPU_RULES,
    parse_proctrack,
    parse_sinfo,
    parse_time_limit,
    proctrack_warning,
    rule_resources,
    runtime_asks,
    site_problems,
    stop_lead_seconds,
)

PAPER = Path("config/paper.yaml")

# sinfo -h -a -o "%P|%l|%G|%c|%m" on a site whose H200s' GRES type is nvidia_h200: one line per partition and kind
# of node
SINFO = """\
gpu*|3-00:00:00|gpu:nvidia_h200:8(S:0-1)|128|1000000
gpu*|3-00:00:00|gpu:nvidia_h200:4(S:0),shard:4|64|500000+
short|4:00:00|gpu:nvidia_h200:8(S:0-1)|128|1000000
cpu|7-00:00:00|(null)|32|250000
"""
# CI's one-node cluster (.ci/slurm_cluster.sh): one default partition, no limit, no GPUs
SINFO_CI = "debug*|infinite|(null)|2|7900\n"
SCONTROL = """\
Configuration data as of 2026-12-01T10:00:00
AccountingStorageType   = accounting_storage/slurmdbd
PreemptType             = preempt/partition_prio
ProctrackType           = {}
SchedulerType           = sched/backfill
"""


def paper(**slurm) -> object:
    raw = yaml.safe_load(PAPER.read_text())
    raw["slurm"] = {**raw["slurm"], **slurm}
    return config_from_dict(raw)


def untyped(**slurm) -> object:
    """The paper config asking for any GPU of its partition (slurm.gpu_type: null), with the figures of its GPU."""
    raw = yaml.safe_load(PAPER.read_text())
    raw["slurm"] = {**raw["slurm"], "gpu_type": None, **slurm}
    raw["scale"]["gpu_memory_gb"] = 150.75
    raw["workflow"].update(gpu_peak_tflops=989, gpu_speed_vs_h200=1)
    return config_from_dict(raw)


@pytest.mark.parametrize(
    ("text", "hours"),
    [("3-00:00:00", 72), ("1-12:30:00", 36.5), ("4:00:00", 4), ("30:00", 0.5), ("90", 1.5), ("infinite", None)],
)
def test_slurm_time_limits_read_as_hours(text, hours):
    assert parse_time_limit(text) == hours


def test_sinfo_gives_each_partition_its_limit_default_and_gpu_types():
    parts = parse_sinfo(SINFO)
    assert sorted(parts) == ["cpu", "gpu", "short"]
    assert parts["gpu"].default and not parts["short"].default
    assert parts["gpu"].max_hours == 72 and parts["short"].max_hours == 4 and parts["cpu"].max_hours == 168
    assert parts["gpu"].gpu_types == {"nvidia_h200"} and parts["gpu"].gpus
    assert not parts["cpu"].gpus and not parse_sinfo(SINFO_CI)["debug"].gpus
    # a node's CPUs, memory and GPUs: the partition's smallest node with GPUs ("500000+": nodes of at least that)
    assert (parts["gpu"].cpus, parts["gpu"].memory_mb, parts["gpu"].node_gpus) == (64, 500000, 4)
    assert (parts["cpu"].cpus, parts["cpu"].memory_mb, parts["cpu"].node_gpus) == (32, 250000, None)


def test_a_site_whose_gres_type_has_another_name_is_told_its_types():
    assert site_problems(paper(), parse_sinfo(SINFO)) == [
        "slurm.gpu_type: 'h200' is no GPU GRES type of partition 'gpu'; its types: nvidia_h200"
    ]
    assert site_problems(paper(gpu_type="nvidia_h200"), parse_sinfo(SINFO)) == []
    assert site_problems(untyped(cpu_partition="cpu"), parse_sinfo(SINFO)) == []


@pytest.mark.parametrize(
    ("slurm", "problem"),
    [
        (
            {"gpu_partition": "short"},
            "slurm.max_runtime_hours: train jobs ask for 72 h, more than partition 'short' allows (MaxTime 4 h); "
            "set slurm.max_runtime_hours: 4",
        ),
        (
            {"gpu_partition": "cpu"},
            "slurm.gpus: partition 'cpu' has no GPUs (no gpu GRES in sinfo -o %G); set slurm.gpu_partition to a "
            "partition with GPUs",
        ),
        ({"gpu_partition": "h200"}, "slurm.gpu_partition: no partition 'h200' on this cluster (sinfo); partitions: "),
        ({"cpu_partition": "batch"}, "slurm.cpu_partition: no partition 'batch' on this cluster (sinfo); partitions: "),
    ],
)
def test_each_missing_partition_time_limit_or_gpu_is_one_line(slurm, problem):
    problems = site_problems(paper(gpu_type="nvidia_h200", **slurm), parse_sinfo(SINFO))
    assert len(problems) == 1 and problems[0].startswith(problem) and "\n" not in problems[0]


def test_the_ci_cluster_passes_and_an_empty_sinfo_is_one_line():
    smoke = load_config("config/smoke.yaml")
    assert site_problems(smoke, parse_sinfo(SINFO_CI)) == []
    assert site_problems(smoke, parse_sinfo(""))[0].startswith("slurm: sinfo lists no partition")


def test_only_proctrack_pgid_keeps_the_warning_from_the_trainers():
    for kind in ("proctrack/cgroup", "proctrack/linuxproc"):
        assert parse_proctrack(SCONTROL.format(kind)) == kind and proctrack_warning(kind) is None
    assert "reaches no trainer" in proctrack_warning(parse_proctrack(SCONTROL.format("proctrack/pgid")))


def test_jobs_longer_than_their_limit_are_refused_before_any_is_submitted():
    """Training chains through the retries (a warned job saves, its retry resumes); evaluation does not."""
    recorded = {"sinfo": SINFO, "scontrol": SCONTROL.format("proctrack/pgid")}

    def check(cfg, jobs_per_run):
        cells, steps = training_cells(cfg), checkpoint_steps(cfg)
        kinds = job_kinds(cfg, cells, steps, base_evaluations(cfg))
        return site_check(cfg, kinds, jobs_per_run, run=lambda command: recorded[command[0]])

    problems, warnings = check(paper(gpu_type="nvidia_h200"), 3)
    assert problems == [] and len(warnings) == 1
    problems, _ = check(paper(gpu_type="nvidia_h200", max_runtime_hours=10, evaluation_hours=4), 3)
    assert [p.split(" jobs take")[0] for p in problems] == ["evaluate_checkpoints", "reevaluate_selected"]
    # by hand: a job of workflow.eval_checkpoints_per_job (5) checkpoints of a pair's 2 models, each evaluation
    # 1,372 problems (the five benchmarks and the validation set) x 8 samples x 2,048 tokens at 10,500 tokens/s
    job = 5 * 2 * 1372 * 8 * 2048 / 10500 / 3600
    assert problems[0] == (
        f"evaluate_checkpoints jobs take up to {job:.1f} h (graft plan), more than their time limit of 4 h "
        "(slurm.evaluation_hours); shorten them with workflow.eval_checkpoints_per_job"
    )
    problems, _ = check(paper(gpu_type="nvidia_h200", max_runtime_hours=10), 1)
    # 16.7 h: the longest training cell's predicted length in one job (graft.planning.step_time's model of a step,
    # tested on its own in test_step_time.py), a figure recorded from graft plan and checked here for
    # reproducibility, not derived
    assert problems == [
        "train jobs take up to 16.7 h (graft plan), more than their time limit of 10 h (slurm.max_runtime_hours); "
        "shorten them with train.checkpoint_minutes (a job killed at its limit resumes from its last checkpoint "
        "when retried)"
    ]


def test_every_rule_takes_the_site_from_the_slurm_section():
    cfg = paper(gpu_partition="gpu", cpu_partition="cpu", account="lab", qos="high", constraint="h200_141gb")
    train = rule_resources(cfg, "train")
    assert train == {
        "slurm_partition": "gpu",
        "slurm_account": "lab",
        "qos": "high",
        "constraint": "h200_141gb",
        "runtime": 72 * 60,
        "tasks_per_gpu": 0,
        "gres": "gpu:h200:4",
        # the paper's node (slurm.node_*): 4 GPUs, 64 CPUs, 480,000 MB, all of it for the job of all 4 GPUs
        "cpus_per_task": 64,
        "mem_mb": 480000,
    }
    evaluation = {k: v for k, v in train.items() if k != "gres"} | {"runtime": 12 * 60, "gpu": 1, "gpu_model": "h200"}
    evaluation |= {"cpus_per_task": 16, "mem_mb": 120000}  # one GPU's quarter of the node
    assert all(rule_resources(cfg, rule) == evaluation for rule in GPU_RULES[1:])
    assert rule_resources(cfg, "report") == {"slurm_partition": "cpu", "slurm_account": "lab", "qos": "high"}
    anyone = untyped(max_runtime_hours=48, evaluation_hours=60)
    assert rule_resources(anyone, "train")["gres"] == "gpu:4" and "gpu_model" not in rule_resources(
        anyone, "evaluate_base"
    )
    assert rule_resources(anyone, "evaluate_base")["runtime"] == 48 * 60  # never more than the site allows
    smoke = load_config("config/smoke.yaml")
    assert all(rule_resources(smoke, rule) == {} for rule in [*GPU_RULES, "report"])  # the profile's stay


def test_each_gpu_job_asks_for_its_predicted_length_times_the_factor_and_its_lead_within_the_site():
    cfg = paper()
    cells = training_cells(cfg)
    hours = job_hours(cfg, cells, checkpoint_steps(cfg))
    asks = runtime_asks(cfg, cells, hours)
    factor, site = cfg.slurm.runtime_factor, cfg.slurm
    for c in cells:
        key, lead = (c.method, c.cell, c.seed), stop_lead_seconds(cfg, c.method, c.models)
        assert asks["train"][key] == math.ceil(
            min(site.max_runtime_hours, hours["train"][key] * factor + lead / 3600) * 60
        )
    for rule in GPU_RULES[1:]:
        assert asks[rule] == {k: math.ceil(min(site.evaluation_hours, h * factor) * 60) for k, h in hours[rule].items()}
    # the longest training job asks for less than the site's 72 hours, and no job for more
    assert max(asks["train"].values()) < site.max_runtime_hours * 60
    tight = paper(max_runtime_hours=20, evaluation_hours=4)
    tight_asks = runtime_asks(tight, cells, job_hours(tight, cells, checkpoint_steps(tight)))
    assert max(tight_asks["train"].values()) == 20 * 60 and max(tight_asks["evaluate_checkpoints"].values()) == 4 * 60
    # CPU jobs have no predicted length: every job keeps the site's limit, or the profile's
    smoke = load_config("config/smoke.yaml")
    smoke_cells = training_cells(smoke)
    assert runtime_asks(smoke, smoke_cells, job_hours(smoke, smoke_cells, checkpoint_steps(smoke))) == {}
    with pytest.raises(ConfigError, match=r"^config.slurm.runtime_factor: 0.5 is not allowed; expected a number >= 1$"):
        paper(runtime_factor=0.5)


# The paper's Table 5: seconds per step measured (GPU-hours x 3,600 / 4 GPUs / 174 steps)
TABLE5_STEP_S = {
    ("grpo_n32", ("smollm3",)): 515,
    ("grpo_n32", ("qwen3",)): 236,
    ("grpo_n8_ds", ("smollm3",)): 209,
    ("grpo_n8_ds", ("qwen3",)): 142,
    ("graft", ("smollm3", "qwen3")): 224,
    ("hacpo", ("smollm3", "qwen3")): 244,
    ("sgt", ("smollm3", "qwen3")): 275,
}


def test_the_warning_covers_the_papers_measured_step_and_a_save():
    cfg = paper()
    for (method, models), step in TABLE5_STEP_S.items():
        lead = stop_lead_seconds(cfg, method, models)
        saved = sum(checkpoint_bytes(cfg, m) + resume_bytes(cfg, m) for m in models)
        assert lead % 60 == 0 and lead >= step + saved / (cfg.slurm.save_gb_per_s * 1e9), (method, models, lead)
    assert stop_lead_seconds(cfg, "grpo_n32", ("smollm3",)) > stop_lead_seconds(cfg, "grpo_n8", ("smollm3",))
    assert stop_lead_seconds(cfg, "grpo_n8_ds", ("qwen3",)) > stop_lead_seconds(cfg, "grpo_n8", ("qwen3",))
    assert stop_lead_seconds(load_config("config/smoke.yaml"), "grpo_n8", ("smol",)) is None


def test_a_gpu_jobs_cpus_and_memory_are_its_gpus_share_of_the_node_sinfo_shows():
    """With the slurm section's node figures unset, the GPU partition's smallest node with GPUs in sinfo: 4 of its
    4 GPUs for a training job, 1 for an evaluation; the section's figures win where it sets them."""

    def share(cfg, rule, partitions):
        resources = rule_resources(cfg, rule, partitions)
        return resources.get("cpus_per_task"), resources.get("mem_mb")

    follow = paper(gpu_type="nvidia_h200", node_cpus=None, node_memory_mb=None, node_gpus=None)
    parts = parse_sinfo(SINFO)
    assert share(follow, "train", parts) == (64, 500000)
    assert share(follow, "evaluate_base", parts) == (16, 125000)
    eight = paper(gpu_type="nvidia_h200", gpu_partition="short", node_cpus=None, node_memory_mb=None, node_gpus=None)
    assert share(eight, "train", parts) == (64, 500000)  # 4 of the node's 8 GPUs: half its 128 CPUs
    mixed = paper(gpu_type="nvidia_h200", node_cpus=96, node_memory_mb=None, node_gpus=None)
    assert share(mixed, "evaluate_base", parts) == (24, 125000)
    # neither the section nor sinfo: the profile's defaults stay; CPU rules never take a share
    assert share(follow, "train", {}) == share(follow, "report", parts) == (None, None)


def test_nodes_smaller_than_the_section_says_are_one_line_each():
    big = paper(gpu_type="nvidia_h200", node_cpus=256, node_memory_mb=480000, node_gpus=4)
    assert site_problems(big, parse_sinfo(SINFO)) == [
        "slurm.node_cpus: 256, more than partition 'gpu''s nodes have (64, sinfo -o %c); set slurm.node_cpus: 64, or "
        "null to follow sinfo"
    ]
    two = "gpu*|3-00:00:00|gpu:nvidia_h200:2|64|500000\n"
    wide = paper(gpu_type="nvidia_h200", node_gpus=None)
    assert site_problems(wide, parse_sinfo(two))[0] == (
        "scale.processes: a training job asks for 4 GPUs on each node, more than partition 'gpu''s nodes have (2, "
        "sinfo -o %G)"
    )


def test_the_placeholders_of_the_worked_example_are_named_before_any_job_is_submitted():
    own = load_config("config/examples/own-pair.yaml")
    sinfo = "gpu*|2-00:00:00|gpu:h200:4|64|500000\ncpu|infinite|(null)|32|250000\n"
    assert site_problems(own, parse_sinfo(sinfo)) == [
        "slurm.gpu_partition: '<your GPU partition>' is a placeholder; set the partition of this cluster's GPU nodes "
        "(partitions: cpu, gpu)",
        "slurm.account: '<your Slurm account>' is a placeholder; set your Slurm account (sacctmgr show associations "
        "user=$USER format=account -n -P lists them), or null for your default one",
    ]
    raw = yaml.safe_load(Path("config/examples/own-pair.yaml").read_text())
    raw["slurm"].update(gpu_partition="gpu", account="lab")
    assert site_problems(config_from_dict(raw), parse_sinfo(sinfo)) == []


def test_a_qos_whose_maxwall_is_shorter_than_a_job_is_refused_and_one_sacctmgr_cannot_read_is_a_note():
    recorded = {"sinfo": SINFO, "scontrol": SCONTROL.format("proctrack/cgroup")}

    def check(cfg, sacctmgr):
        cells, steps = training_cells(cfg), checkpoint_steps(cfg)
        kinds = job_kinds(cfg, cells, steps, base_evaluations(cfg))
        outputs = {**recorded, "sacctmgr": sacctmgr}
        return site_check(cfg, kinds, 3, run=lambda command: outputs[command[0]])

    cfg = paper(gpu_type="nvidia_h200", qos="normal")
    assert check(cfg, "normal|3-00:00:00\n") == ([], [])
    assert check(cfg, "normal|\n") == ([], [])  # no MaxWall
    problems, _ = check(cfg, "normal|2-00:00:00\n")
    assert problems == [
        "slurm.max_runtime_hours: train jobs ask for 72 h, more than QoS 'normal' allows (MaxWall 48 h); set "
        "slurm.max_runtime_hours: 48"
    ]
    evaluations = paper(gpu_type="nvidia_h200", qos="normal", max_runtime_hours=None)
    assert check(evaluations, "normal|10:00:00\n")[0] == [
        "slurm.evaluation_hours: evaluate_checkpoints jobs ask for 12 h, more than QoS 'normal' allows (MaxWall 10 h); "
        "set slurm.evaluation_hours: 10"
    ]
    assert check(cfg, "")[0] == [
        "slurm.qos: no QoS 'normal' on this cluster (sacctmgr show qos); set one your account may use, or null"
    ]
    problems, notes = check(cfg, None)
    assert problems == [] and notes == [
        "note: slurm.qos: the MaxWall of QoS 'normal' is not checked: sacctmgr cannot read it here (no accounting "
        "database, or no sacctmgr)"
    ]


def test_a_gres_type_the_executor_plugin_cannot_pass_names_the_gpu_and_asks_for_any_of_the_partition():
    """Slurm's AutoDetect=nvml writes types like nvidia_a100-sxm4-80gb, whose "-" snakemake-executor-plugin-slurm
    refuses: the plan takes the A100 80 GB, the jobs ask for any GPU of a partition that has no other type."""
    cfg = paper(gpu_type="nvidia_a100-sxm4-80gb", max_runtime_hours=None, evaluation_hours=None)
    assert cfg.gpu().name == "A100 80 GB"
    assert rule_resources(cfg, "train", {})["gres"] == "gpu:4" and "gpu_model" not in rule_resources(
        cfg, "evaluate_base", {}
    )
    only = parse_sinfo("gpu*|infinite|gpu:nvidia_a100-sxm4-80gb:4|64|480000\n")
    assert site_problems(cfg, only) == []
    both = parse_sinfo(
        "gpu*|infinite|gpu:nvidia_a100-sxm4-80gb:4|64|480000\ngpu*|infinite|gpu:nvidia_a100-sxm4-40gb:4|64|480000\n"
    )
    (problem,) = site_problems(cfg, both)
    assert problem.startswith("slurm.gpu_type: 'nvidia_a100-sxm4-80gb' holds a '-', which snakemake-executor-plugin")
