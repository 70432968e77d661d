"""The models, the training and validation data, the reward and the evaluation benchmarks: what a cell trains
and how its checkpoints are scored."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import parse_qsl

from graft.errors import ConfigError
from graft.typed_config import (
    NON_EMPTY,
    Count,
    FieldError,
    NonNegativeInt,
    OpenShare,
    PathText,
    Positive,
    Share,
)


@dataclass(frozen=True)
class ModelSizes:
    """A model's sizes for the memory plan (``graft plan``), as its config.json states them; needed only while the
    model is not downloaded (the plan reads config.json when it is)."""

    layers: Count
    """Decoder blocks (``num_hidden_layers``)."""
    hidden: Count
    """Width of the residual stream (``hidden_size``)."""
    intermediate: Count
    """Width of each block's gated MLP (``intermediate_size``)."""
    heads: Count
    """Attention query heads (``num_attention_heads``)."""
    kv_heads: Count
    """Attention key and value heads (``num_key_value_heads``); fewer than ``heads`` under grouped-query attention."""
    head_dim: Count
    """Width of one attention head (``head_dim``)."""
    vocab: Count
    """Tokens in the vocabulary (``vocab_size``)."""
    tied: bool = True
    """The output projection is the input embedding (one [vocab, hidden] matrix)."""


@dataclass(frozen=True)
class ModelSpec:
    """One policy: a local Hugging Face ``from_pretrained`` directory and how prompts are formatted for it."""

    path: PathText
    """Directory with config.json, model.safetensors and the tokenizer files."""

    template: str = "{problem}"
    """Prompt template with a ``{problem}`` slot, applied identically to own prompts, evaluation and the
    re-tokenization of a peer's response; with ``chat`` it is the content of the one user message."""

    chat: bool = False
    """Send the filled template as a single user message through the chat template, with the generation prompt
    (the paper's format, Appendix B)."""

    chat_template: PathText | None = None
    """A Jinja file used instead of the tokenizer's chat template (needed for a base model that ships none, and
    to keep a template that writes today's date out of the prompt); None: the tokenizer's own."""

    hub_id: str | None = None
    """Hugging Face id the models stage snapshots into ``path`` (paper config); None for built models."""

    dtype: Literal["float32", "bfloat16"] = "float32"
    """Parameter dtype for training and rollout."""

    sizes: ModelSizes | None = None
    """Sizes for the memory plan while the model is not downloaded; None: read from ``path``/config.json."""

    lr: Positive | None = None
    """This model's AdamW learning rate; None: ``train.lr``. The paper trains every model at 1e-6; the miniature's
    tiny models move at different rates per step, so its default picks one per model on validation prompts."""

    def __post_init__(self) -> None:
        if "{problem}" not in self.template:
            hint = "; for the chat format write chat: true, template: '{problem} ...'" * (self.template == "chat")
            raise FieldError("template", f"{self.template!r} has no '{{problem}}' slot{hint}")
        if self.chat_template is not None:
            if not self.chat:
                raise FieldError("chat_template", "needs chat: true")
            if not Path(self.chat_template).is_file():
                raise FieldError("chat_template", f"no such file {self.chat_template!r}")


HUB_ID = "hf://<owner>/<name>?split=<split>[&config=<config>]"
"""How a config names a split of a dataset on the Hugging Face hub in place of a data file."""
FETCHED_FILE = "{results}/data/{name}.jsonl"
"""Where rule fetch_dataset writes the dataset of that name (a paper set, or a hub dataset's ``HubDataset.name``),
which the jobs read: a hub id in the config stands for this file."""
_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def fetched_name(results: str, path: str) -> str | None:
    """The name of the dataset whose fetched file (``FETCHED_FILE``) ``path`` is, or None for any other file."""
    head, tail = FETCHED_FILE.format(results=results, name="\0").split("\0")
    try:
        name = Path(path).resolve().relative_to(Path(head).resolve()).as_posix()
    except ValueError:
        return None
    return name.removesuffix(tail) if name.endswith(tail) else None


@dataclass(frozen=True)
class HubDataset:
    """A split of a dataset on the Hugging Face hub (in one of its configs, where it has several)."""

    repo: str
    """``<owner>/<name>``."""
    split: str
    config: str | None = None

    @property
    def id(self) -> str:
        """As a config names it (``HUB_ID``)."""
        return f"hf://{self.repo}?split={self.split}" + (f"&config={self.config}" if self.config else "")

    @property
    def name(self) -> str:
        """Its name in the results tree, ``hf/<owner>/<name>[/<config>]/<split>`` (``FETCHED_FILE``)."""
        return "/".join(["hf", self.repo, *([self.config] if self.config else []), self.split])


def hub_dataset(text: str, where: str) -> HubDataset | None:
    """The hub dataset ``text`` names, by its id (``HUB_ID``) or by its name in the results tree (``HubDataset.name``,
    what rule fetch_dataset passes on); None where it names neither. A malformed one is refused with one line."""
    if text.startswith("hf://"):
        repo, _, query = text.removeprefix("hf://").partition("?")
        pairs = parse_qsl(query, keep_blank_values=True)
        fields = dict(pairs)
        found = HubDataset(repo, fields.get("split", ""), fields.get("config"))
        ok = len(fields) == len(pairs) == query.count("=") and "split" in fields and set(fields) <= {"split", "config"}
    elif text.startswith("hf/"):
        parts = text.split("/")[1:]
        found = HubDataset("/".join(parts[:2]), parts[-1], parts[2] if len(parts) == 4 else None)
        ok = len(parts) in (3, 4)
    else:
        return None
    owner, _, name = found.repo.partition("/")
    parts = (owner, name, found.split, *([found.config] if found.config is not None else []))
    if not ok or not all(_PART.fullmatch(part) for part in parts):
        raise ConfigError(f"{where}: {text!r} is not a hub dataset; expected {HUB_ID}")
    return found


@dataclass(frozen=True)
class DataSpec:
    """Where the prompts come from. Each is a file, JSON Lines (.jsonl, .json) or Parquet (.parquet), in graft's,
    TRL's or verl's layout (graft.data.problems), or a dataset on the Hugging Face hub named ``HUB_ID``, which rule
    fetch_dataset fetches into ``FETCHED_FILE`` before any job reads it."""

    train: PathText
    """Training prompts."""

    validation: PathText | None = None
    """Validation prompts (checkpoint selection disjoint from the test benchmarks)."""


@dataclass(frozen=True)
class RewardSpec:
    kind: Literal["toy", "math"] = "math"
    """toy: exact integer match of the last \\boxed{}; math: math-verify on the final boxed answer."""

    timeout: Positive = 5.0
    """Hard per-item grading timeout in seconds; a timeout scores 0."""

    workers: Count = 2
    """Grading processes (math only; the toy grader runs in-process)."""


@dataclass(frozen=True)
class EvalSpec:
    """How checkpoints are evaluated (paper Appendix B)."""

    benchmarks: Annotated[dict[str, PathText], NON_EMPTY]
    """Benchmark name -> its file or hub dataset (as ``DataSpec`` names them); the score is the unweighted mean over
    these."""
    validation: PathText | None = None
    """A held-out set disjoint from the benchmarks, for checkpoint selection that does not peek at test."""
    k: Count = 8
    """Samples per problem; pass@1 is the mean over samples, then problems."""
    temperature: Positive = 0.6
    """Sampling temperature of the evaluation (0.6 in the paper's Appendix B)."""
    top_p: Share = 0.95
    """Nucleus sampling's probability mass of the evaluation (0.95 in the paper)."""
    max_response_tokens: Count | None = None
    """None: the training limit."""
    selection_runs: NonNegativeInt = 0
    """Evaluations of each run's selected checkpoint (``report.selection``) with fresh sampling seeds, after the
    checkpoint evaluations that selected it (paper Appendix B: "each selected checkpoint is evaluated over five
    independent runs"; 5 in the paper config). The report's scores of a selected checkpoint are then the mean
    (and std) of these runs, never the run that selected it, whose score is biased upward by the selection.
    0: no re-evaluation; the report says that its scores are those of the selecting run."""
    vllm_memory: OpenShare = 0.85
    """The share of its GPU's memory the evaluation's vLLM engine takes (``scale.rollout: vllm``). A job holds one
    engine at a time, stopping one model's before it starts the next's, so the share is the whole job's."""
