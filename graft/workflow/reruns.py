"""What each workflow job computes from, and which finished training runs a config edit would change.

Snakemake reruns a job when its ``params`` change. Each rule's params are built here from the settings its outputs
depend on, and from nothing else: a training cell's params are the record ``graft train`` keeps of its run
(graft.train.run_state.run_identity: its method's resolved switches, its models' entries, its seed, steps and peer
archive, and the train and reward fields that change what it computes); an evaluation's, the eval and reward
fields and its models' entries. Where files go, memory fractions, timeouts, checkpoint cadence, tracking, the
report and other cells' methods and models change no job's params (docs/operations.md tabulates every field; a
test walks them).

A training run is a user's work: the workflow never replaces one by itself. Before any job is submitted (a dry run
too) ``changed_runs`` lists the cells whose run in the results tree ``graft train --resume`` would refuse with the
config as it is, with each field that changed; ``workflow.changed_runs`` says what to do with them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from graft.config import RunConfig
from graft.errors import ConfigError
from graft.methods import get_method
from graft.planning.plan import TrainingCell
from graft.results import ResultsTree
from graft.toy.shipped import model_settings
from graft.train.lock import RunLock
from graft.train.run_state import FROM_FILES, IDENTITY, differences, holds_run, plan_out, retire, run_identity

MODEL_PLACEMENT = ("path", "hub_id")
"""Where a model is stored, and where it was downloaded from: no part of what a job computes with it."""

TRAINING_ONLY_MODEL_FIELDS = ("lr", "sizes")
"""A model's RL learning rate and the sizes the memory plan reads: an evaluation does not use them."""

EVAL_OPERATIONAL = ("vllm_memory", "benchmarks", "validation", "selection_runs")
"""An evaluation's memory fraction, its files' paths (the files are the jobs' inputs, whose content Snakemake
compares; the benchmarks' names are kept), and how often the selected checkpoints are evaluated again (only the
re-evaluation reads it)."""


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value, default=lambda o: asdict(o) if hasattr(o, "__dataclass_fields__") else o))


def cell_identity(cfg: RunConfig, cell: TrainingCell, tree: ResultsTree) -> dict:
    """The record ``graft train`` writes to the cell's ``run.json`` when the workflow trains it."""
    archives = [str(cell.archive(tree))] if cell.peer is not None else []
    method = get_method(cell.method, cfg.methods).to_dict()
    return _json(run_identity(cfg, method, list(cell.models), cell.seed, cfg.train.steps, archives))


def eval_params(cfg: RunConfig, models: tuple[str, ...] | list[str]) -> dict:
    """What an evaluation of ``models`` computes from: the eval section but its memory fraction and paths, the
    benchmarks' names, the reward, and each model's prompt format and precision."""
    spec = asdict(cfg.eval) if cfg.eval is not None else {}
    evaluation = {k: v for k, v in spec.items() if k not in EVAL_OPERATIONAL}
    if cfg.eval is not None:
        evaluation["benchmarks"] = sorted(cfg.eval.benchmarks)
        evaluation["validation"] = cfg.eval.validation is not None
        evaluation["max_response_tokens"] = cfg.eval_response_tokens()
    skip = (*MODEL_PLACEMENT, *TRAINING_ONLY_MODEL_FIELDS)
    specs = {m: {k: v for k, v in asdict(cfg.models[m]).items() if k not in skip} for m in models}
    reward = {"kind": cfg.reward.kind, "timeout": cfg.reward.timeout}
    return _json({"eval": evaluation, "reward": reward, "models": specs})


ABSENT = "(no such setting in this job)"
"""The value of a param slot that a job lacks (a second model's field in a one-model cell), and of one more param
every rule has: Snakemake compares a job's params as a set of values, so slots added for other jobs change no
job's set."""

SHOWN_AS = (("run.settings.", ""), ("run.steps", "train.steps"), ("run.", ""), ("eval.eval.", "eval."))
"""Prefixes of a setting's path in the params above that its config field does not have (``train.lr``, not
``run.settings.train.lr``)."""


def param_fields(
    settings: str, members: Sequence[str] = (), labels: Sequence[str] = (), within: str = ""
) -> dict[str, str]:
    """A job's settings (the JSON text of one of the functions above) as Snakemake params, one per field: slot ->
    ``field=value``. Snakemake prints the params that differ from the last run as the reason it reruns a job, so
    the reason names each changed field and its values, not every setting twice. A slot is the field's path with
    each of ``members`` (the job's models) named by its place (``model0``), so that every job of a rule has the
    same slots; the value names the model. ``labels``: the names of the items of settings that are a list
    (``toy_model_params``); ``within``: the config section that settings are (``toy``), to name its fields."""
    fields: dict[str, str] = {}

    def walk(value: Any, slot: tuple[str, ...], shown: tuple[str, ...]) -> None:
        if isinstance(value, dict) and value:
            for key, item in value.items():
                place = f"model{members.index(key)}" if key in members else key
                walk(item, (*slot, place), (*shown, key))
            return
        name = ".".join(shown)
        for prefix, replacement in SHOWN_AS:
            if name.startswith(prefix):
                name = replacement + name.removeprefix(prefix)
                break
        identifier = "_".join(re.sub(r"\W", "_", part) for part in slot)
        fields[identifier] = f"{name}={json.dumps(value, sort_keys=True)}"

    value = json.loads(settings)
    if within:
        value = _nested(within, value)
    if labels:
        value = [_nested(label, item) for label, item in zip(labels, value, strict=True)]
    for part in value if labels else [value]:
        walk(part, (), ())
    return fields


def _nested(path: str, value: Any) -> dict:
    """``value`` under the keys of a dotted ``path``: ``{"a": {"b": value}}`` for ``a.b``."""
    for key in reversed(path.split(".")):
        value = {key: value}
    return value


def train_params(cfg: RunConfig, cell: TrainingCell, tree: ResultsTree, kept: dict | None = None) -> str:
    """The training rule's params for ``cell``: its run's identity (``kept``: the record of a run that
    ``workflow.changed_runs: keep`` leaves as it is), and its evaluation's when the training job evaluates. What
    the record reads from files is left out (``FROM_FILES``): the prompts and the peer's run are the job's inputs,
    whose changes Snakemake sees itself, and they do not exist yet when a fresh tree's workflow is planned."""
    identity = kept if kept is not None else cell_identity(cfg, cell, tree)
    params = {"run": {k: v for k, v in identity.items() if k not in FROM_FILES}}
    if cfg.workflow.eval_in_train:
        params["eval"] = eval_params(cfg, cell.models)
    return json.dumps(params, sort_keys=True)


def reevaluate_params(cfg: RunConfig, models: tuple[str, ...]) -> str:
    """Re-evaluation of a cell's selected checkpoints: its evaluation's settings and the selection rule."""
    runs = cfg.eval.selection_runs if cfg.eval is not None else 0
    return json.dumps({**eval_params(cfg, models), "selection": cfg.report.selection, "runs": runs}, sort_keys=True)


def report_params(cfg: RunConfig) -> str:
    return json.dumps(_json(cfg.report), sort_keys=True)


def methods_params(cfg: RunConfig) -> str:
    """The resolved presets' file lists every built-in and user preset."""
    return json.dumps(_json(cfg.methods), sort_keys=True)


def toy_data_params(cfg: RunConfig) -> str:
    """The toy task's splits: the toy section but its models, how they write and where they come from (no part of
    the data)."""
    skip = ("models", "mismatch", "shipped_models")
    toy = {k: v for k, v in asdict(cfg.toy).items() if k not in skip} if cfg.toy else {}
    return json.dumps(_json(toy), sort_keys=True)


TOY_MODEL_LABELS = ("toy.models.{model}", "models.{model}", "toy.seed", "toy.mismatch")
"""The config fields of ``toy_model_params``'s items."""


def toy_model_params(cfg: RunConfig, model: str) -> str:
    """A toy model's build: its toy entry, its model entry but the RL learning rate and where it is stored, the
    world's seed and how much each model writes in its own dialect."""
    return json.dumps(model_settings(cfg, model), sort_keys=True)


def stored_identity(cell: TrainingCell, tree: ResultsTree) -> dict | None:
    """The record of the run in the cell's directory, None where there is none or it cannot be read."""
    try:
        value = json.loads(cell.run_dir(tree).run_json.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def changed_runs(cfg: RunConfig, cells: list[TrainingCell], tree: ResultsTree) -> dict[TrainingCell, list[str]]:
    """The cells whose run in ``tree`` ``graft train --resume`` would refuse with this config (the same decision,
    graft.train.run_state.plan_out), each with what changed: ``field: old -> new``. A run asked for more steps
    than it finished, with its resume state kept, continues and is not listed."""
    changed = {}
    for cell in cells:
        run = cell.run_dir(tree)
        if not holds_run(run):
            continue
        identity = cell_identity(cfg, cell, tree)
        old = stored_identity(cell, tree) or {}
        # files not there yet (fetched or built by a job, a peer still training) are not compared
        if identity["data"]["train"] is None and "data" in old:
            identity["data"] = old["data"]
        if None in (identity["peers"] or []) and "peers" in old:
            identity["peers"] = old["peers"]
        try:
            plan_out(run, identity, cfg.train.steps, resume=True, overwrite=False)
        except ConfigError as refusal:
            fields = [
                f"{where}: {json.dumps(was)} -> {json.dumps(now)}"
                for key in IDENTITY
                if key in old
                for where, was, now in differences(old[key], identity[key], key)
            ]
            changed[cell] = fields or [str(refusal).split(": ", 1)[-1]]
    return changed


def retrain_changed(changed: dict[TrainingCell, list[str]], tree: ResultsTree, eval_dirs, dry_run: bool) -> list[str]:
    """``workflow.changed_runs: retrain``: move each changed run's records and its evaluation directories
    (``eval_dirs(cell)``) to ``<run>/replaced/<UTC time>/`` and remove its checkpoints (graft.train.run_state.retire),
    holding the run's lock, so that the cell trains anew; returns a line for each. A dry run moves nothing."""
    lines = []
    for cell, fields in changed.items():
        run = cell.run_dir(tree)
        name = f"{cell.method}/{cell.cell}/seed{cell.seed}"
        if dry_run:
            lines.append(f"graft: {name} would be retrained ({fields[0]}); a dry run moves nothing")
            continue
        with RunLock(run.root):
            kept = retire(run, tuple(eval_dirs(cell)))
        lines.append(f"graft: {name} is retrained ({fields[0]}); its run of other settings is kept in {str(kept)!r}")
    return lines


def changed_runs_message(changed: dict[TrainingCell, list[str]], tree: ResultsTree, shown: int = 3) -> str:
    """What the workflow prints before it stops: the cells, a few changed fields of each, and the ways on."""
    lines = [
        f"graft: {len(changed)} training run(s) in {str(tree.root)!r} were made with other settings than this "
        "config's; nothing was submitted:"
    ]
    for cell, fields in changed.items():
        more = f" (and {len(fields) - shown} more)" if len(fields) > shown else ""
        lines.append(f"  {cell.method}/{cell.cell}/seed{cell.seed}: {'; '.join(fields[:shown])}{more}")
    lines.append(
        "Ways on: keep them as they are (--config 'workflow={changed_runs: keep}'); retrain them, their metrics and "
        "evaluations kept under <run>/replaced/ (--config 'workflow={changed_runs: retrain}'); or write this config's "
        "results elsewhere (--config results=<new directory>)."
    )
    return "\n".join(lines)
