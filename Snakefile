import signal
import sys
from pathlib import Path

from snakemake.utils import min_version, validate

from graft.config import config_from_dict, parse_config_strings
from graft.errors import ConfigError
from graft.services.preemption import preempt_mode, retry_preempted_jobs
from graft.typed_config import load_yaml
from graft.workflow import live

min_version("8.0")


# The embedded default, unless config files are given with --configfile: Snakemake would otherwise merge them
# into the default key by key, and a smaller config would inherit the default's extra models and pairs.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


# Snakemake reads config files as YAML 1.1 (lr: 1e-6 is text there) and --config values as text: each is read
# as its field's type, and each file is read again by graft's loader, which refuses a duplicate key that
# Snakemake's would let the second occurrence win. graft's check comes first: a bad field is one line naming it
# and the nearest valid name, as from graft itself; the schema then fills in the defaults.
try:
    for path in workflow.configfiles:
        load_yaml(Path(path).read_text(), f"--configfile {path}")
    config.update(parse_config_strings(config))
    config_from_dict(config)
except ConfigError as err:
    sys.exit(f"graft: error: {err}")
validate(config, "workflow/schemas/config.schema.yaml")


report: "workflow/report/workflow.rst"


include: "rules/common.smk"
include: "rules/config.smk"
include: "rules/data.smk"
include: "rules/models.smk"
include: "rules/train.smk"
include: "rules/eval.smk"
include: "rules/report.smk"
include: "rules/prune.smk"


# Compute nodes of many clusters have no internet: downloads run where Snakemake runs (workflow.fetch_on_submit_host).
if CFG.workflow.fetch_on_submit_host and not TOY:

    localrules:
        fetch_model,
        fetch_dataset,


# The site is checked before anything is submitted to Slurm: a run when its jobs start (onstart), a dry run, which
# skips onstart, here; then what a person reads before submitting: the cells the targets need, their jobs and
# GPU-hours per rule, and the disk's peak.
if INVOCATION is not None:
    if (
        workflow.output_settings.dryrun
        and INVOCATION.executor == "slurm"
        and (problem := slurm_site_problem(INVOCATION.retries))
    ):
        sys.exit(problem)
    if not TOY:
        print(summary(CFG, list(CELLS.values()), NEEDED, INVOCATION), file=sys.stderr)
    if workflow.output_settings.dryrun and (
        problem := live.conflict(TREE.root, RUN_CONFIG)
    ):
        print(f"graft: warning: a run now would stop here: {problem}", file=sys.stderr)


onstart:
    if workflow.executor_plugin.name == "slurm" and (
        problem := slurm_site_problem(workflow.execution_settings.retries)
    ):
        sys.exit(problem)
    if ENVIRONMENT is not None and (problem := environment_problem(ENVIRONMENT)):
        sys.exit(problem)
    if workflow.is_main_process and (problem := results_disk_problem()):
        sys.exit(problem)
    # the Slurm executor plugin waits forever on a preempted job that Slurm does not requeue: retried instead
    if workflow.executor_plugin.name == "slurm":
        retry_preempted_jobs(
            sys.modules["snakemake_executor_plugin_slurm"], preempt_mode()
        )
    if workflow.is_main_process:
        # one config per tree while its jobs run (graft.workflow.live); a dry run warns of the same, above
        try:
            live.start(TREE.root, RUN_CONFIG, slurm_run_name(), CONTROLLER)
        except ConfigError as err:
            sys.exit(f"graft: error: {err}")
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, record_interrupt)
        snapshot_config()
        export_attempts()


# Under a disk budget Snakemake runs no cell waiting behind one that failed for good in this invocation: a
# --keep-going invocation runs again, in which they wait in another lane (graft.workflow.rounds), and says so.
onerror:
    held_behind_failures()


rule all:
    """The main job: the cells of workflow.main_cells (every cell where it names none) and their report."""
    default_target: True
    input:
        all_targets(MAIN.values(), REPORT),


rule full:
    """Every cell of the config and their report (report_full/ where rule all runs fewer)."""
    input:
        all_targets(CELLS.values(), REPORT_FULL),
