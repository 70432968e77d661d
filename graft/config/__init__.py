"""The run configuration: one YAML file drives the workflow and every ``graft`` command.

Loaded with graft's YAML loader (graft.typed_config.load_yaml) into frozen dataclasses and validated once, before
any compute; a bad field is refused with one line that names it and what it accepts (exit code 2 on the command
line). Each field's type and allowed range is its annotation (``Count``, ``Probability``...), checked by
graft.typed_config and written into the workflow's schema; ``__post_init__`` checks what spans fields.

One module per section: ``models`` (models, data, reward, evaluation), ``train``, ``scale``, ``site`` (Slurm),
``workflow``, ``toy``, and ``run`` (the whole config, logging, the report, and reading a file with overrides).
"""

from graft.config.models import DataSpec, EvalSpec, ModelSizes, ModelSpec, RewardSpec
from graft.config.run import (
    LoggingSpec,
    PaperModel,
    ReportSpec,
    RunConfig,
    apply_settings,
    config_from_dict,
    load_config,
    parse_config_strings,
    read_yaml,
)
from graft.config.scale import ScaleSpec, model_groups
from graft.config.site import SlurmSpec
from graft.config.toy import DEFAULT_TOY_FAMILIES, ToyFamily, ToyModelSpec, ToySpec
from graft.config.train import TrainSpec
from graft.config.workflow import MAIN_METHODS, Seeds, WorkflowSpec, preset_seeds

__all__ = [
    "DEFAULT_TOY_FAMILIES",
    "MAIN_METHODS",
    "DataSpec",
    "EvalSpec",
    "LoggingSpec",
    "ModelSizes",
    "ModelSpec",
    "PaperModel",
    "ReportSpec",
    "RewardSpec",
    "RunConfig",
    "ScaleSpec",
    "Seeds",
    "SlurmSpec",
    "ToyFamily",
    "ToyModelSpec",
    "ToySpec",
    "TrainSpec",
    "WorkflowSpec",
    "apply_settings",
    "config_from_dict",
    "load_config",
    "model_groups",
    "parse_config_strings",
    "preset_seeds",
    "read_yaml",
]
