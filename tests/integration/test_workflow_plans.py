"""The workflow's plans (dry runs of the default, the paper and the example configs through the Slurm profile, a
disk budget's lanes) and the runs that need no smoke tree (lanes after a failed cell, a configured environment).
The smoke tree's runs are in test_workflow.py; the two files run on different pytest workers."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from helpers.own_pair import own_pair_config
from helpers.workflow_dir import job_counts, run_in, tool

from graft.config import config_from_dict, load_config
from graft.planning.job_lengths import job_hours
from graft.planning.plan import base_evaluations, checkpoint_steps, describe, disk_turns, training_cells
from graft.planning.site import GPU_RULES, runtime_asks, stop_lead_seconds
from graft.results import ResultsTree
from graft.workflow.live import RECORDS
from graft.workflow.rounds import AGAIN, ROUND_OF

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_the_default_plans_its_worlds_families_and_the_main_comparison(tmp_path):
    """A dry run of the embedded default's rule full: one test set per family of ``toy.families`` and no other, the
    base model per seed of its GRPO n=8 cells, GRPO n=8 and GRAFT on every model and pair, the baselines only where
    ``workflow.baseline_*`` put them, every P1 comparison at 3 seeds and the octo cells at one (graft plan counts
    the same), reported in report_full/."""
    results = tmp_path / "results"
    proc = run_in(
        tmp_path, tool("snakemake"), "full", "--dry-run", "--cores", "2", "--config", f"results={results}", check=True
    )
    out = proc.stdout + proc.stderr
    tests = set(re.findall(r"toy/data/test/(\w+)\.jsonl", out))
    assert tests == {"add", "sub", "add3", "sub3", "mul"}
    counts = job_counts(proc)
    # grpo_n8 (smol, qwen 3 seeds; octo 1), n32, graft (P1 3; P2, P3 1), hacpo, sgt, replay, both ablations
    assert counts["train"] == 7 + 2 + 5 + 3 + 3 + 2 + 6
    # the base model once per seed of the model's GRPO n=8 cells, so claims against it average as the RL side does
    assert counts["evaluate_base"] == 3 + 3 + 1
    assert counts["report_full"] == 1 and "report" not in counts
    assert set(re.findall(r"eval/base/smol/seed(\d+)/smol/step_00000\.json", out)) == {"0", "1", "2"}
    assert set(re.findall(r"eval/base/octo/seed(\d+)/octo/step_00000\.json", out)) == {"0"}
    figures = set(re.findall(r"report_full/figures/dynamics_(\w+)\.png", out))
    assert figures == {"graft_P1", "graft_P2", "graft_P3", "hacpo_P1", "sgt_P1"}  # one per co-training cell run


def test_the_default_main_job_runs_its_main_cells_and_every_other_cell_stays_a_target(tmp_path):
    """Rule all runs workflow.main_cells (GRPO n=8 of smol and qwen and GRAFT on P1, 3 seeds each, and their base
    models; octo is not built), and a cell outside them, HACPO on P1 seed 1, is a target of its own."""
    results = tmp_path / "results"
    proc = run_in(
        tmp_path, tool("snakemake"), "all", "--dry-run", "--cores", "2", "--config", f"results={results}", check=True
    )
    out = proc.stdout + proc.stderr
    counts = job_counts(proc)
    assert counts["train"] == 3 + 3 + 3
    assert counts["evaluate_base"] == 3 + 3
    assert counts["toy_model"] == 2 and "models/octo" not in out
    assert counts["report"] == 1 and "report_full" not in out
    assert set(re.findall(r"report/figures/dynamics_(\w+)\.png", out)) == {"graft_P1"}
    done = results / "runs" / "hacpo" / "P1" / "seed1" / "done.json"
    proc = run_in(
        tmp_path, tool("snakemake"), done, "--dry-run", "--cores", "2", "--config", f"results={results}", check=True
    )
    assert job_counts(proc)["train"] == 1


def test_every_job_runs_from_the_configured_environment_and_a_missing_one_stops_before_any(tmp_path):
    """workflow.environment: a job's commands run from its bin/ (here a graft that notes each call, then runs the
    project's), whatever environment runs Snakemake; without bin/graft Snakemake stops before any job, with one
    line naming the command that builds the environment."""
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    calls = tmp_path / "calls.txt"
    wrapper = env / "bin" / "graft"
    wrapper.write_text(f'#!/bin/sh\necho "$1" >> {calls}\nexec {tool("graft")} "$@"\n')
    wrapper.chmod(0o755)
    config = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())
    for name, where in (("ok.yaml", env), ("missing.yaml", tmp_path / "absent")):
        config["workflow"]["environment"] = str(where)
        (tmp_path / name).write_text(yaml.safe_dump(config, sort_keys=False))
    results = tmp_path / "results"
    target = results / "methods.yaml"

    def snakemake(name):
        cmd = [tool("snakemake"), target, "--cores", "1", "--configfile", tmp_path / name]
        return run_in(tmp_path, *cmd, "--config", f"results={results}")

    refused = snakemake("missing.yaml")
    assert refused.returncode != 0 and not target.exists()
    said = [line for line in (refused.stdout + refused.stderr).splitlines() if "workflow.environment" in line]
    assert said == [
        f"workflow.environment: '{tmp_path / 'absent'}' has no bin/graft; build it with: bash "
        f"requirements/gpu-env.sh {tmp_path / 'absent'} (or set workflow.environment to an environment that has "
        "the graft package, or to null)"
    ]
    done = snakemake("ok.yaml")
    assert done.returncode == 0, done.stderr
    assert target.is_file() and calls.read_text().split() == ["methods"]


LIST_JOBS = ("--quiet", "host")
"""Replaces the Slurm profile's ``quiet: [rules]``: the dry run lists every job with its resources."""
NO_SITE_CHECK = "slurm={site_check: false}"
"""A dry run through the Slurm profile checks the site first, as a run does; this machine has no Slurm, so the dry
runs that test something else skip it (test_a_dry_run_through_the_slurm_profile_checks_the_site_first...)."""
PAPER_DRY_RUN = ("all", "--profile", "slurm", "--dry-run", "--config", NO_SITE_CHECK, *LIST_JOBS)


@pytest.fixture(scope="module")
def paper_dry_run(tmp_path_factory):
    """config/paper.yaml's DAG through the paper's Slurm profile, not run."""
    return run_in(tmp_path_factory.mktemp("paper"), tool("snakemake"), *PAPER_DRY_RUN, check=True)


def test_paper_config_dry_run_through_the_slurm_profile(paper_dry_run):
    counts = job_counts(paper_dry_run)
    # 3 models x (grpo_n8 x 3 seeds + n16 + n32 + n8 with dynamic sampling), 3 pairs x (graft x 3 seeds + hacpo
    # + sgt + 2 replays), 17 ablations on pair 1; each cell's selected checkpoints re-evaluated in one job
    assert counts["train"] == 3 * 6 + 3 * 7 + 17
    assert counts["reevaluate_selected"] == counts["train"]
    # 35 checkpoints (every 5 of 174 steps, and the last) in jobs of 5 (workflow.eval_checkpoints_per_job)
    assert counts["evaluate_checkpoints"] == 7 * counts["train"]
    assert counts["collect_evaluations"] == counts["train"]
    assert counts["fetch_model"] == 3
    assert counts["report"] == 1


def test_the_paper_dry_run_reads_as_a_summary_and_lists_every_job_behind_a_flag(paper_dry_run, tmp_path):
    """Through the Slurm profile the paper's dry run is a page a person reads: graft's plan (jobs per rule,
    GPU-hours, disk) and Snakemake's job counts, no block per job and no warning but the disk's, where results: has
    less free space than the peak (here, not on scratch storage); --quiet host lists all 637."""
    summary = run_in(tmp_path, tool("snakemake"), *PAPER_DRY_RUN[: -len(LIST_JOBS)], check=True)
    output = summary.stdout + summary.stderr
    assert len(output.splitlines()) < 100 and "rule train:" not in output
    assert "jobs per rule" in output and "GPU-hours: training" in output and "peak:" in output
    warnings = [line for line in output.splitlines() if "warning" in line.lower()]
    assert all("less than the workflow's peak" in line for line in warnings), warnings
    assert job_counts(summary) == job_counts(paper_dry_run)
    assert (paper_dry_run.stdout + paper_dry_run.stderr).count("rule train:") == job_counts(summary)["train"]


def train_waits(out) -> dict[Path, list[Path]]:
    """Each training job of a dry run listed with --quiet host: its run directory and those of the cells whose
    pruning it waits for."""
    waits = {}
    for block in (out.stdout + out.stderr).split("rule train:")[1:]:
        inputs = block.split("input: ", 1)[1].split("\n", 1)[0].split(", ")
        done = block.split("output: ", 1)[1].split("\n", 1)[0]
        waits[Path(done).parent] = [Path(i).parent for i in inputs if i.endswith("pruned.json")]
    return waits


def budgeted_paper(tmp_path: Path, **fields) -> tuple[dict, Path]:
    """config/paper.yaml with a 5 TB workflow.disk_budget_gb, no site check (this machine has no Slurm) and
    ``fields`` set, written under ``tmp_path``: the data and the file."""
    data = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    data["workflow"]["disk_budget_gb"] = 5000
    data["slurm"]["site_check"] = False
    data.update(fields)
    path = tmp_path / "paper.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return data, path


def lanes_dry_run(tmp_path: Path, path: Path) -> subprocess.CompletedProcess:
    """The dry run of config ``path`` through the paper's Slurm profile, every job listed (for ``train_waits``)."""
    return run_in(tmp_path, tool("snakemake"), "all", "--profile", "slurm", "--configfile", path, "--dry-run",
                  *LIST_JOBS, check=True)  # fmt: skip


def test_a_disk_budget_chains_the_paper_cells_so_that_no_more_train_at_once_than_fit(tmp_path):
    """workflow.disk_budget_gb of 5 TB on the paper config: the plan's peak stays within it, and in the dry run
    every training job but the first k waits for another cell's pruning, each cell for at most one and waited for
    by at most one. The cells then form k chains, each trained one cell after another (a cell's pruning follows
    its training and evaluations), so at most k cells hold their checkpoints at once, whatever order Slurm runs
    the jobs in."""
    data, path = budgeted_paper(tmp_path)
    config = config_from_dict(data)
    k, _ = disk_turns(config, training_cells(config))
    peak = [line for line in describe(config, str(path)).splitlines() if "peak under workflow.disk_budget_gb" in line]
    assert len(peak) == 1 and f"at most {k} cells in flight" in peak[0]
    assert float(peak[0].split("GB): ")[1].split(" TB")[0]) <= 5.0
    out = lanes_dry_run(tmp_path, path)
    waits = train_waits(out)
    assert len(waits) == job_counts(out)["train"] == 56
    assert all(len(w) <= 1 for w in waits.values())
    first = [cell for cell, w in waits.items() if not w]
    waited = [w[0] for w in waits.values() if w]
    assert len(first) == k and len(set(waited)) == len(waited) and set(waited) <= set(waits)


def test_the_cells_behind_a_failed_one_wait_for_another_lane_in_the_next_invocation(tmp_path):
    """A GRPO run that replay cells read failed for good (its failed.json): in the dry run of the paper config with
    a 5 TB budget nothing but its replay cells waits for it, every cell waits for at most one and is waited for by
    at most one, and the lanes are as many as fit: no cell lost its turn, and Snakemake found no cycle."""
    data, path = budgeted_paper(tmp_path, results=str(tmp_path / "results"))
    config = config_from_dict(data)
    cells = training_cells(config)
    failed = next(c for c in cells if c.method == "grpo_n8" and any(r.peer == c.cell for r in cells))
    failed_dir = failed.run_dir(ResultsTree(config.results)).root
    failed_dir.mkdir(parents=True)
    (failed_dir / "failed.json").write_text('{"failed_at": "2026-12-01T00:00:00.000000Z", "attempt": 3, "exit": 1}\n')
    k, _ = disk_turns(config, cells)
    out = lanes_dry_run(tmp_path, path)
    waits = train_waits(out)
    behind = {cell for cell, w in waits.items() if failed_dir in w}
    assert behind and all(cell.parts[-3] == "replay" for cell in behind)
    assert len(waits) == 56 and all(len(w) <= 1 for w in waits.values())
    waited = [w[0] for w in waits.values() if w]
    assert len(set(waited)) == len(waited) and len([cell for cell, w in waits.items() if not w]) == k


LANES = """
import os
import sys
from pathlib import Path
from graft.planning.turns import failure_time, waits
from graft.results import RunDir
from graft.workflow.failures import ATTEMPTS_ENV
from graft.workflow.rounds import after_failures

CELLS = list("abcdef")
def failed():
    return {c: at for c in CELLS if (at := failure_time(RunDir(Path("runs", c)))) is not None}
FAILED = failed()
BEFORE = waits(CELLS, 2, FAILED, {})

onstart:
    os.environ[ATTEMPTS_ENV] = str(workflow.execution_settings.retries + 1)

onerror:
    after_failures(
        BEFORE, FAILED, failed(), lambda c: Path("runs", c, "done.json").exists(), str,
        workflow.execution_settings.keep_going, sys.argv, Path.cwd(),
    )

rule all:
    input: expand("runs/{cell}/pruned.json", cell=CELLS)

rule train:
    input: lambda wc: [ancient(f"runs/{BEFORE[wc.cell]}/pruned.json")] if wc.cell in BEFORE else []
    output: "runs/{cell}/done.json"
    resources: attempt=lambda wc, attempt: attempt
    shell:
        "echo start {wildcards.cell} >> events; sleep 0.5; ( [ {wildcards.cell} != b ] && touch {output} )"
        " || {{ code=$?; python -m graft.workflow.failures --run runs/{wildcards.cell}"
        " --attempt {resources.attempt} --exit $code; exit $code; }}"

rule prune:
    input: "runs/{cell}/done.json"
    output: "runs/{cell}/pruned.json"
    shell: "sleep 0.3; echo prune {wildcards.cell} >> events; touch {output}"
"""
"""Six cells in two lanes (a c e, b d f), the training rule's failure record as in rules/train.smk and the
workflow's onerror (rules/common.smk); b always fails."""


def test_one_keep_going_invocation_completes_every_cell_but_the_one_that_failed_for_good(tmp_path):
    """With --keep-going, b fails for good (its last attempt records failed.json) while d and f wait behind it in
    its lane, which Snakemake cannot run in that round (nothing runs downstream of a failed job); the workflow says
    so in a line and runs its next round, in which d and f wait behind e and complete, and ends with Snakemake's
    failure for b. At no moment do more than 2 cells hold checkpoints (b holds its own throughout, as a failed cell
    keeps them). A second invocation retries b alone and has no round to add."""
    (tmp_path / "Snakefile").write_text(LANES)

    def invocation():
        cmd = [tool("snakemake"), "--cores", "3", "--keep-going", "--retries", "1", "--directory", tmp_path]
        return run_in(tmp_path, *cmd, "--snakefile", tmp_path / "Snakefile")

    def pruned():
        return {cell for cell in "abcdef" if (tmp_path / "runs" / cell / "pruned.json").exists()}

    first = invocation()
    assert first.returncode != 0
    assert pruned() == set("acdef") and (tmp_path / "runs" / "b" / "failed.json").exists()
    out = first.stdout + first.stderr
    assert out.count("graft: 2 cell(s) of the disk budget's lanes waited behind b,") == 1, out
    assert AGAIN in out
    starts = [line.split()[1] for line in (tmp_path / "events").read_text().splitlines() if line.startswith("start")]
    assert starts.count("b") == 4  # two attempts in each round
    holding, most = set(), 0
    for event, cell in (line.split() for line in (tmp_path / "events").read_text().splitlines()):
        holding = holding | {cell} if event == "start" else holding - {cell}
        most = max(most, len(holding))
    assert most == 2
    again = invocation()
    assert again.returncode != 0 and "waited behind" not in again.stdout + again.stderr
    assert pruned() == set("acdef")


def test_one_cells_selected_evaluations_retrain_evaluate_and_reevaluate_it_on_the_paper_config(tmp_path):
    """The README's rerun of one cell on the paper config (evaluation its own jobs): with every output of GRAFT on
    P1, seed 0 in place (and the cell whose turn it took under the disk budget pruned, as in a finished tree), its
    re-evaluation directory is up to date; with --forcerun on its done.json it plans the training, each evaluation
    job, their collection and the re-evaluation of that cell, and nothing else."""
    results = tmp_path / "results"
    cell = ("graft", "P1", "seed0")
    inputs = [results / "data" / f"{name}.jsonl" for name in ("math_train", "math_validation", "math500", "aime24")]
    inputs += [results / "data" / f"{name}.jsonl" for name in ("aime25", "amc23", "minerva")]
    inputs += [results / "models" / "smollm3", results / "models" / "qwen3"]
    paper = load_config(ROOT / "config" / "paper.yaml")
    cells = training_cells(paper)
    _, turns = disk_turns(paper, cells)
    waited = turns[next(c for c in cells if (c.method, c.cell, f"seed{c.seed}") == cell)]
    inputs.append(results.joinpath("runs", waited.method, waited.cell, f"seed{waited.seed}", "pruned.json"))
    done = results.joinpath("runs", *cell, "done.json")
    parts = [results.joinpath("eval_parts", *cell, f"part{part}") for part in range(7)]
    target = results.joinpath("eval_selected", *cell)
    # each output newer than what it is made from, as a finished run leaves them
    for age, paths in enumerate((inputs, [done], parts, [results.joinpath("eval", *cell)], [target])):
        for path in paths:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.suffix == ".jsonl":  # the workflow's start reads every data file the config names
                path.write_text(json.dumps({"id": "p1", "problem": "What is 1 + 1?", "answer": "2"}) + "\n")
            elif path.suffix:
                path.write_text("{}")
            else:
                path.mkdir()
            os.utime(path, (time.time() - 1000 + 100 * age,) * 2)

    def dry_run(*args):
        cmd = [tool("snakemake"), "--profile", "slurm", target, *args, "--dry-run", *LIST_JOBS]
        cmd += ["--config", f"results={results}", NO_SITE_CHECK]
        return run_in(tmp_path, *cmd, check=True)

    assert job_counts(dry_run()) == {}
    out = dry_run("--forcerun", done)
    assert job_counts(out) == {
        "train": 1,
        "evaluate_checkpoints": 7,
        "collect_evaluations": 1,
        "reevaluate_selected": 1,
    }
    wildcards = re.findall(r"wildcards: method=(\w+), cell=(\w+), seed=(\d+)", out.stdout + out.stderr)
    assert len(wildcards) == 10 and set(wildcards) == {("graft", "P1", "0")}


def test_the_larger_pair_dry_runs_each_training_job_over_two_nodes(tmp_path):
    """config/pair-8b.yaml through the paper's Slurm profile: every training job asks for 2 nodes, one Slurm task
    on each (started by the job's own srun, with the job's CPUs per task: the executor's "mpi" resource), 4 GPUs per
    node and SIGURG 600 s before its time limit."""
    out = run_in(
        tmp_path,
        tool("snakemake"),
        "all",
        "--profile",
        "slurm",
        "--configfile",
        "config/pair-8b.yaml",
        "--dry-run",
        "--config",
        NO_SITE_CHECK,
        *LIST_JOBS,
        check=True,
    )
    counts = job_counts(out)
    assert counts["train"] == 2 * 3 + 3  # grpo_n8 for each model and graft on the pair, 3 seeds each
    train = [line for line in (out.stdout + out.stderr).splitlines() if "cpus_per_task=64" in line]
    assert len(train) == counts["train"]
    assert all("nodes=2, tasks=2, mpi=srun" in line and "gres=gpu:h200:4" in line for line in train), train[0]
    # each cell warned its own longest step and save before its limit (graft.planning.site.stop_lead_seconds)
    cfg = load_config(ROOT / "config/pair-8b.yaml")
    leads = {f"slurm_extra=--signal=URG@{stop_lead_seconds(cfg, c.method, c.models)}" for c in training_cells(cfg)}
    assert {re.search(r"slurm_extra=[^,\s]+", line).group(0) for line in train} == leads
    srun = "srun --nodes 2 --ntasks 2 --ntasks-per-node 1 --cpus-per-task 64 --kill-on-bad-exit=1 python -m graft"
    assert sum(srun in line for line in (out.stdout + out.stderr).splitlines()) == counts["train"]


def test_the_own_pair_example_dry_runs_its_nine_cells_on_local_models(tmp_path):
    """config/examples/own-pair.yaml with tiny model directories in place of its downloads and problems written
    for the test: GRPO n=8 of each model and GRAFT on the pair, 3 seeds each, and nothing to fetch but the two
    benchmarks."""
    config = own_pair_config(tmp_path)
    out = run_in(tmp_path, tool("snakemake"), "all", "--dry-run", "--cores", "2", "--configfile", config, check=True)
    assert job_counts(out) == {
        "fetch_dataset": 2,
        "resolve_methods": 1,
        "train": 9,
        "evaluate_base": 6,
        "evaluate_checkpoints": 9,
        "collect_evaluations": 9,
        "reevaluate_selected": 9,
        "prune_checkpoints": 9,
        "report": 1,
        "all": 1,
    }


def job_resources(proc) -> dict[str, tuple[str, dict[str, str]]]:
    """Each job of a dry run by its id: its rule and the resources Snakemake gives it."""
    jobs = {}
    for block in re.finditer(r"^rule (\w+):\n((?:    .*\n)+)", proc.stdout + proc.stderr, re.M):
        fields = dict(re.findall(r"^    (\w+): (.*)$", block.group(2), re.M))
        resources = dict(item.split("=", 1) for item in fields["resources"].split(", "))
        jobs[fields["jobid"]] = (block.group(1), resources)
    return jobs


def test_a_partition_and_an_account_keep_every_other_resource_of_every_job(paper_dry_run, tmp_path):
    """The site's partitions and account, set in the config's slurm section (here on the command line), reach
    every submitted job and change none of its other resources: the profile's defaults stay (Snakemake's
    --default-resources would have replaced them)."""
    before = job_resources(paper_dry_run)
    site = "slurm={site_check: false, gpu_partition: gpu, cpu_partition: cpu, account: lab}"
    after = job_resources(run_in(tmp_path, tool("snakemake"), *PAPER_DRY_RUN, "--config", site, check=True))
    assert before.keys() == after.keys() and len(before) > 600
    local = {"collect_evaluations", "prune_checkpoints", "all"}  # never submitted
    for jobid, (rule, resources) in after.items():
        added = {"slurm_partition", "slurm_account"} if rule not in local else set()
        assert {k: v for k, v in resources.items() if k not in added} == before[jobid][1], rule
        if added:
            partition = "gpu" if rule in GPU_RULES else "cpu"
            assert (resources["slurm_partition"], resources["slurm_account"]) == (partition, "lab"), rule
    train = next(resources for rule, resources in before.values() if rule == "train")
    assert (train["gres"], train["mem_mb"], train["cpus_per_task"]) == ("gpu:h200:4", "480000", "64")


def test_each_gpu_job_of_the_paper_dry_run_asks_for_its_own_time_limit(paper_dry_run):
    """A GPU job's runtime is its predicted length times slurm.runtime_factor, a training job's plus its stop lead,
    within the site's limit (graft.planning.site.runtime_asks): computed here from the config, found in the job."""
    cfg = load_config(ROOT / "config" / "paper.yaml")
    cells = training_cells(cfg)
    asks = runtime_asks(cfg, cells, job_hours(cfg, cells, checkpoint_steps(cfg)))
    found = {rule: 0 for rule in GPU_RULES}
    for block in re.finditer(r"^rule (\w+):\n((?:    .*\n)+)", paper_dry_run.stdout + paper_dry_run.stderr, re.M):
        rule, fields = block.group(1), dict(re.findall(r"^    (\w+): (.*)$", block.group(2), re.M))
        if rule not in GPU_RULES:
            continue
        wc = dict(item.split("=", 1) for item in fields["wildcards"].split(", "))
        if rule == "evaluate_base":
            key = (wc["model"],)
        else:
            key = (wc["method"], wc["cell"], int(wc["seed"]), *([int(wc["part"])] if "part" in wc else []))
        assert f"runtime={asks[rule][key]}," in fields["resources"], (rule, key)
        found[rule] += 1
    jobs = {rule: len(keys) for rule, keys in asks.items()} | {"evaluate_base": len(base_evaluations(cfg))}
    assert found == jobs


LOCAL_RULES = """
import sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings, StorageSettings
with SnakemakeApi(OutputSettings()) as api:
    workflow = api.workflow(
        resource_settings=ResourceSettings(),
        config_settings=ConfigSettings(configfiles=[Path(sys.argv[1])]),
        storage_settings=StorageSettings(),
        snakefile=Path("Snakefile"),
        workdir=Path("."),
    )._workflow
    print(" ".join(sorted(workflow._localrules)))
"""


@pytest.mark.parametrize("on_submit_host", [True, False])
def test_downloads_run_on_the_submitting_host_unless_the_config_says_otherwise(tmp_path, on_submit_host):
    """``workflow.fetch_on_submit_host`` makes fetch_model and fetch_dataset local rules, so that Slurm never gets
    a job that needs the internet (a dry run cannot show it: Snakemake prints every dry-run job as ``rule``);
    collecting a cell's evaluation jobs' files and pruning its checkpoints are always local."""
    config = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    config.setdefault("workflow", {})["fetch_on_submit_host"] = on_submit_host
    path = tmp_path / "paper.yaml"
    path.write_text(yaml.safe_dump(config))
    out = run_in(tmp_path, sys.executable, "-c", LOCAL_RULES, path, check=True)
    local = out.stdout.strip().splitlines()[-1].split() if out.stdout.strip() else []
    always = ["collect_evaluations", "prune_checkpoints"]
    assert local == sorted([*always, "fetch_dataset", "fetch_model"] if on_submit_host else always)


def test_the_slurm_executor_without_slurm_stops_with_one_line_before_any_job(tmp_path):
    """What a user without Slurm meets: one line naming the missing tools and the local command, no job run."""
    tools = tmp_path / "bin"  # a PATH with what Snakemake needs, and no sbatch or sacct
    tools.mkdir()
    for name in ("bash", "sh", "env", "which", "python3"):
        (tools / name).symlink_to(shutil.which(name))
    results = tmp_path / "results"
    cmd = [tool("snakemake"), "all", "--executor", "slurm", "--jobs", "2", "--configfile", "config/smoke.yaml"]
    cmd += ["--config", f"results={results}"]
    proc = run_in(tmp_path, *cmd, env={**os.environ, "PATH": str(tools)}, timeout=600)
    assert proc.returncode == 1, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("--profile slurm: no sbatch or sacct on this machine's PATH") and "--cores N" in last
    assert not results.exists()  # no job output, and no config snapshot: no job ran


def test_a_run_with_another_config_while_a_workflow_runs_on_the_tree_stops_in_one_line_before_any_job(tmp_path):
    """A workflow on this host (this test's process) has recorded that its jobs run on the tree with another config
    (graft.workflow.live): a run of the smoke config stops in one line naming it, before any job and with nothing
    written; a dry run warns with the same line and plans as usual."""
    results = tmp_path / "results"
    (results / RECORDS).mkdir(parents=True)
    record = {"host": socket.gethostname(), "pid": os.getpid(), "slurm_job": None, "config": "0123456789abcdef.yaml"}
    (results / RECORDS / "other.json").write_text(json.dumps(record) + "\n")
    before = sorted(p.relative_to(results) for p in results.rglob("*"))
    cmd = [tool("snakemake"), "all", "--cores", "1", "--configfile", "config/smoke.yaml"]
    cmd += ["--config", f"results={results}"]
    proc = run_in(tmp_path, *cmd)
    assert proc.returncode == 1, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"graft: error: results {str(results)!r}: another workflow runs jobs on this tree"), last
    assert "configs/0123456789abcdef.yaml, this one configs/" in last and str(results / RECORDS / "other.json") in last
    assert sorted(p.relative_to(results) for p in results.rglob("*")) == before
    dry = run_in(tmp_path, *cmd, "--dry-run", check=True)
    assert "graft: warning: a run now would stop here: results" in dry.stderr and "train" in job_counts(dry)
    assert sorted(p.relative_to(results) for p in results.rglob("*")) == before


def test_a_next_round_whose_config_changed_since_its_invocation_started_plans_nothing(tmp_path):
    """A next round (graft.workflow.rounds) reads the config files again: edited meanwhile, it would plan another
    config, and under changed_runs: retrain retire the cells its first round has just finished. It stops in one
    line before anything is planned; with the same config it plans as usual."""
    results = tmp_path / "results"
    cmd = [tool("snakemake"), "all", "--dry-run", "--cores", "1", "--configfile", "config/smoke.yaml"]
    cmd += ["--config", f"results={results}"]
    proc = run_in(tmp_path, *cmd, env={**os.environ, ROUND_OF: "0123456789abcdef.yaml"})
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("graft: error: the config changed since this invocation started (configs/0123456789abcdef")
    same = re.search(r"now configs/(\w+\.yaml)", last).group(1)
    assert "train" in job_counts(run_in(tmp_path, *cmd, env={**os.environ, ROUND_OF: same}, check=True))
    assert not results.exists()


def recorded_slurm(tmp_path: Path, sinfo: str) -> dict[str, str]:
    """An environment whose Slurm commands print what a cluster's print (``sinfo``: its partitions, recorded)."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("bash", "sh", "env", "which", "python3"):
        (tools / name).symlink_to(shutil.which(name))
    recorded = {"sinfo": sinfo, "scontrol": "ProctrackType           = proctrack/linuxproc"}
    for name in ("sbatch", "sacct", *recorded):
        (tools / name).write_text(f"#!/bin/sh\necho '{recorded.get(name, '')}'\n")
        (tools / name).chmod(0o755)
    return {**os.environ, "PATH": f"{BIN}:{tools}"}


def test_a_dry_run_through_the_slurm_profile_checks_the_site_first_unless_the_config_skips_it(tmp_path):
    """A dry run skips Snakemake's onstart, where a run checks the site, so the workflow checks it while it is
    parsed: here sinfo lists A100s only and the paper config asks for H200s. With slurm.site_check false the dry
    run plans the one cell asked for (without the disk budget, under which a cell asked for alone in a fresh tree
    also trains the cell whose turn it follows), and the summary counts that cell's jobs by the profile it read."""
    results = tmp_path / "results"
    target = results / "eval_selected" / "graft" / "P1" / "seed0"
    no_budget = "workflow={disk_budget_gb: null}"
    cmd = [tool("snakemake"), target, "--profile", "slurm", "--dry-run", "--config", f"results={results}", no_budget]
    env = recorded_slurm(tmp_path, "gpu*|3-00:00:00|gpu:a100:4|64|480000")
    refused = run_in(tmp_path, *cmd, env=env, timeout=600)
    assert refused.returncode == 1, refused.stderr[-2000:]
    lines = refused.stderr.strip().splitlines()
    assert lines[-1] == "slurm.gpu_type: 'h200' is no GPU GRES type of partition 'gpu'; its types: a100"
    assert "Building DAG of jobs..." not in refused.stdout + refused.stderr  # before any job is planned
    cmd.append(NO_SITE_CHECK)
    skipped = run_in(tmp_path, *cmd, env=env, timeout=600)
    assert skipped.returncode == 0, skipped.stderr[-2000:]
    counts = job_counts(skipped)
    assert {rule: counts[rule] for rule in GPU_RULES if rule in counts} == {
        "train": 1,
        "evaluate_checkpoints": 7,
        "reevaluate_selected": 1,
    }
    summary = skipped.stderr.splitlines()
    assert f"graft: targets {target}; executor slurm; profile workflow/profiles/slurm" in summary
    needs = "graft: they need 1 of the config's 56 training cells: graft/P1/seed0;"
    assert any(line.startswith(needs) for line in summary)
    assert "GPU-hours: training 30, evaluation 42, re-evaluation 6" in summary
    assert not results.exists()


def test_a_run_through_slurm_records_the_name_its_jobs_bear_before_the_first_is_submitted(tmp_path):
    """graft.workflow.live's record of a run through the Slurm executor names its jobs by the executor's run id, so
    that a later run can see the jobs a dead controller left queued: here the first sbatch (recorded Slurm
    commands) copies the record and fails, and the record is removed when the run ends."""
    env = recorded_slurm(tmp_path, "debug*|infinite|(null)|2|1000")
    results = tmp_path / "results"
    seen = tmp_path / "seen.json"
    copy = f"import glob, shutil; shutil.copy(*glob.glob('{results}/{RECORDS}/*.json'), '{seen}')"
    (tmp_path / "bin" / "sbatch").write_text(f'#!/bin/sh\n{sys.executable} -c "{copy}"\nexit 1\n')
    cmd = [tool("snakemake"), "all", "--executor", "slurm", "--jobs", "2", "--configfile", "config/smoke.yaml"]
    cmd += ["--slurm-init-seconds-before-status-checks", "1"]  # not the plugin's 40 s before it ends on the failure
    cmd += ["--config", f"results={results}", "slurm={site_check: false}"]
    proc = run_in(tmp_path, *cmd, env=env, timeout=600)
    assert proc.returncode == 1
    run_id = re.search(r"SLURM run ID: (\S+)", proc.stdout + proc.stderr)
    assert run_id, (proc.stdout + proc.stderr)[-2000:]
    record = json.loads(seen.read_text())
    assert record["slurm_run"] == run_id.group(1) and record["pid"] != os.getpid()
    assert not (results / RECORDS).exists()


def test_a_partition_the_cluster_lacks_stops_the_slurm_executor_with_one_line_before_any_job(tmp_path):
    """The site check before the first job (Snakefile onstart): here Slurm's commands print what a one-partition
    cluster's print (recorded), and the config names a GPU partition it does not have."""
    env = recorded_slurm(tmp_path, "debug*|infinite|(null)|2|1000")
    results = tmp_path / "results"
    cmd = [tool("snakemake"), "all", "--executor", "slurm", "--jobs", "2", "--configfile", "config/smoke.yaml"]
    cmd += ["--config", f"results={results}", "slurm={gpu_partition: gpu}"]
    proc = run_in(tmp_path, *cmd, env=env, timeout=600)
    assert proc.returncode == 1, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last == "slurm.gpu_partition: no partition 'gpu' on this cluster (sinfo); partitions: debug"
    assert not results.exists()
