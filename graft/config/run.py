"""The whole run configuration (``RunConfig``), the sections that need no module of their own, and how it is
read: a YAML file and ``--set`` or Snakemake ``--config`` overrides, typed and checked once."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from graft.config.gpus import Gpu, job_gpu
from graft.config.models import FETCHED_FILE, DataSpec, EvalSpec, ModelSpec, RewardSpec, hub_dataset
from graft.config.scale import ScaleSpec
from graft.config.site import SlurmSpec
from graft.config.toy import ToySpec
from graft.config.train import TrainSpec
from graft.config.workflow import WorkflowSpec
from graft.errors import ConfigError
from graft.names import GroupName, MethodName, ModelName, PairName, check_distinct
from graft.paths import check_input, describe
from graft.typed_config import (
    NON_EMPTY,
    PathText,
    from_dict,
    load_yaml,
    parse_strings,
)


@dataclass(frozen=True)
class LoggingSpec:
    """Where a training run's metrics go besides ``metrics.jsonl`` (written always: the report reads it)."""

    backends: list[Literal["jsonl", "tensorboard", "wandb"]] = field(default_factory=lambda: ["jsonl"])
    """tensorboard: event files under ``<run>/tensorboard``; wandb: a Weights & Biases run (``WANDB_MODE=offline``
    works without a network; files under ``<run>/wandb``). Each needs its package (the ``tracking`` extra)."""
    wandb_project: str = "graft"
    """The W&B project of every run of this config."""
    wandb_entity: str | None = None
    """The W&B team or user; None: the account's default."""


PaperModel = Literal["smollm3", "qwen3", "octothinker"]


"""The paper's three base models (graft.report.paper holds their numbers)."""


@dataclass(frozen=True)
class ReportSpec:
    paper_models: dict[str, PaperModel] = field(default_factory=dict)
    """Our model name -> the paper model it stands for (smollm3, qwen3, octothinker), to print paper values."""
    selection: Literal["test_best", "val_best", "final"] = "test_best"
    """Checkpoint selection for the tables; the paper's rule is the best test average."""


@dataclass(frozen=True)
class RunConfig:
    results: PathText
    """Directory that receives every output of this configuration."""

    models: Annotated[dict[ModelName, ModelSpec], NON_EMPTY]
    """The policies by name: each a local model directory and its prompt format."""
    data: DataSpec
    """The training prompts."""
    train: TrainSpec
    """The RL run's settings: steps, batches, optimizer, lengths and checkpoints."""
    reward: RewardSpec = field(default_factory=RewardSpec)
    """How responses are graded."""
    methods: dict[MethodName, Any] = field(default_factory=dict)
    """User presets: name -> {base: <preset>, <switch>: <value>}; each is resolved and its switches checked when
    the config loads."""

    pairs: dict[PairName, list[ModelName]] = field(default_factory=dict)
    """Named model pairs for co-training, e.g. P1: [smollm3, qwen3]."""
    groups: dict[GroupName, list[ModelName]] = field(default_factory=dict)
    """Named groups of three or more models co-trained in one cell (``workflow.group_methods``), e.g.
    G1: [smol, qwen, octo]: a model's all-fail prompt takes one peer's mixed group (graft.algo.group_selection).
    A pair is the group of two and stays under ``pairs``."""

    toy: ToySpec | None = None
    """The toy world's build settings; None for real models."""

    scale: ScaleSpec = field(default_factory=ScaleSpec)
    """How a training job uses its nodes: processes, placement, sharding, rollout engine."""

    eval: EvalSpec | None = None
    """How checkpoints are evaluated; None: no evaluation."""
    workflow: WorkflowSpec = field(default_factory=WorkflowSpec)
    """What the Snakemake workflow runs: methods, seeds, job sizes and environments."""
    report: ReportSpec = field(default_factory=ReportSpec)
    """How the report selects checkpoints and compares cells."""
    logging: LoggingSpec = field(default_factory=LoggingSpec)
    """Where metrics go besides the JSON Lines file (TensorBoard, W&B)."""
    slurm: SlurmSpec = field(default_factory=SlurmSpec)
    """The Slurm site: partitions, account, GPU type and the longest time limit (the Slurm profile reads them)."""

    def gpu(self) -> Gpu | None:
        """The GPU the jobs run on as ``graft plan`` plans with it (graft.config.gpus.job_gpu); None for CPU jobs
        (``slurm.gpus`` false)."""
        if not self.slurm.gpus:
            return None
        w = self.workflow
        return job_gpu(
            self.slurm.gpu_type,
            memory_gb=self.scale.gpu_memory_gb,
            peak_tflops=w.gpu_peak_tflops,
            speed_vs_h200=w.gpu_speed_vs_h200,
            priced=bool(w.rollout_tokens_per_s or w.generation_tokens_per_s),
        )

    def gpu_ask_problem(self, vllm_build: str | None = None) -> str | None:
        """Why the config's training and evaluation jobs would work on GPUs they do not ask Slurm for
        (``slurm.gpus`` false), in one line, or None: the config names its GPUs (a GPU type or figure), or it
        samples with vLLM and ``vllm_build``, the vLLM build of the jobs' environment, is the GPU one (the planning
        reads it: the config alone cannot tell it from vLLM's CPU build, which runs without a GPU)."""
        if self.slurm.gpus:
            return None
        s, w = self.scale, self.workflow
        named = [
            name
            for name, value in (
                ("slurm.gpu_type", self.slurm.gpu_type),
                ("scale.gpu_memory_gb", s.gpu_memory_gb),
                ("workflow.gpu_peak_tflops", w.gpu_peak_tflops),
                ("workflow.gpu_speed_vs_h200", w.gpu_speed_vs_h200),
            )
            if value is not None
        ]
        if named:
            why, fix = f"the config names its GPUs ({', '.join(named)})", "slurm.gpus: true"
        elif s.rollout == "vllm" and vllm_build == "gpu":
            why, fix = "it samples with vLLM's GPU build (scale.rollout: vllm)", "slurm.gpus: true and slurm.gpu_type"
        else:
            return None
        return f"slurm.gpus: false, but {why}: its training and evaluation jobs would ask Slurm for no GPU; set {fix}"

    def eval_response_tokens(self) -> int:
        """The most tokens an evaluation generates per response: eval.max_response_tokens, else training's."""
        limit = self.eval.max_response_tokens if self.eval is not None else None
        return limit or self.train.max_response_tokens

    def ablations_pair(self) -> str | None:
        """The pair the ablations run on (``WorkflowSpec.ablations_pair``)."""
        return self.workflow.ablations_pair(self.pairs)

    def _check_members(self, where: str, members: list[str]) -> None:
        """A pair's or group's models are known, and the placement can give each an equal share of the job."""
        for member in members:
            if member not in self.models:
                raise ConfigError(f"{where}: unknown model {member!r}; models: {', '.join(self.models)}")
        problem = self.scale.split_problem(len(members))
        if problem:
            raise ConfigError(f"{problem} ({where})")

    def __post_init__(self) -> None:
        """What spans sections: names that one section gives and another uses. Each section checks its own fields."""
        # a model, a pair and a group are each a cell: runs/<method>/<cell>/, workflow.cell_seeds' keys
        check_distinct(
            [
                (f"{section}.{name}", name)
                for section in ("models", "pairs", "groups")
                for name in getattr(self, section)
            ],
            "models, pairs and groups each need a name of their own",
        )
        for pair, members in self.pairs.items():
            if len(members) != 2 or len(set(members)) != 2:
                raise ConfigError(f"pairs.{pair}: expected two different model names, got {members}")
            self._check_members(f"pairs.{pair}", members)
        for group, members in self.groups.items():
            if len(members) < 3 or len(set(members)) != len(members):
                raise ConfigError(
                    f"groups.{group}: expected three or more different model names (two are a pair), got {members}"
                )
            self._check_members(f"groups.{group}", members)
        if self.report.selection == "val_best" and (self.eval is None or self.eval.validation is None):
            raise ConfigError(
                "report.selection: 'val_best' selects by the validation score, but eval.validation names no "
                "validation set; set eval.validation, or select by test_best or final"
            )
        w = self.workflow
        from graft.methods import PRESETS, resolve_all

        resolve_all(self.methods)  # each user preset typed now, with the one-line errors of the other sections
        for field_name in ("grpo", "pair_methods", "group_methods", "ablations"):
            for name in getattr(w, field_name):
                if name not in PRESETS and name not in self.methods:
                    raise ConfigError(f"workflow.{field_name}: unknown preset {name!r}; allowed: {', '.join(PRESETS)}")
        for field_name, names, kind, known in (
            ("baseline_models", w.baseline_models, "model", self.models),
            ("baseline_pairs", w.baseline_pairs, "pair", self.pairs),
            ("generation_tokens_per_s", w.generation_tokens_per_s, "model", self.models),
            ("rollout_tokens_per_s", w.rollout_tokens_per_s, "model", self.models),
            ("ablation_pair", [w.ablation_pair] if w.ablation_pair else [], "pair", self.pairs),
            ("report.paper_models", self.report.paper_models, "model", self.models),
        ):
            where = field_name if "." in field_name else f"workflow.{field_name}"
            for name in names or []:
                if name not in known:
                    raise ConfigError(f"{where}: unknown {kind} {name!r}; {kind}s: {', '.join(known)}")
        scheduled = {*w.grpo, *w.pair_methods, *w.group_methods, *w.ablations, *(["replay"] if w.replay else [])}
        for name in w.method_seeds:
            if name not in scheduled:
                raise ConfigError(
                    f"workflow.method_seeds: {name!r} is not scheduled; allowed: {', '.join(sorted(scheduled))}"
                )
        for name in w.cell_seeds:
            if name not in self.models and name not in self.pairs and name not in self.groups:
                raise ConfigError(
                    f"workflow.cell_seeds: {name!r} is neither a model, a pair nor a group; allowed: "
                    f"{', '.join([*self.models, *self.pairs, *self.groups])}"
                )
        for name in self.toy.models if self.toy else {}:
            if name not in self.models:
                raise ConfigError(f"toy.models.{name}: not in models ({', '.join(self.models)})")
            if self.models[name].chat and not self.models[name].chat_template:
                raise ConfigError(
                    f"models.{name}.chat_template: a toy tokenizer ships no chat template; set one "
                    "(config/chat_templates/chatml_user.jinja) or chat: false"
                )
        problem = self.gpu_ask_problem()
        if problem:
            raise ConfigError(problem)
        self.gpu()  # a GPU type the table lacks, without the figures it needs, is refused now


def read_yaml(path: str | Path) -> dict[str, Any]:
    """A YAML mapping from a file (graft.typed_config.load_yaml); ConfigError for a missing, unparsable or
    non-mapping file, or one with a duplicate key."""
    path = check_input("--config", Path(path), "file")
    try:
        text = path.read_text()
    except OSError as err:
        raise ConfigError(f"--config: {describe(err)}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"--config: {str(path)!r} is not UTF-8 text; expected a YAML file") from None
    data = load_yaml(text, f"--config: {str(path)!r}")
    if not isinstance(data, dict):
        raise ConfigError(f"--config: {str(path)!r} must hold a mapping of settings")
    return data


def apply_settings(data: dict[str, Any], settings: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """``data`` with each ``(dotted.key, value)`` of ``--set`` written in (a copy; missing sections are created)."""
    data = copy.deepcopy(data)
    for key, value in settings:
        *sections, name = key.split(".")
        where = data
        for depth, section in enumerate(sections):
            where = where.setdefault(section, {})
            if not isinstance(where, dict):
                raise ConfigError(f"--set {key}: {'.'.join(sections[: depth + 1])} is not a section of settings")
        where[name] = value
    return data


def _fill_results(value: Any, results: str) -> Any:
    """Replace ``{results}`` in every string of a (nested) value."""
    if isinstance(value, str):
        return value.replace("{results}", results)
    if isinstance(value, dict):
        return {k: _fill_results(v, results) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill_results(v, results) for v in value]
    return value


def _dataset_slots(data: dict[str, Any]) -> list[tuple[str, dict, str]]:
    """(field, mapping, key) of each value of a config that names a dataset: data.train, data.validation,
    eval.validation and each of eval.benchmarks."""
    sections = {name: data.get(name) if isinstance(data.get(name), dict) else {} for name in ("data", "eval")}
    slots = [
        (f"config.{section}.{key}", sections[section], key)
        for section, key in (("data", "train"), ("data", "validation"), ("eval", "validation"))
        if key in sections[section]
    ]
    benchmarks = sections["eval"].get("benchmarks")
    if isinstance(benchmarks, dict):
        slots += [(f"config.eval.benchmarks.{name}", benchmarks, name) for name in benchmarks]
    return slots


def _fetched_files(data: dict[str, Any], results: str) -> None:
    """Replace each hub dataset the config names in place of a data file (``hf://...``) by the file rule
    fetch_dataset writes it to (``FETCHED_FILE``), which the jobs read."""
    for where, values, key in _dataset_slots(data):
        value = values[key]
        if isinstance(value, str) and value.startswith("hf://"):
            values[key] = FETCHED_FILE.format(results=results, name=hub_dataset(value, where).name)


def load_config(path: str | Path, settings: Sequence[tuple[str, Any]] = ()) -> RunConfig:
    """Read and validate a YAML run config, with ``settings`` (``--set``) written over it; raises ConfigError with
    one line on any problem.

    ``{results}`` in model and data paths stands for the config's results directory, so built toy models live
    under the outputs of the configuration that built them; a hub dataset (``hf://...``) in place of a data file
    stands for the file it is fetched into there.
    """
    return config_from_dict(apply_settings(read_yaml(path), settings))


def parse_config_strings(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with each string read as the number, bool or null its field expects (graft.typed_config's
    ``parse_strings``): Snakemake's ``--config`` values and ``--set`` arrive as text."""
    return parse_strings(data, RunConfig)


def config_from_dict(data: dict[str, Any]) -> RunConfig:
    """Validate an already parsed config (e.g. Snakemake's merged ``config``)."""
    data = parse_config_strings(data)
    results = data.get("results")
    if isinstance(results, str):
        for section in ("models", "data", "eval"):
            if section in data:
                data[section] = _fill_results(data[section], results)
        _fetched_files(data, results)
    return from_dict(RunConfig, data, "config")
