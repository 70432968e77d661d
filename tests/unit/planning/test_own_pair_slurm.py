"""config/examples/own-pair.yaml through the Slurm profile, not run: its placeholders filled as a user fills them,
every training and evaluation job asks for GPUs of the type it names and for its GPUs' share of the nodes that
sinfo (recorded here) shows. Snakemake works in a temporary directory (helpers.workflow_dir), so nothing lands in the
checkout."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import yaml
from helpers.workflow_dir import ROOT, run_in, tool

# sinfo -h -a -o "%P|%l|%G|%c|%m" of a cluster of nodes of 8 H200s, 128 CPUs and 1,000,000 MB, and CPU nodes
SINFO = "gpu*|2-00:00:00|gpu:h200:8(S:0-1)|128|1000000\ncpu|infinite|(null)|32|250000\n"


def filled_example(root: Path) -> Path:
    """The example with its placeholders filled (the GPU partition, the account), its problems written under
    ``root`` and its results there."""
    config = yaml.safe_load((ROOT / "config" / "examples" / "own-pair.yaml").read_text())
    config["results"] = str(root / "results")
    rows = [{"id": f"p{i}", "problem": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(8)]
    for split in ("train", "validation"):
        path = root / f"{split}.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        config["data"][split] = str(path)
    config["eval"]["validation"] = config["data"]["validation"]
    config["slurm"].update(gpu_partition="gpu", account="lab")
    path = root / "my-pair.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def test_the_worked_example_asks_slurm_for_its_gpus_and_its_share_of_the_nodes(tmp_path):
    tools = tmp_path / "bin"
    tools.mkdir()
    # a dry run checks the site as a run does: sbatch and sacct there, the config's slurm section against sinfo
    for name, output in (("sinfo", SINFO), ("sbatch", ""), ("sacct", "")):
        (tools / name).write_text(f"#!/bin/sh\nprintf '{output}'\n")
        (tools / name).chmod(0o755)
    cmd = [tool("snakemake"), "all", "--profile", "slurm", "--configfile", filled_example(tmp_path)]
    cmd += ["--dry-run", "--quiet", "host"]
    env = {**os.environ, "PATH": f"{tools}:{os.environ.get('PATH', '')}"}
    done = run_in(tmp_path, *cmd, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "graft: targets all; executor slurm; profile workflow/profiles/slurm" in done.stderr
    jobs = {}
    for block in re.finditer(r"^rule (\w+):\n((?:    .*\n)+)", done.stdout + done.stderr, re.M):
        fields = dict(re.findall(r"^    (\w+): (.*)$", block.group(2), re.M))
        resources = dict(item.split("=", 1) for item in fields["resources"].split(", "))
        jobs.setdefault(block.group(1), []).append(resources)
    assert len(jobs["train"]) == 9  # GRPO n=8 of each model and GRAFT on the pair, 3 seeds each
    site = {"slurm_partition": "gpu", "slurm_account": "lab", "tasks_per_gpu": "0"}
    # 4 of a node's 8 GPUs: half its CPUs and memory; one GPU: an eighth
    train = {**site, "gres": "gpu:h200:4", "cpus_per_task": "64", "mem_mb": "500000", "runtime": "2880"}
    evaluation = {**site, "gpu": "1", "gpu_model": "h200", "cpus_per_task": "16", "mem_mb": "125000", "runtime": "720"}
    assert all(train.items() <= job.items() for job in jobs["train"]), jobs["train"][0]
    for rule in ("evaluate_base", "evaluate_checkpoints", "reevaluate_selected"):
        assert jobs[rule] and all(evaluation.items() <= job.items() for job in jobs[rule]), (rule, jobs[rule][0])
    assert all("gres" not in job and "gpu" not in job for job in jobs["report"])
