"""Helpers that turn the config into target paths: the cell list comes from graft.planning.plan, every path from
graft.results, the report's files from graft.report.build."""

import hashlib
import inspect
import json
import os
import shlex
import signal
import sys
from pathlib import Path

import yaml

from graft.config import config_from_dict
from graft.errors import ConfigError
from graft.names import NAME_PATTERN
from graft.planning.data import check_data
from graft.planning.job_lengths import (
    evaluation_parts,
    job_hours,
    job_kinds,
    training_work,
)
from graft.planning.launch import train_launcher
from graft.planning.plan import (
    base_seeds,
    checkpoint_steps,
    disk_problem,
    disk_turns,
    main_cells,
    training_cells,
)
from graft.planning.preflight import environment_problem, pre_submission_check
from graft.workflow.failures import ATTEMPTS_ENV
from graft.workflow.reruns import (
    ABSENT,
    TOY_MODEL_LABELS,
    changed_runs,
    changed_runs_message,
    eval_params,
    methods_params,
    param_fields,
    reevaluate_params,
    report_params,
    retrain_changed,
    stored_identity,
    toy_data_params,
    toy_model_params,
    train_params,
)
from graft.planning.site import rule_resources, runtime_asks, stop_lead_seconds
from graft.planning.turns import failed_cells
from graft.planning.targets import Invocation, Stage, needed_cells, runs_jobs, summary
from graft.report.build import report_outputs
from graft.results import ResultsTree, write_text
from graft.workflow import live
from graft.workflow.rounds import ROUND_OF, after_failures
from graft.train.run_state import IDENTITY

CFG = config_from_dict(config)
# every data file the config names is read before any job: the first bad line, or a file that no rule makes, is one
# line now rather than a failed job on a GPU node
if workflow.is_main_process:
    try:
        check_data(CFG)
    except ConfigError as err:
        sys.exit(f"graft: error: {err}")
R = CFG.results
TREE = ResultsTree(R)
# The merged config (config file plus --config overrides) every job reads, named by its content: written when jobs
# run (onstart), never by a dry run, and never changed: a later invocation with another config writes another
# file, so a pending job or its retry reads the config it was planned with. A Slurm job re-parses the workflow with
# the same config and finds the same name.
SNAPSHOT_TEXT = yaml.safe_dump(config, sort_keys=False)
RUN_CONFIG = str(
    TREE.config_snapshot(hashlib.sha256(SNAPSHOT_TEXT.encode()).hexdigest()[:16])
)
# A next round of this invocation (graft.workflow.rounds) runs with its config or not at all
if (
    workflow.is_main_process
    and os.environ.get(ROUND_OF, Path(RUN_CONFIG).name) != Path(RUN_CONFIG).name
):
    sys.exit(
        f"graft: error: the config changed since this invocation started (configs/{os.environ[ROUND_OF]}, now "
        f"configs/{Path(RUN_CONFIG).name}): its next round is not run; run the command again to plan with it"
    )
# The Slurm job this invocation runs in, read before the Slurm executor drops SLURM_* from the environment
CONTROLLER = live.controller_job() if workflow.is_main_process else (None, None)
CELLS = {(c.method, c.cell, c.seed): c for c in training_cells(CFG)}
# The cells rule all runs (workflow.main_cells); rule full runs every cell
MAIN = {(c.method, c.cell, c.seed): c for c in main_cells(CFG, list(CELLS.values()))}
STEPS = checkpoint_steps(CFG)
# workflow.disk_budget_gb: the cell whose pruning each cell waits for before it trains; a cell whose training failed
# on its last attempt (its failed.json) keeps its place, and the cells behind it move (graft.planning.turns)
try:
    FAILED = failed_cells(list(CELLS.values()), TREE)
except ConfigError as err:
    sys.exit(f"graft: error: {err}")
IN_FLIGHT, DISK_TURN = disk_turns(CFG, list(CELLS.values()), FAILED)
# Snakemake's job priorities, higher first: training jobs by their work, so that the longest start first and short
# jobs fill the end (graft.planning.job_lengths.training_work); the jobs that finish a trained cell (its evaluations,
# its pruning) before any training job, since pruning frees the disk that cells behind it wait for
TRAIN_WORK = training_work(CFG, list(CELLS.values()))
FINISHING = 1 + max(TRAIN_WORK.values(), default=0)
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


def snapshot_param(wc, output):
    """The config snapshot's path as a rule's param. Derived from the output, so Snakemake does not compare it: its
    name changes with every config edit, and the settings each job computes from are params of their own.
    """
    return RUN_CONFIG


def snapshot_config():
    """Write the config snapshot the jobs read (RUN_CONFIG) where it is missing, and the tree's config.yaml, the
    latest one, for people and for graft commands run by hand.

    It is no rule's input or output: rules name it in their commands and depend on the settings they use through
    params (graft.workflow.reruns), so that editing, say, the report section reruns no training. Jobs that
    Snakemake spawns (a Slurm job re-parses the workflow) never write it.
    """
    if not Path(RUN_CONFIG).is_file():
        write_text(RUN_CONFIG, SNAPSHOT_TEXT)
    if not TREE.config.is_file() or TREE.config.read_text() != SNAPSHOT_TEXT:
        write_text(TREE.config, SNAPSHOT_TEXT)


# graft's naming check (graft/names.py) and the workflow's paths match the same names
wildcard_constraints:
    method=NAME_PATTERN,
    cell=NAME_PATTERN,
    seed="[0-9]+",
    model=NAME_PATTERN,
    part="[0-9]+",


def cell_eval_dirs(c):
    """Where a training cell's evaluations go: the evaluation jobs' parts, their collection and the re-evaluation."""
    parts = [
        EVAL_PART_DIR.format(method=c.method, cell=c.cell, seed=c.seed, part=p)
        for p in range(len(EVAL_PARTS))
    ]
    return [
        TREE.eval_dir(c.method, c.cell, c.seed),
        TREE.selected_eval_dir(c.method, c.cell, c.seed),
        *map(Path, parts),
    ]


def snakemake_invocation():
    """What Snakemake was asked (graft.planning.targets.Invocation), where this main process parses the workflow
    to build its jobs, a dry run's included; None elsewhere (--lint, a job's own process). While the workflow is
    parsed, workflow.dag_settings holds no targets yet and the executor is set only when the jobs start, so both
    come from the Snakemake objects that are parsing it: the targets from its DAG API (snakemake.api.DAGApi), the
    executor, profiles and retries from the arguments of its command line (snakemake.cli.args_to_api's). Under
    Snakemake's API, with no command line, the executor is unknown."""
    if not workflow.is_main_process:
        return None
    targets = args = None
    # where Snakemake started, which reads the profiles from there: --directory has changed to the working directory
    started = Path.cwd()
    frame = inspect.currentframe()
    while frame is not None:
        owner = frame.f_locals.get("self")
        if targets is None and type(owner).__name__ == "DAGApi":
            targets = list(owner.dag_settings.targets or [])
            handler = owner.workflow_api._workdir_handler
            started = getattr(handler, "olddir", None) or started
        if frame.f_code.co_name == "args_to_api":
            args = frame.f_locals.get("args")
        frame = frame.f_back
    if targets is None:
        return None
    if args is None:
        return Invocation(targets, None)
    from snakemake.cli import get_profile_dir

    found = [
        get_profile_dir(str(started / name)) or get_profile_dir(name)
        for name in args.profile or []
    ]
    real = [Path(os.path.realpath(f[0])) for f in found if f]
    here = Path.cwd()
    profiles = [p.relative_to(here) if p.is_relative_to(here) else p for p in real]
    return Invocation(
        targets,
        args.executor,
        profiles,
        args.retries or 0,
        list(sys.argv),
        started,
        runs_jobs(args),
    )


INVOCATION = snakemake_invocation()
# Whether this invocation plans or runs jobs: not --lint, --unlock, --summary, --report and the like, on which
# nothing below may act
PLANS_JOBS = INVOCATION is not None and INVOCATION.runs_jobs


# Training runs in the tree made with other settings than this config's (graft.workflow.reruns): the workflow stops
# before any job, a dry run too, unless workflow.changed_runs says to keep or retrain them.
CHANGED = changed_runs(CFG, list(CELLS.values()), TREE)
if CHANGED and CFG.workflow.changed_runs == "stop" and PLANS_JOBS:
    sys.exit(changed_runs_message(CHANGED, TREE))
# retrain: each such run's records and evaluations are moved aside now, before the jobs are planned, so that every
# one of them trains anew, whatever Snakemake recorded of it (a copied tree has no record); a dry run moves nothing
if CHANGED and CFG.workflow.changed_runs == "retrain" and PLANS_JOBS:
    # not while a workflow of another config runs jobs on this tree: they may still read these runs
    if not workflow.output_settings.dryrun and (
        problem := live.conflict(TREE.root, RUN_CONFIG)
    ):
        sys.exit(f"graft: error: {problem}")
    try:
        for line in retrain_changed(
            CHANGED, TREE, cell_eval_dirs, workflow.output_settings.dryrun
        ):
            print(line, file=sys.stderr)
    except ConfigError as err:
        sys.exit(f"graft: error: {err}")
# keep: a kept run's own record is its cell's params, so Snakemake sees nothing to rerun
KEPT = (
    {c: stored_identity(c, TREE) for c in CHANGED}
    if CFG.workflow.changed_runs == "keep"
    else {}
)


# Why this invocation's jobs stopped before they all ran, where the user or the executor stopped them
STOPPED = []


def record_interrupt(number, frame):
    """SIGINT (Ctrl-C): remembered, then Python's KeyboardInterrupt, on which Snakemake cancels the jobs."""
    STOPPED.append("stopped (Ctrl-C)")
    signal.default_int_handler(number, frame)


def stop_reason():
    """Why this invocation ended early, in words, None where its jobs ran to their ends: Ctrl-C, SIGTERM (which
    Snakemake's scheduler records as a user kill) or the executor's error."""
    scheduler = workflow.scheduler
    if STOPPED:
        return STOPPED[0]
    if getattr(scheduler, "_user_kill", None):
        return "stopped (SIGTERM)"
    if getattr(scheduler, "_executor_error", None) is not None or getattr(
        scheduler, "running", None
    ):
        return "ended by its executor's error"
    return None


def held_behind_failures():
    """Where cells waited in vain behind cells that failed for good in this invocation, say so and, with
    --keep-going, run the next round for them (graft.workflow.rounds)."""
    try:
        failed_now = failed_cells(list(CELLS.values()), TREE)
    except ConfigError as err:
        print(f"graft: error: {err}", file=sys.stderr)
        return
    dag = workflow.dag_settings
    after_failures(
        DISK_TURN,
        FAILED,
        failed_now,
        lambda c: c.run_dir(TREE).done.exists(),
        lambda c: f"{c.method}/{c.cell}/seed{c.seed}",
        workflow.execution_settings.keep_going,
        INVOCATION.command if INVOCATION else None,
        INVOCATION.started if INVOCATION else Path.cwd(),
        stopped=stop_reason(),
        forced=bool(dag.forceall or dag.forcerun or dag.forcetargets),
        env={ROUND_OF: Path(RUN_CONFIG).name},
    )


def slurm_run_name():
    """The name of every job the Slurm executor submits in this invocation, its run id (the executor's run_uuid in
    snakemake-executor-plugin-slurm 2.8.0, made before onstart runs), None under another executor.
    """
    if workflow.executor_plugin.name != "slurm":
        return None
    return getattr(getattr(workflow.scheduler, "_executor", None), "run_uuid", None)


def cell_of(wc):
    return CELLS[(wc.method, wc.cell, int(wc.seed))]


def model_dir(name):
    return CFG.models[name].path


def train_inputs(wc):
    c = cell_of(wc)
    inputs = {
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


def train_settings(c):
    """What a training cell computes from (graft.workflow.reruns.train_params): a change reruns its job."""
    kept = KEPT.get(c)
    if kept is not None:
        kept = {k: kept.get(k) for k in (*IDENTITY, "steps")}
    return train_params(CFG, c, TREE, kept)


def setting_params(settings, key=lambda wc: None):
    """A rule's params that Snakemake reruns its jobs on, one per setting (graft.workflow.reruns.param_fields), so
    that the reason Snakemake gives names the fields that changed. ``settings``: each job's key -> the arguments of
    param_fields (its settings' JSON text, its models); ``key``: a job's key from its wildcards. Every job has a
    param for each setting of any job of the rule, ABSENT where it has none."""
    fields = {job: param_fields(*args) for job, args in settings.items()}
    slots = sorted({slot for each in fields.values() for slot in each})
    params = {"settings": ABSENT}
    for slot in slots:
        params[f"setting_{slot}"] = lambda wc, slot=slot: fields[key(wc)].get(
            slot, ABSENT
        )
    return params


def cell_key(wc):
    return (wc.method, wc.cell, int(wc.seed))


def model_key(wc):
    return wc.model


def train_nodes():
    """A training job's nodes; several: one Slurm task per node, each a torchrun (graft.planning.launch), which the
    job's command starts with srun itself (the Slurm executor's "mpi" resource: no srun around the command).
    """
    n = CFG.scale.nodes
    return {"nodes": n, **({"tasks": n, "mpi": "srun"} if n > 1 else {})}


# Each GPU job's time limit: its predicted length x slurm.runtime_factor, a training job's plus its stop lead,
# within the site's limit (graft.planning.site.runtime_asks), by rule and wildcards
ASKS = runtime_asks(
    CFG, list(CELLS.values()), job_hours(CFG, list(CELLS.values()), STEPS)
)


def job_key(rule_name, wc):
    """A GPU job's key in ASKS (graft.planning.job_lengths.job_hours)."""
    if rule_name == "evaluate_base":
        return (wc.model,)
    key = (wc.method, wc.cell, int(wc.seed))
    return (*key, int(wc.part)) if rule_name == "evaluate_checkpoints" else key


def site_resources(rule_name):
    """``rule_name``'s Slurm resources from the config's ``slurm`` section (graft.planning.site): the one place of
    the site's partitions, account, GPU type and time limits; a job with a predicted length asks for its own
    (ASKS)."""
    resources = rule_resources(CFG, rule_name)
    if rule_name in ASKS:
        resources["runtime"] = lambda wc: ASKS[rule_name][job_key(rule_name, wc)]
    return resources


def stop_signal():
    """Slurm's warning before a training job's time limit (``slurm_extra``), its lead each cell's longest step and
    save (graft.planning.site.stop_lead_seconds); nothing where the step time has no figures (CPU jobs, or a GPU
    without a peak).
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


# The cells the invocation's targets need, and how far: what the summary and the site check count
NEEDED = (
    None
    if INVOCATION is None
    else needed_cells(CFG, list(CELLS.values()), INVOCATION.targets, TREE, DISK_TURN)
)


def results_disk_problem():
    """Why the outputs of the cells this invocation needs will not fit under results:, in one line naming the
    workflow.disk_budget_gb to set, or None (graft.planning.plan.disk_problem; the summary warns of the same).
    """
    if TOY:
        return None
    if NEEDED is None:
        return disk_problem(CFG, list(CELLS.values()))
    return disk_problem(CFG, NEEDED.cells(), NEEDED.base)


def export_attempts():
    """Tell the jobs how many attempts a job has (graft.workflow.failures: a training job's last records its
    failure): Snakemake starts each with its attempt but without the retries, and they inherit this environment.
    """
    os.environ[ATTEMPTS_ENV] = str(workflow.execution_settings.retries + 1)


def slurm_site_problem(retries):
    """Why the Slurm executor cannot run this invocation's jobs on this cluster, in lines, or None
    (graft.planning.preflight.pre_submission_check: no Slurm commands here, or the site); its warnings go to
    stderr. ``retries``: Snakemake's, which chain a training run's jobs. Nothing with ``slurm.site_check: false``.
    """
    if not CFG.slurm.site_check:
        return None
    kinds = job_kinds(
        CFG,
        NEEDED.cells(),
        STEPS,
        NEEDED.base,
        evaluated=NEEDED.cells(Stage.EVALUATED),
        reevaluated=NEEDED.cells(Stage.REEVALUATED),
    )
    problems, warnings = pre_submission_check(CFG, kinds, retries + 1)
    for warning in warnings:
        print(warning, file=sys.stderr)
    return "\n".join(problems) or None


def eval_settings(models):
    """What an evaluation of ``models`` computes from (graft.workflow.reruns.eval_params), as setting_params
    takes it."""
    return json.dumps(eval_params(CFG, models), sort_keys=True), models


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
