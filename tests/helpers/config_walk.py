"""Every field of the run config, each changed to another valid value, and the workflow rules whose params change.

The walk reads the fields from the config's dataclasses (graft.config), not from a list: a new field is walked as
soon as it exists. A mapping of entries (``models``, ``toy.models``) is walked through its first entry, its path
written ``models.<name>.template``. Each field takes the first of a few candidate values of its type that the
config accepts; ``ALTERNATIVES`` gives the values a type cannot suggest.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterator
from typing import Annotated, Any, Literal, get_args, get_origin

from graft.config import RunConfig, config_from_dict
from graft.config.run import apply_settings
from graft.errors import ConfigError
from graft.planning.plan import training_cells
from graft.results import ResultsTree
from graft.typed_config import field_types
from graft.workflow import reruns


class With(typing.NamedTuple):
    """A value that the config accepts only with other settings changed alongside."""

    value: Any
    settings: dict[str, Any]


THIRD_MODEL = {"models.third": {"path": "{results}/toy/models/third"}}

ALTERNATIVES: dict[str, list[Any]] = {
    "methods": [{"mine": {"base": "graft", "delta": 0.5}}],
    "pairs": [{"P1": ["smol", "qwen"], "P9": ["qwen", "smol"]}],
    "models.<name>.sizes": [
        {"layers": 2, "hidden": 32, "intermediate": 64, "heads": 2, "kv_heads": 2, "head_dim": 16, "vocab": 280}
    ],
    "toy.models.<name>.mix": [{"add": 1.0}],
    "toy.models.<name>.slip": [{"add": 0.5}],
    "toy.families": [["add", "sub", "mul", "div"]],
    "eval.benchmarks": [{"add": "{results}/toy/data/test/add.jsonl"}],
    "workflow.method_seeds": [{"grpo_n8": [0, 1]}],
    "workflow.cell_seeds": [{"P1": [0, 1]}],
    "workflow.main_cells": [["grpo_n8"]],
    "workflow.rollout_tokens_per_s": [{"smol": 100.0}],
    "workflow.generation_tokens_per_s": [{"smol": 100.0}],
    "report.paper_models": [{"smol": "qwen3"}],
    "models.<name>.chat": [With(True, {"models.smol.chat_template": "config/chat_templates/chatml_user.jinja"})],
    "models.<name>.chat_template": [With("config/chat_templates/chatml_user.jinja", {"models.smol.chat": True})],
    "groups": [With({"G1": ["smol", "qwen", "third"]}, THIRD_MODEL)],
    "scale.placement": [With("split", {"scale.processes": 2})],
    "scale.engine": [With("deepspeed", {"scale.processes": 2})],
    "workflow.baseline_pairs": [["P1"], []],
    "workflow.ablation_pair": ["P1"],
    "workflow.only_methods": [["grpo_n8", "graft"]],
    "workflow.main_seeds": [[0, 1]],
    "workflow.other_seeds": [With([0, 1], {"workflow.replay": False})],
    **{  # the GPU's figures go with jobs that ask for GPUs
        field: [With(value, {"slurm.gpus": True, "slurm.gpu_type": "h200"})]
        for field, value in (
            ("slurm.gpus", True),
            ("slurm.gpu_type", "h100"),
            ("scale.gpu_memory_gb", 80.0),
            ("workflow.gpu_peak_tflops", 500.0),
            ("workflow.gpu_speed_vs_h200", 0.5),
        )
    },
}
"""Values for fields whose type suggests none that the smoke config accepts."""

SKIPPED = {"results": "moves the whole tree: every job runs in the new one, the old one is left as it is"}


def _base(hint: Any) -> tuple[Any, bool]:
    """The type under ``Annotated`` and ``| None``, and whether None is allowed."""
    if get_origin(hint) is Annotated:
        hint = get_args(hint)[0]
    if isinstance(hint, types.UnionType) or get_origin(hint) is typing.Union:
        inner = [a for a in get_args(hint) if a is not type(None)]
        return _base(inner[0])[0] if len(inner) == 1 else hint, True
    return hint, False


def fields(cls: type, value: Any, path: str = "") -> Iterator[tuple[str, str, Any, Any]]:
    """(path to set, path to show, type, value) of every leaf field of dataclass ``value``."""
    for f in dataclasses.fields(cls):
        hint = field_types(cls)[f.name]
        base, _ = _base(hint)
        current = getattr(value, f.name)
        here = f"{path}{f.name}"
        if dataclasses.is_dataclass(base) and current is not None:
            yield from fields(base, current, here + ".")
        elif get_origin(base) is dict and dataclasses.is_dataclass(get_args(base)[1]) and current:
            name = next(iter(current))
            for set_path, show, tp, v in fields(get_args(base)[1], current[name], f"{here}.{name}."):
                yield set_path, show.replace(f"{here}.{name}.", f"{here}.<name>.", 1), tp, v
        else:
            yield here, here, hint, current


def candidates(show: str, hint: Any, value: Any) -> list[Any]:
    """Other values for a field, most likely accepted first."""
    if show in ALTERNATIVES:
        return ALTERNATIVES[show]
    base, optional = _base(hint)
    if get_origin(base) is Literal:
        return [c for c in get_args(base) if c != value]
    found: list[Any] = []
    if base is bool:
        found = [not value]
    elif base is int:
        found = [value + 1, value * 2, 2, 1] if isinstance(value, int) else [2, 1, 8, 64]
    elif base is float:
        found = [value * 2, value / 2] if isinstance(value, (int, float)) else []
        found += [0.5, 0.25, 2.0, 100.0]
    elif base is str:
        found = [f"{value}x", "h100", "a100"] if isinstance(value, str) else ["x", "h100", "a100"]
    elif get_origin(base) is list:
        item = get_args(base)[0]
        found = [value[:-1], value[:1], [*value, value[0]]] if value else [["smol"], [0, 1], ["jsonl", "tensorboard"]]
        found = found if get_origin(item) is not Literal else [[c] for c in get_args(item)]
    if optional and value is not None:
        found.append(None)
    return [c for c in found if c != value]


def rule_params(cfg: RunConfig, cells: list) -> dict[str, dict[Any, str]]:
    """Each rule's params for each of its jobs (those of ``cells`` that ``cfg`` still plans)."""
    tree = ResultsTree(cfg.results)
    planned = set(training_cells(cfg))
    kept = [c for c in cells if c in planned]
    models = list(cfg.models)
    params = {
        "toy_data": {None: reruns.toy_data_params(cfg)},
        "toy_model": {m: reruns.toy_model_params(cfg, m) for m in models if cfg.toy and m in cfg.toy.models},
        "resolve_methods": {None: reruns.methods_params(cfg)},
        "train": {c: reruns.train_params(cfg, c, tree) for c in kept},
        "evaluate_base": {m: repr(reruns.eval_params(cfg, [m])) for m in models},
        "evaluate_checkpoints": {c: repr(reruns.eval_params(cfg, c.models)) for c in kept},
        "reevaluate_selected": {c: reruns.reevaluate_params(cfg, c.models) for c in kept},
        "report": {None: reruns.report_params(cfg)},
    }
    return params


def changed_rules(before: dict, after: dict) -> set[str]:
    return {rule for rule in before if any(after[rule].get(k, v) != v for k, v in before[rule].items())}


def walk(raw: dict) -> tuple[dict[str, set[str]], list[str]]:
    """For each field of config ``raw``: the rules whose params change when it changes; and the fields no
    candidate value could change."""
    base = config_from_dict(raw)
    cells = training_cells(base)
    before = rule_params(base, cells)
    table, stuck, errors = {}, [], {}
    for set_path, show, hint, value in fields(RunConfig, base):
        if show in SKIPPED:
            continue
        for candidate in candidates(show, hint, value):
            value, extra = (candidate.value, candidate.settings) if isinstance(candidate, With) else (candidate, {})
            try:
                changed = apply_settings(raw, [*extra.items(), (set_path, value)])
                after = rule_params(config_from_dict(changed), cells)
            except ConfigError as err:
                errors[show] = str(err)
                continue
            table[show] = changed_rules(before, after)
            break
        else:
            stuck.append(f"{show} ({errors.get(show, 'no candidate value')})")
    return table, stuck
