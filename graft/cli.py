"""The ``graft`` command line: parses arguments and calls the package; no logic of its own beyond checking that
the arguments fit together. Bad input exits with code 2 and one line on stderr (docs/design.md section 9)."""

from __future__ import annotations

import argparse
import errno
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import yaml

import graft
from graft.config import RunConfig, load_config, read_yaml
from graft.errors import Busy, ConfigError
from graft.methods import PRESETS, Method, get_method, resolve_all, with_switches
from graft.names import check_name
from graft.numerics import check_mode
from graft.paths import check_input, check_output, describe
from graft.results import ResultsTree, RunDir, is_pruned, write_text
from graft.services.caches import node_local_caches
from graft.services.offline import go_offline
from graft.services.progress import Progress
from graft.typed_config import Count, NonNegativeInt, Probability, Seed, coerce, field_types, load_yaml, read_option

USAGE = (
    "GRAFT (arXiv 2609.37868): co-train two language models with GRPO on verifiable math, exchanging whole groups "
    "of responses where one model fails every sample and the other does not. Train one cell (GRPO, a co-trained "
    "pair or a replay of stored trajectories), evaluate checkpoints, build the report's tables and figures, or "
    "build the CPU miniature's toy world. The Snakemake workflow runs these for a whole config: "
    "`snakemake --cores 2 all` (the miniature) or `snakemake --profile slurm all` (the paper)."
)

_PROGRESS = Progress()

DEFAULT_PROFILE = Path("workflow/profiles/slurm")
"""The paper's Slurm profile, relative to the repository root, where ``graft plan`` finds its time limits."""


def _log_event(event: str, **fields) -> None:
    """Progress: JSON Lines on stderr (logs, Slurm), bars and lines on a terminal (graft.services.progress)."""
    _PROGRESS.emit(event, **fields)


def _set_threads(threads: int | None) -> None:
    if threads:
        import torch

        torch.set_num_threads(threads)


def _cmd_methods(args: argparse.Namespace) -> int:
    if args.out:
        check_output("--out", args.out, "file", {"--config": args.config})
    # the config's user presets alone, checked as loading it checks them: the rest may name models not yet fetched
    section = (read_yaml(args.config).get("methods") or {}) if args.config else {}
    custom = coerce(section, field_types(RunConfig)["methods"], "methods")
    resolve_all(custom)
    if args.name:
        note = PRESETS[args.name].note if args.name in PRESETS else ""
        if note:
            print(f"# {note}")
        print(yaml.safe_dump({args.name: get_method(args.name, custom).to_dict()}, sort_keys=False), end="")
    elif args.out:
        write_text(args.out, yaml.safe_dump(resolve_all(custom), sort_keys=False))
    else:
        width = max(len(name) for name in PRESETS)
        print(f"{'preset':<{width}}  table  label")
        for name, preset in PRESETS.items():
            print(f"{name:<{width}}  {preset.table:<5}  {preset.label}")
        notes = [(name, preset.note) for name, preset in PRESETS.items() if preset.note]
        if notes:
            print("\nDefinitions the paper leaves open:")
            for name, note in notes:
                print(f"  {name}: {note}")
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    from graft.engine.distributed import close_world, end_process, init_world
    from graft.train.request import TrainRequest
    from graft.train.stop import EXIT_CODE, TrainingStopped
    from graft.train.trainer import Trainer

    check_output("--out", args.out, "directory", {"--config": args.config})
    if args.eval_dir is not None:
        check_output("--eval-dir", args.eval_dir, "directory", {"--out": args.out})
    for archive in args.peer_archive or ():
        check_input("--peer-archive", archive, "directory")
    switches = {key.removeprefix("method."): value for key, value in args.settings if key.startswith("method.")}
    config = load_config(args.config, [(key, value) for key, value in args.settings if not key.startswith("method.")])
    method = get_method(args.method, config.methods)
    request = TrainRequest(
        config=config,
        method=with_switches(method, switches, "method") if switches else method,
        models=args.models,
        seed=args.seed,
        out=args.out,
        steps=args.steps if args.steps is not None else config.train.steps,
        peer_archives=tuple(args.peer_archive or ()),
        resume=args.resume,
        overwrite=args.overwrite,
        retrain=args.retrain,
        keep_evals=tuple(args.keep_evals or ()),
        eval_dir=args.eval_dir,
        force_unlock=args.force_unlock,
    )
    _set_threads(args.threads)
    world = init_world(config.scale.process_group_timeout_s)
    try:
        Trainer(request, world).run(log=lambda fields: _log_event("step", **fields))
    except TrainingStopped as stopped:
        if world.is_main:
            _log_event("stopped", reason=str(stopped), next_step=stopped.next_step)
        close_world(world)  # every process stopped after the same collective save
        return end_process(world, EXIT_CODE)
    except BaseException:
        close_world(world, wait=False)
        raise
    close_world(world)
    return end_process(world, 0)


def _cmd_archive_import(args: argparse.Namespace) -> int:
    from graft.data.imports import import_archive

    if args.source_model is not None:
        check_input("--source-model", args.source_model, "directory")
    check_output("--out", args.out, "directory", {"--in": args.input, "--source-model": args.source_model})
    config = load_config(args.config)
    manifest = import_archive(
        config,
        args.model,
        args.format,
        args.input,
        args.out,
        source=args.source_model,
        min_match=args.min_match,
        log=lambda **fields: _log_event("import_step", **fields),
    )
    _log_event("imported", steps=len(manifest["steps"]), matched=manifest["matched_prompts"], out=str(args.out))
    return 0


def _cmd_toy(args: argparse.Namespace) -> int:
    from graft.toy.world import build_world

    config = load_config(args.config)
    root = args.out if args.out is not None else ResultsTree(config.results).toy
    check_output("--out" if args.out is not None else "results", root, "directory", {"--config": args.config})
    if args.summary:
        check_output("--summary", args.summary, "file", {"--config": args.config})
    # the threads go to build_world, which loads torch only where it builds a model
    summary = build_world(config, args.toy_command, root, getattr(args, "name", None), _log_event, threads=args.threads)
    if args.summary:
        write_text(args.summary, json.dumps(summary, indent=2) + "\n")
    return 0


def _cmd_complementarity(args: argparse.Namespace) -> int:
    from graft.eval.complementarity import complementarity

    config = load_config(args.config)
    files = args.data or [Path(config.data.validation or config.data.train)]
    if args.out:
        inputs = {"--config": args.config, **{f"--data {str(f)!r}": f for f in files}}
        check_output("--out", args.out, "file", inputs)
    _set_threads(args.threads)
    report = complementarity(
        config, args.models, files, prompts=args.prompts, n=args.n, seed=args.seed, delta=args.delta
    )
    text = json.dumps(report, indent=2)
    if args.out:
        write_text(args.out, text + "\n")
    print(text)
    return 0


def _training_run(path: Path) -> RunDir:
    """``--run``: a training run's directory, refused with one line when it holds no run.json."""
    run = RunDir(path)
    if not run.run_json.is_file():
        raise ConfigError(f"--run: {str(path)!r} is not a training run (no run.json)")
    return run


def _run_models(run: RunDir) -> list[str]:
    """The models a training run trained, from its run.json; one that is not readable is refused in one line."""
    try:
        models = json.loads(run.run_json.read_bytes().decode("utf-8"))["models"]
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
        models = None
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        raise ConfigError(f"--run: {str(run.run_json)!r} is not a run record with a list of 'models'")
    return models


def _evaluation_jobs(args: argparse.Namespace, config) -> list[tuple[str, Path, Path]]:
    """(model, checkpoint, result file) for ``--checkpoint`` or for every checkpoint of ``--run``."""
    from graft.eval.evaluate import check_checkpoint, check_pruned, checkpoint_step, run_jobs

    if (args.checkpoint is None) == (args.run is None):
        raise ConfigError("evaluate: give either --checkpoint DIR with --model and --out, or --run DIR with --out-dir")
    if args.checkpoint is not None:
        if args.out is None or args.model is None:
            raise ConfigError("evaluate: --checkpoint needs --model and --out")
        if args.steps is not None:
            raise ConfigError("--steps: only with --run (a run's checkpoints by step)")
        jobs = [(args.model, args.checkpoint, args.out)]
    else:
        if args.out_dir is None:
            raise ConfigError("--out-dir: required with --run")
        run = _training_run(args.run)
        trained = _run_models(run)
        if args.model is not None and args.model not in trained:
            raise ConfigError(
                f"--model: {args.model!r} is not a model of the run {str(args.run)!r}; its models (run.json): "
                f"{', '.join(trained)}"
            )
        models = [args.model] if args.model else trained
        jobs = run_jobs(run, models, args.out_dir)
        for model in models:
            if not any(job[0] == model for job in jobs):
                raise ConfigError(f"--run: {str(args.run)!r} has no checkpoints of model {model!r}")
        if args.steps is not None:
            steps, saved = args.steps, {checkpoint_step(ckpt) for _, ckpt, _ in jobs}
            missing = sorted(steps - saved)
            if missing:
                have = ", ".join(map(str, sorted(saved)))
                raise ConfigError(f"--steps: {str(args.run)!r} has no checkpoint of step {missing[0]}; it has {have}")
            jobs = [job for job in jobs if checkpoint_step(job[1]) in steps]
    for model, _, _ in jobs:
        if model not in config.models:
            raise ConfigError(f"--model: unknown model {model!r}; models: {', '.join(config.models)}")
    what = "--checkpoint" if args.run is None else "--run"
    # a pruned checkpoint has no model left to check: graft.eval.evaluate.check_pruned checks its kept result
    jobs = [
        (model, ckpt if is_pruned(ckpt) else check_checkpoint(config, model, ckpt, what), out)
        for model, ckpt, out in jobs
    ]
    if args.run is not None:
        for model, ckpt, _ in jobs:
            check_pruned(config, run, model, ckpt, args.seed)
    return jobs


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from graft.engine.reward import Grader
    from graft.eval.evaluate import Evaluator, checkpoint_step, evaluate_kept

    if args.out is not None:
        check_output("--out", args.out, "file", {"--config": args.config, "--checkpoint": args.checkpoint})
    if args.out_dir is not None:
        check_output("--out-dir", args.out_dir, "directory", {"--run": args.run})
    config = load_config(args.config)
    if config.eval is None:
        raise ConfigError("eval: this config has no 'eval:' section naming the benchmarks")
    jobs = _evaluation_jobs(args, config)
    _set_threads(args.threads)
    log = lambda **fields: _log_event("eval_benchmark", **fields)  # noqa: E731
    with (
        Grader(config.reward.kind, config.reward.timeout, config.reward.workers) as grader,
        Evaluator(config, grader, args.seed, log=log) as evaluate_one,
    ):
        run = None if args.run is None else _training_run(args.run)
        for model, checkpoint, out in jobs:
            if run is None:
                result, computed = evaluate_one(model, checkpoint, out), True
            else:  # a run's evaluations are kept beside it: a retried job redoes only what is missing
                kept = run.kept_evaluation(model, checkpoint_step(checkpoint))
                result, computed = evaluate_kept(evaluate_one, model, checkpoint, out, kept)
            event = "evaluate" if computed else "evaluate_kept"
            _log_event(event, model=model, step=result["step"], average=round(result["average"], 4))
    return 0


def _cmd_reevaluate(args: argparse.Namespace) -> int:
    from graft.engine.reward import Grader
    from graft.eval.evaluate import Evaluator
    from graft.eval.reevaluate import reevaluate_selected

    check_output("--out-dir", args.out_dir, "directory", {"--run": args.run, "--evals": args.evals})
    config = load_config(args.config)
    if config.eval is None:
        raise ConfigError("eval: this config has no 'eval:' section naming the benchmarks")
    run = _training_run(args.run)
    if not args.evals.is_dir():
        raise ConfigError(f"--evals: no such directory {str(args.evals)!r} (the run's checkpoint evaluations)")
    _set_threads(args.threads)
    log = lambda **fields: _log_event("eval_benchmark", **fields)  # noqa: E731
    with (
        Grader(config.reward.kind, config.reward.timeout, config.reward.workers) as grader,
        Evaluator(config, grader, log=log) as evaluate_one,
    ):
        written = reevaluate_selected(config, run, args.evals, args.out_dir, evaluate_one)
    _log_event("reevaluate", files=len(written), out=str(args.out_dir))
    return 0


def _cmd_prune(args: argparse.Namespace) -> int:
    from graft.train.prune import prune_run

    run = _training_run(args.run)
    if not args.evals.is_dir():
        raise ConfigError(f"--evals: no such directory {str(args.evals)!r} (the run's checkpoint evaluations)")
    check_output("--run", run.root, "directory")  # pruning renames and removes in it, then writes pruned.json
    record = prune_run(run, args.evals)
    write_text(run.pruned, json.dumps(record, indent=2) + "\n")
    _log_event("prune", freed_gb=round(record["freed_bytes"] / 1e9, 3), kept=record["kept"])
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from graft.planning.plan import main_cells, training_cells
    from graft.report.build import write_report

    config = load_config(args.config)
    results = args.results or Path(config.results)
    if not results.is_dir():
        raise ConfigError(f"--results: no such directory {str(results)!r}")
    check_output("--out", args.out, "directory", {"--results": results, "--config": args.config})
    cells, scope = training_cells(config), ""
    if args.cells == "main" and config.workflow.main_cells:
        cells = main_cells(config, cells)
        scope = (
            f"The main job's cells only (rule all; workflow.main_cells: {', '.join(config.workflow.main_cells)}): "
            "rows of other cells are empty here, and report_full/ (rule full) reports every cell."
        )
    ctx = write_report(config, cells, results, args.out, scope)
    _log_event("report", cells=len(ctx.run_cells()), out=str(args.out))
    return 0


def _cmd_fetch(args: argparse.Namespace) -> int:
    from graft.data.fetch import fetch_dataset, fetch_model

    kind = "directory" if args.fetch_command == "model" else "file"
    check_output("--out", args.out, kind, {"--config": getattr(args, "config", None)})
    if args.fetch_command == "model":
        check = None
        if (args.config is None) != (args.model is None):
            raise ConfigError("fetch model: --config and --model go together (the prompt check needs both)")
        if args.config is not None:
            config = load_config(args.config)
            if args.model not in config.models:
                raise ConfigError(f"--model: unknown model {args.model!r}; models: {', '.join(config.models)}")
            check = (config, args.model)
        path = fetch_model(args.hub_id, args.out, check)
    else:
        path = fetch_dataset(args.name, args.out)
    _log_event("fetched", path=str(path))
    return 0


def _cmd_digest(args: argparse.Namespace) -> int:
    from graft.planning import digest

    method, cell, seed = args.cell
    tree = ResultsTree(args.results)
    if args.check is not None:
        expected = digest.read_record(check_input("--check", args.check, "file"))  # refused before hashing anything
        models = digest.checked_models(expected, args.models)
        found = digest.record(tree, method, cell, int(seed))
        lines = digest.differences(expected, found, models)
        for line in lines:
            print(f"digest: {line}", file=sys.stderr)
        if lines:
            print(f"digest: {digest.settings_hint(expected, found)}", file=sys.stderr)
            return 1
        world = "toy world" if args.models is None else f"toy data, models {', '.join(models)}"
        print(f"digest: {args.results} reproduces {args.check} ({world} and {method}/{cell}/seed{seed})")
        return 0
    if args.models is not None:
        raise ConfigError("--models goes with --check; a record (--write) holds every built toy model")
    check_output("--write", args.write, "file", {"--results": args.results})
    write_text(args.write, json.dumps(digest.record(tree, method, cell, int(seed)), indent=1) + "\n")
    _log_event("digest", out=str(args.write))
    return 0


def _typed(tp: Any, name: str) -> Callable[[str], Any]:
    """An argparse ``type=`` that reads an option's text as ``tp`` (a config field's type, range included) and
    refuses it with one line, before any compute; argparse exits with code 2."""

    def read(text: str) -> Any:
        try:
            return read_option(text, tp)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    read.__name__ = name
    return read


non_negative_int = _typed(NonNegativeInt, "non_negative_int")
"""Checkpoint steps."""
seed_int = _typed(Seed, "seed")
"""Seeds, in the config's range (graft.typed_config.Seed)."""
positive_int = _typed(Count, "positive_int")
"""Counts: steps, threads, prompts."""
fraction = _typed(Probability, "fraction")
"""A share from 0 to 1."""
_SWITCH_TYPES = field_types(Method)
"""Each method switch's type and range, for the options that set one (complementarity's --n and --delta)."""


def _name(kind: str) -> Callable[[str], str]:
    """An argparse ``type=`` for an option that takes a ``kind`` name (graft.names): one that could not be a name of
    the config is refused with one line, before anything is read."""

    def read(text: str) -> str:
        try:
            return check_name(kind, text)
        except ConfigError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    read.__name__ = f"{kind}_name"
    return read


def _names(kind: str) -> Callable[[str], list[str]]:
    """``A`` or ``A,B``: ``kind`` names separated by commas, each checked as ``_name`` checks one."""
    one = _name(kind)

    def read(text: str) -> list[str]:
        return [one(part) for part in text.split(",")]

    read.__name__ = f"{kind}_names"
    return read


def _checkpoint_steps(text: str) -> set[int]:
    """``--steps 5,10,15``: checkpoint steps, each an integer >= 0."""
    return {non_negative_int(part) for part in text.split(",")}


def _setting(text: str) -> tuple[str, Any]:
    """``--set section.field=value``; the value is YAML (``1e-5``, ``true``, ``[0, 1]``), typed by its field when
    the config loads."""
    key, sep, value = text.partition("=")
    if not sep or not all(part.isidentifier() for part in key.split(".")):
        raise argparse.ArgumentTypeError(f"{text!r} is not key=value with a dotted key, e.g. train.lr=1e-5")
    try:
        return key, load_yaml(value, f"--set {key}")
    except ConfigError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _add_settings(parser: argparse.ArgumentParser, method: bool) -> None:
    switches = "; method.<switch>=... changes a switch of --method (graft methods NAME lists them)" if method else ""
    parser.add_argument(
        "--set",
        dest="settings",
        type=_setting,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"override a config field, e.g. train.lr=1e-5 (repeatable){switches}",
    )


class _Parser(argparse.ArgumentParser):
    """Bad input exits with code 2 and one line on stderr, the usage left to ``--help``."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


class _Version(argparse.Action):
    """``graft --version``: the package's version, and the git commit when graft runs from a checkout."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, help="print the version and the git commit, then exit")

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"graft {graft.__version__}{_git_commit()}")
        parser.exit()


def _git_commit() -> str:
    """`` (commit abc1234)`` when the package is a git checkout's (``+ changes`` if it has uncommitted ones), else
    nothing: an installed copy has no commit of its own."""
    source = Path(graft.__file__).resolve().parent

    def git(*args: str) -> str:
        command = ["git", "-C", str(source), *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=10, check=True).stdout.strip()

    try:
        if Path(git("rev-parse", "--show-toplevel")) != source.parent:
            return ""
        changed = " + changes" if git("status", "--porcelain", "--untracked-files=no") else ""
        return f" (commit {git('rev-parse', '--short', 'HEAD')}{changed})"
    except (OSError, subprocess.SubprocessError):
        return ""


def _cell_argument(text: str) -> tuple[str, str, str]:
    parts = text.split("/")
    if len(parts) != 3 or not parts[2].removeprefix("seed").isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not <method>/<cell>/seed<S>, e.g. grpo_n8/smol/seed0")
    return _name("method")(parts[0]), _name("cell")(parts[1]), parts[2].removeprefix("seed")


def _cmd_plan(args: argparse.Namespace) -> int:
    from graft.planning.plan import describe

    profile = args.profile
    if profile is None and DEFAULT_PROFILE.is_dir():
        profile = DEFAULT_PROFILE
    elif profile is not None and not profile.is_dir():
        raise ConfigError(f"--profile: no such directory {str(profile)!r} (a Snakemake profile with config.yaml)")
    method_keys = [key for key, _ in args.settings if key.startswith("method.")]
    if method_keys:
        raise ConfigError(f"--set {method_keys[0]}: a method's switches go with graft train --method")
    config = load_config(args.config, args.settings)
    print(describe(config, str(args.config), profile))
    return _check_site(config, profile) if args.site else 0


def _check_site(config: RunConfig, profile: Path | None) -> int:
    """``graft plan --site``: the workflow's check before it submits to Slurm, of every job of the config, with
    the retries of ``profile``; each problem one line on stderr (exit code 2), warnings beside them."""
    from graft.planning.job_lengths import job_kinds, profile_retries
    from graft.planning.plan import base_evaluations, checkpoint_steps, training_cells
    from graft.planning.preflight import pre_submission_check

    kinds = job_kinds(config, training_cells(config), checkpoint_steps(config), base_evaluations(config))
    problems, warnings = pre_submission_check(config, kinds, profile_retries(profile) + 1)
    for line in warnings:
        print(line, file=sys.stderr)
    for line in problems:
        print(f"graft: error: {line}", file=sys.stderr)
    if not problems:
        print("site: sbatch, sacct and sinfo here, and the slurm section fits this cluster")
    return 2 if problems else 0


def _cmd_cells(args: argparse.Namespace) -> int:
    from graft.planning.plan import disk_turns, training_cells
    from graft.planning.targets import cell_lines, cell_rows
    from graft.planning.turns import failed_cells

    config = load_config(args.config, args.settings)
    cells = training_cells(config)
    tree = ResultsTree(config.results)
    _, turns = disk_turns(config, cells, failed_cells(cells, tree))
    print("\n".join(cell_lines(cell_rows(config, cells, tree, turns), args.format == "tsv")))
    return 0


def _command(sub, name: str, summary: str, details: str = "") -> argparse.ArgumentParser:
    """A subcommand: ``summary`` is its one line in its parent's ``--help`` (short enough to stay one line at 80
    columns) and opens its own, followed by ``details``."""
    return sub.add_parser(name, help=summary, description=f"{summary[0].upper()}{summary[1:]}. {details}".strip())


def _add_training(sub) -> None:
    """methods and train: what a cell runs."""
    methods = _command(
        sub,
        "methods",
        "list the method presets, or one preset's switches",
        "A config's 'methods:' adds user presets, each a built-in preset with some switches changed.",
    )
    methods.add_argument("name", nargs="?", type=_name("method"), help="a preset name: print its switches as YAML")
    methods.add_argument("--config", type=Path, help="workflow config whose 'methods:' adds user presets")
    methods.add_argument("--out", type=Path, help="write every resolved preset to this YAML file")
    methods.set_defaults(func=_cmd_methods)

    train = _command(
        sub,
        "train",
        "GRPO, co-training or archive replay of one cell",
        "Under torchrun (torchrun --nproc-per-node N -m graft.cli train ...) both models are sharded over the N "
        "processes (config scale.processes).",
    )
    train.add_argument("--config", type=Path, required=True, help="the workflow's YAML config")
    train.add_argument(
        "--method", required=True, type=_name("method"), help="a method preset (graft methods lists them)"
    )
    train.add_argument(
        "--models", required=True, type=_names("model"), help="A for one model, A,B for a co-trained pair"
    )
    train.add_argument("--seed", type=seed_int, required=True)
    train.add_argument("--out", type=Path, required=True, help="run directory: metrics, trajectories, checkpoints")
    train.add_argument("--steps", type=positive_int, help="override train.steps")
    train.add_argument(
        "--peer-archive",
        type=Path,
        action="append",
        help="trajectory directory of a peer's GRPO run (replay); repeated: several peers, one per prompt",
    )
    train.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out from its newest intact checkpoint; a finished run: nothing to do",
    )
    train.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the run in --out (with --resume: only when it cannot be continued: other settings, or finished)",
    )
    train.add_argument(
        "--retrain",
        action="store_true",
        help="with --resume: a run of other settings in --out is retrained; its records (run.json, metrics, "
        "trajectories) and the --keep-evals directories move to <out>/replaced/<UTC time>/, its checkpoints go",
    )
    train.add_argument(
        "--keep-evals",
        type=Path,
        action="append",
        help="with --retrain: an evaluation directory of the replaced run, kept beside its records; repeated",
    )
    train.add_argument(
        "--force-unlock",
        action="store_true",
        help="take over a run lock held on another host whose Slurm job cannot be asked about",
    )
    train.add_argument("--threads", type=positive_int, help="torch CPU threads")
    train.add_argument("--eval-dir", type=Path, help="evaluate each checkpoint as it is saved, into this directory")
    _add_settings(train, method=True)
    train.set_defaults(func=_cmd_train)


def _add_toy(sub) -> None:
    """toy data|model|build: the embedded default's world."""
    toy = _command(sub, "toy", "build the embedded default's toy world", "Its data, one model, or both.")
    toy_sub = toy.add_subparsers(dest="toy_command", required=True)
    for name, text in (
        ("data", "the task's splits"),
        ("model", "one warmed-up model"),
        ("build", "data and every model"),
    ):
        cmd = _command(toy_sub, name, text)
        cmd.add_argument("--config", type=Path, required=True)
        cmd.add_argument("--out", type=Path, help="toy root (default: <results>/toy)")
        cmd.add_argument("--summary", type=Path, help="write a JSON summary here")
        cmd.add_argument("--threads", type=positive_int, help="torch CPU threads")
        if name == "model":
            cmd.add_argument("--name", required=True, type=_name("model"), help="which toy model")
        cmd.set_defaults(func=_cmd_toy)


def _add_archive(sub) -> None:
    """archive import: another framework's rollout dumps as a trajectory archive for replay."""
    archive = _command(sub, "archive", "trajectory archives for replay")
    archive_sub = archive.add_subparsers(dest="archive_command", required=True)
    imp = _command(
        archive_sub,
        "import",
        "convert another framework's rollout dumps",
        "A finished run's dumps of verl, TRL or JSON Lines, scored by its source model, as an archive that replay "
        "reads (--peer-archive of graft train).",
    )
    imp.add_argument(
        "--format",
        required=True,
        help="verl ({step}.jsonl: input, output, score) or jsonl (step, prompt, and response or completion: text, "
        "or TRL's conversational messages)",
    )
    imp.add_argument("--in", dest="input", type=Path, required=True, help="the dump directory")
    imp.add_argument("--out", type=Path, required=True, help="archive directory to write (--peer-archive of replay)")
    imp.add_argument("--config", type=Path, required=True, help="the config whose data.train the prompts match")
    imp.add_argument(
        "--model", required=True, type=_name("model"), help="the config's model that made the dump (its tokenizer)"
    )
    imp.add_argument(
        "--source-model",
        type=Path,
        help="weights that score the responses: a model directory, or a directory of checkpoints (step_N/<model>, "
        "global_step_N/actor/huggingface, checkpoint-N); default: the config's model",
    )
    imp.add_argument("--min-match", type=fraction, default=0.9, help="share of dumped prompts that must match")
    imp.set_defaults(func=_cmd_archive_import)


def _add_evaluation(sub) -> None:
    """evaluate, plan and report."""
    ev = _command(
        sub,
        "evaluate",
        "pass@1 of checkpoints on the configured benchmarks",
        "One checkpoint (--checkpoint, --model, --out), or every checkpoint of a training run (--run, --out-dir).",
    )
    ev.add_argument("--config", type=Path, required=True)
    ev.add_argument(
        "--model", type=_name("model"), help="which model of the config (default with --run: every model of the run)"
    )
    ev.add_argument("--checkpoint", type=Path, help="a from_pretrained directory (with --out)")
    ev.add_argument("--out", type=Path, help="result JSON for --checkpoint")
    ev.add_argument("--run", type=Path, help="a training run: evaluate each of its checkpoints (with --out-dir)")
    ev.add_argument("--out-dir", type=Path, help="<model>/step_NNNNN.json per checkpoint of --run")
    ev.add_argument(
        "--steps", type=_checkpoint_steps, help="with --run: only the checkpoints of these steps, e.g. 5,10,15"
    )
    ev.add_argument("--seed", type=seed_int, default=0, help="sampling seed (one per evaluation repeat)")
    ev.add_argument("--threads", type=positive_int)
    ev.set_defaults(func=_cmd_evaluate)

    reev = _command(
        sub,
        "reevaluate",
        "evaluate a run's selected checkpoints again",
        "Each run's selected checkpoint, eval.selection_runs more times with fresh sampling seeds (the paper's "
        "protocol, Appendix B).",
    )
    reev.add_argument("--config", type=Path, required=True)
    reev.add_argument("--run", type=Path, required=True, help="a training run (its checkpoints)")
    reev.add_argument("--evals", type=Path, required=True, help="the run's checkpoint evaluations (selection)")
    reev.add_argument("--out-dir", type=Path, required=True, help="<model>/run_NN.json and <model>/selected.json")
    reev.add_argument("--threads", type=positive_int)
    reev.set_defaults(func=_cmd_reevaluate)

    prune = _command(
        sub,
        "prune",
        "remove checkpoint models that nothing reads any more",
        "The model directories of a finished, evaluated run's checkpoints. Keeps each model's checkpoints that a "
        "selection rule picks and the last, every evaluation and every checkpoint's manifest; writes "
        "<run>/pruned.json. The workflow runs it after a cell's last evaluation unless workflow.keep_checkpoints.",
    )
    prune.add_argument("--run", type=Path, required=True, help="a finished training run (with done.json)")
    prune.add_argument("--evals", type=Path, required=True, help="the run's checkpoint evaluations, all of them")
    prune.set_defaults(func=_cmd_prune)

    plan = _command(
        sub,
        "plan",
        "what a config runs and costs, before submitting",
        "Every training cell and evaluation, each job's estimated length beside its Slurm limit, the GPU-hours "
        "and the disk's peak; refuses a config that cannot fit.",
    )
    plan.add_argument("--config", type=Path, required=True)
    plan.add_argument(
        "--profile",
        type=Path,
        help=f"Snakemake profile whose runtimes are the limits where the config's slurm section sets none (default: "
        f"{DEFAULT_PROFILE})",
    )
    plan.add_argument(
        "--site",
        action="store_true",
        help="also check this cluster as the workflow does before it submits a job (sbatch, sacct and sinfo here, "
        "the slurm section against sinfo, sacctmgr and scontrol), even with slurm.site_check: false",
    )
    _add_settings(plan, method=False)
    plan.set_defaults(func=_cmd_plan)

    cells = _command(
        sub,
        "cells",
        "every cell: its target, what it needs, whether done",
        "One line per training cell of the config: its status in the results tree (done: trained and its last "
        "evaluation there; trained: its done.json only; started: its run directory only; pending: nothing yet), "
        "its target (its last evaluation, which asks for everything before it: docs/operations.md) and the other "
        "cells it needs: a replay's peer run (trajectories), the cell whose pruning it waits for under "
        "workflow.disk_budget_gb (disk turn) and the GRPO n=8 run of each of its models that Table 1's Δ compares "
        "it with (baseline).",
    )
    cells.add_argument("--config", type=Path, required=True)
    cells.add_argument(
        "--format",
        choices=["text", "tsv"],
        default="text",
        help="text: a table to read (default); tsv: tab-separated method, cell, seed, status, target, needs and "
        "baseline (comma-separated cells), with a header",
    )
    _add_settings(cells, method=False)
    cells.set_defaults(func=_cmd_cells)

    rep = _command(
        sub,
        "report",
        "the report's tables and figures from a results tree",
        "Tables as Markdown, CSV and LaTeX, figures as PNG, and summary.md.",
    )
    rep.add_argument("--config", type=Path, required=True)
    rep.add_argument("--results", type=Path, help="results tree (default: the config's results)")
    rep.add_argument("--out", type=Path, required=True, help="report directory")
    rep.add_argument(
        "--cells",
        choices=["every", "main"],
        default="every",
        help="every training cell of the config (default), or those of workflow.main_cells (rule all's)",
    )
    rep.set_defaults(func=_cmd_report)

    dig = _command(
        sub,
        "digest",
        "fingerprint the toy world and a cell, or check one",
        "--write records the toy world's and one training cell's fingerprint; --check compares a results tree "
        "with a record and names each difference.",
    )
    dig.add_argument("--results", type=Path, required=True, help="results tree (e.g. results/default)")
    dig.add_argument(
        "--cell",
        type=_cell_argument,
        default="grpo_n8/smol/seed0",
        help="<method>/<cell>/seed<S> (default %(default)s)",
    )
    what = dig.add_mutually_exclusive_group(required=True)
    what.add_argument("--write", type=Path, help="write the record here")
    what.add_argument("--check", type=Path, help="compare with this record; exit 1 and name each difference")
    dig.add_argument(
        "--models",
        type=_names("model"),
        help="with --check: compare only these toy models, comma-separated (default: all the record's)",
    )
    dig.set_defaults(func=_cmd_digest)


def _add_data(sub) -> None:
    """fetch (models and datasets from the hub) and complementarity (a pair's pre-flight check)."""
    fetch = _command(sub, "fetch", "download a model or a dataset from the hub", "From the Hugging Face hub.")
    fetch_sub = fetch.add_subparsers(dest="fetch_command", required=True)
    fm = _command(fetch_sub, "model", "snapshot a model repository (safetensors only)")
    fm.add_argument("--hub-id", required=True)
    fm.add_argument("--out", type=Path, required=True)
    fm.add_argument("--config", type=Path, help="with --model: refuse a tokenizer that cannot apply its prompt format")
    fm.add_argument("--model", type=_name("model"), help="the config's name of this model (with --config)")
    fm.set_defaults(func=_cmd_fetch)
    fd = _command(fetch_sub, "dataset", "a paper benchmark or a hub dataset, as JSON Lines")
    fd.add_argument(
        "--name",
        required=True,
        help="math500, aime24, aime25, amc23, minerva, math_train, math_validation, or a hub dataset: "
        "hf://<owner>/<name>?split=<split>[&config=<config>] (or its name under <results>/data/)",
    )
    fd.add_argument("--out", type=Path, required=True)
    fd.set_defaults(func=_cmd_fetch)

    comp = _command(
        sub,
        "complementarity",
        "a pair's Figure 1 analysis and pre-flight check",
        "How often one model of a pair fails every sample of a prompt where the other does not.",
    )
    comp.add_argument("--config", type=Path, required=True)
    comp.add_argument("--models", required=True, type=_names("model"), help="A,B")
    comp.add_argument(
        "--data", type=Path, action="append", help="prompt file, repeatable (default: data.validation or data.train)"
    )
    comp.add_argument("--prompts", type=positive_int, help="use the first N prompts of each file")
    comp.add_argument("--n", type=_typed(_SWITCH_TYPES["n"], "n"), default=8, help="samples per prompt and model")
    comp.add_argument("--seed", type=seed_int, default=0)
    comp.add_argument(
        "--delta",
        type=_typed(_SWITCH_TYPES["delta"], "delta"),
        default=Method.delta,
        help="compatibility floor (default: GRAFT's)",
    )
    comp.add_argument("--out", type=Path, help="write the report as JSON here")
    comp.add_argument("--threads", type=positive_int)
    comp.set_defaults(func=_cmd_complementarity)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="graft",
        description=USAGE,
        epilog="`graft <command> --help` describes each command. Bad input stops before any compute with one line "
        "naming the field and what is allowed (exit code 2).",
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_add_training, _add_toy, _add_archive, _add_evaluation, _add_data):
        add(sub)
    return parser


def _what_was_saved(args: argparse.Namespace) -> str:
    """For an interrupted or failed ``graft train``: the checkpoint a resume continues from. Every file is written
    beside its target and renamed, so what an interrupt leaves is consistent; other commands redo only what they had
    not finished when rerun."""
    if args.command != "train":
        return ""
    from graft.train.run_state import newest_resumable

    try:
        newest = newest_resumable(RunDir(args.out), args.models)
    except OSError:  # the run directory is what failed
        return ""
    if newest is None:
        return f"; {str(args.out)!r} holds no resumable checkpoint yet: --resume starts it over"
    return f"; {str(args.out)!r}: rerun with --resume to continue from its checkpoint {newest.name}"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # bad arguments (2), --help and --version (0): returned like every other outcome
        return stop.code
    try:
        check_mode()
        go_offline(args.command)
        node_local_caches()
        return args.func(args)
    except Busy as err:
        print(f"graft: error: {err}", file=sys.stderr)
        return os.EX_TEMPFAIL
    except ConfigError as err:
        print(f"graft: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"graft: interrupted{_what_was_saved(args)}", file=sys.stderr)
        return 130
    except OSError as err:  # what failed while the command worked: its inputs and outputs were checked before
        # every file is written beside its target and renamed, so nothing complete was lost
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            where = f" writing {err.filename}" if err.filename else ""
            rerun = " with --resume" if args.command == "train" else ""
            print(f"graft: error: no space left on the device{where}; free some, then rerun{rerun}", file=sys.stderr)
        else:
            print(f"graft: error: {describe(err)}{_what_was_saved(args)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
