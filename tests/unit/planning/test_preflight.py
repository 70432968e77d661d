"""The Slurm profile's pre-flight check: one line naming what is missing and how to run without Slurm, before any
job is submitted and in a dry run (Snakefile), or when graft plan --site asks."""

import os
from pathlib import Path

import yaml

from graft.cli import main
from graft.config import config_from_dict
from graft.planning.job_lengths import job_kinds
from graft.planning.plan import base_evaluations, checkpoint_steps, training_cells
from graft.planning.preflight import pre_submission_check, slurm_problem

# sinfo -h -a -o "%P|%l|%G|%c|%m" of a cluster whose GPUs are A100s only
SINFO_A100 = "gpu*|3-00:00:00|gpu:a100:4|64|480000\n"


def test_a_machine_without_slurm_gets_one_line_naming_the_missing_tools():
    problem = slurm_problem(lambda tool: None)
    assert problem.count("\n") == 0 and "no sbatch or sacct" in problem and "snakemake --cores N all" in problem
    assert "--config 'slurm={site_check: false}'" in problem  # a dry run here without the check
    assert "no sacct on" in slurm_problem(lambda tool: "/usr/bin/sbatch" if tool == "sbatch" else None)


def test_a_slurm_machine_passes():
    assert slurm_problem(lambda tool: f"/usr/bin/{tool}") is None


def paper_check(which, outputs: dict[str, str | None]):
    cfg = config_from_dict(yaml.safe_load(Path("config/paper.yaml").read_text()))
    kinds = job_kinds(cfg, training_cells(cfg), checkpoint_steps(cfg), base_evaluations(cfg))
    return pre_submission_check(cfg, kinds, 3, which=which, run=lambda command: outputs[command[0]])


def test_a_missing_sinfo_is_named_as_missing_with_the_setting_that_skips_the_check():
    problems, warnings = paper_check(lambda tool: None if tool == "sinfo" else f"/usr/bin/{tool}", {})
    assert warnings == [] and len(problems) == 1 and "\n" not in problems[0]
    assert problems[0].startswith("slurm: no sinfo on this machine's PATH;")
    assert problems[0].endswith("skip the check: slurm.site_check: false (--config 'slurm={site_check: false}')")
    # sinfo there, but it lists nothing (a site that keeps it from its users): the same setting is named
    problems, _ = paper_check(lambda tool: f"/usr/bin/{tool}", {"sinfo": "", "scontrol": ""})
    assert problems[0].startswith("slurm: sinfo lists no partition") and "slurm.site_check: false" in problems[0]


def test_a_cluster_without_the_configs_gpu_type_is_one_line():
    problems, _ = paper_check(lambda tool: f"/usr/bin/{tool}", {"sinfo": SINFO_A100, "scontrol": ""})
    assert problems == ["slurm.gpu_type: 'h200' is no GPU GRES type of partition 'gpu'; its types: a100"]


def test_graft_plan_checks_the_site_when_asked(tmp_path, capsys, monkeypatch):
    """graft plan --site runs the workflow's check against this machine's Slurm commands (recorded here)."""
    tools = tmp_path / "bin"
    tools.mkdir()

    def cluster(sinfo: str) -> None:
        for name, output in (("sbatch", ""), ("sacct", ""), ("sinfo", sinfo), ("scontrol", "")):
            (tools / name).write_text(f"#!/bin/sh\nprintf '{output}'\n")
            (tools / name).chmod(0o755)

    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    cluster(SINFO_A100)
    assert main(["plan", "--config", "config/paper.yaml"]) == 0  # no check unless asked
    assert "site:" not in capsys.readouterr().out
    assert main(["plan", "--config", "config/paper.yaml", "--site"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "graft: error: slurm.gpu_type: 'h200' is no GPU GRES type of partition 'gpu'; its types: a100"
    ]
    cluster(SINFO_A100.replace("a100", "h200"))
    assert main(["plan", "--config", "config/paper.yaml", "--site", "--set", "slurm.site_check=false"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("site: ")  # asked for: checked all the same
