"""Helpers that turn the config into target paths: the cell list comes from graft.planning.plan, every path from
graft.results, the report's files from graft.report.build."""

import json
import sys
from pathlib import Path

import yaml

from graft.config import config_from_dict
from graft.planning.job_lengths import evaluation_parts, job_kinds
from graft.planning.launch import train_launcher
from graft.planning.plan import (
    base_evaluations,
    base_seeds,
    checkpoint_steps,
    disk_turns,
    main_cells,
    summary,
    training_cells,
)
from graft.planning.preflight import environment_problem, site_check, slurm_problem
from graft.planning.site import rule_resources, stop_lead_seconds
from graft.report.build import report_outputs
from graft.results import ResultsTree, write_text

CFG = config_from_dict(config)
R = CFG.results
TREE = ResultsTree(R)
RUN_CONFIG = str(TREE.config)
CELLS = {(c.method, c.cell, c.seed): c for c in training_cells(CFG)}
# The cells rule all runs (workflow.main_cells); rule full runs every cell
MAIN = {(c.method, c.cell, c.seed): c for c in main_cells(CFG, list(CELLS.values()))}
STEPS = checkpoint_steps(CFG)
# workflow.disk_budget_gb: the cell whose pruning each cell waits for before it trains
IN_FLIGHT, DISK_TURN = disk_turns(CFG, list(CELLS.values()))
TOY = CFG.toy is not None
# Training and evaluation of real models run on GPUs: their conda environment takes the CUDA build of torch.
COMPUTE_ENV = "../envs/graft.yaml" if TOY else "../envs/graft-gpu.yaml"
EVAL_IN_TRAIN = CFG.workflow.eval_in_train
# Every job's commands run from workflow.environment's bin/ (graft, torchrun), whatever environment submitted them.
ENVIRONMENT = (
    Path(CFG.workflow.environment).resolve() if CFG.workflow.environment else None
)
if ENVIRONMENT is not None:
    shell.prefix(
        f'set -euo pipefail; export PATH="{ENVIRONMENT}/bin:$PATH" VIRTUAL_ENV="{ENVIRONMENT}"; '
    )
# Wildcard patterns of a training cell's outputs
RUN = TREE.run("{method}", "{cell}", "{seed}")
EVAL_DIR = str(TREE.eval_dir("{method}", "{cell}", "{seed}"))
SELECTED_DIR = str(TREE.selected_eval_dir("{method}", "{cell}", "{seed}"))
EVAL_PART_DIR = str(TREE.eval_part_dir("{method}", "{cell}", "{seed}", "{part}"))
# The checkpoint steps that each evaluation job of a cell evaluates
EVAL_PARTS = evaluation_parts(STEPS, CFG.workflow.eval_checkpoints_per_job)
SELECTION_RUNS = CFG.eval.selection_runs if CFG.eval else 0


def snapshot_config(path, merged):
    """Write the merged configuration (config file plus --config overrides) that every graft command reads,
    while the workflow is parsed and only when its content changed.

    Rules take it as an ancient input and depend on the settings they use through params, so that editing,
    say, the report section does not rerun training. It is no rule's output: a rerun snapshot job would mask
    the params of every job below it for one invocation, and a changed training setting would then need two
    runs of Snakemake to retrain.
    """
    text = yaml.safe_dump(merged, sort_keys=False)
    if not Path(path).is_file() or Path(path).read_text() != text:
        write_text(path, text)


# Jobs that Snakemake spawns (a Slurm job re-parses the workflow) read the snapshot and never write it, so that
# concurrent parses cannot race on it.
if workflow.is_main_process:
    snapshot_config(RUN_CONFIG, config)


wildcard_constraints:
    method="[a-z0-9_]+",
    cell="[A-Za-z0-9_]+",
    seed="[0-9]+",
    model="[A-Za-z0-9_]+",
    part="[0-9]+",


def cell_of(wc):
    return CELLS[(wc.method, wc.cell, int(wc.seed))]


def model_dir(name):
    return CFG.models[name].path


def train_inputs(wc):
    c = cell_of(wc)
    inputs = {
        "config": ancient(RUN_CONFIG),
        "data": CFG.data.train,
        "models": [model_dir(m) for m in c.models],
    }
    if c.peer is not None:
        inputs["peer"] = str(TREE.run("grpo_n8", c.peer, c.seed).done)
    if c in DISK_TURN:  # ancient: re-pruning that cell later must not retrain this one
        inputs["disk_turn"] = ancient(str(DISK_TURN[c].run_dir(TREE).pruned))
    return inputs


def all_eval_outputs(cells):
    """For training ``cells``: the base evaluations of their models (one per seed of the model's GRPO n=8 cells)
    and one evaluation directory per cell."""
    models = [m for m in CFG.models if any(m in c.models for c in cells)]
    files = [str(TREE.base_eval(m, s)) for m in models for s in base_seeds(CFG, m)]
    files += [str(TREE.eval_dir(c.method, c.cell, c.seed)) for c in cells]
    if SELECTION_RUNS:
        files += [str(TREE.selected_eval_dir(c.method, c.cell, c.seed)) for c in cells]
    return files


def train_settings():
    """What a training cell depends on; a change here (not in comments or reports) reruns training."""
    sections = {
        # whether a finished run keeps its resume state changes nothing it computes
        "train": {k: v for k, v in vars(CFG.train).items() if k != "keep_resume_state"},
        "models": CFG.models,
        "data": CFG.data,
        "reward": CFG.reward,
        "methods": CFG.methods,
        "scale": CFG.scale,
    }
    return json.dumps(sections, default=lambda o: o.__dict__, sort_keys=True)


def train_nodes():
    """A training job's nodes; several: one Slurm task per node, each a torchrun (graft.planning.launch), which the
    job's command starts with srun itself (the Slurm executor's "mpi" resource: no srun around the command).
    """
    n = CFG.scale.nodes
    return {"nodes": n, **({"tasks": n, "mpi": "srun"} if n > 1 else {})}


def site_resources(rule):
    """``rule``'s Slurm resources from the config's ``slurm`` section (graft.planning.site): the one place of the
    site's partitions, account, GPU type and time limit."""
    return rule_resources(CFG, rule)


def stop_signal():
    """Slurm's warning before a training job's time limit (``slurm_extra``), its lead each cell's longest step and
    save (graft.planning.site.stop_lead_seconds); nothing where the step time has no figures (a CPU config).
    """
    leads = {}
    for c in CELLS.values():
        key = (c.method, c.models)
        if key not in leads:
            leads[key] = stop_lead_seconds(CFG, c.method, c.models)
    if not leads or None in leads.values():
        return {}
    return {
        "slurm_extra": lambda wc: f"--signal=URG@{leads[(wc.method, cell_of(wc).models)]}"
    }


def slurm_site_problem():
    """Why the Slurm executor cannot run this workflow on this cluster, in lines, or None: no Slurm commands here, or
    the site (graft.planning.preflight.site_check); its warnings go to stderr."""
    if problem := slurm_problem():
        return problem
    kinds = job_kinds(CFG, list(CELLS.values()), STEPS, base_evaluations(CFG))
    problems, warnings = site_check(CFG, kinds, workflow.execution_settings.retries + 1)
    for warning in warnings:
        print(warning, file=sys.stderr)
    return "\n".join(problems) or None


def eval_settings():
    return json.dumps(
        {"eval": CFG.eval, "reward": CFG.reward, "models": CFG.models},
        default=lambda o: o.__dict__,
        sort_keys=True,
    )


REPORT = report_outputs(CFG, MAIN.values(), TREE.report)
REPORT_FULL = (
    REPORT if MAIN == CELLS else report_outputs(CFG, CELLS.values(), TREE.report_full)
)


def all_targets(cells, report):
    """The ``report`` of training ``cells``, and each cell's checkpoints pruned once it is evaluated (unless
    workflow.keep_checkpoints)."""
    pruned = (
        []
        if CFG.workflow.keep_checkpoints
        else [str(c.run_dir(TREE).pruned) for c in cells]
    )
    return [
        str(TREE.methods),
        str(report.summary),
        *map(str, report.tables),
        *map(str, report.figures),
        *pruned,
    ]


def hf_home_prefix():
    """``HF_HOME=...`` for the download rules when ``workflow.hf_home`` is set (their shell commands start
    with it)."""
    return f"HF_HOME={CFG.workflow.hf_home} " if CFG.workflow.hf_home else ""
