"""The data files a config names, checked when the plan is made (``graft plan``, and the workflow's start): each
one that exists is read whole as a prompt set (graft.data.problems), so that a bad line is named before any job
runs; a missing one is refused unless a rule of the workflow makes it."""

from __future__ import annotations

from pathlib import Path

from graft.config import RunConfig
from graft.config.models import fetched_name, hub_dataset
from graft.data.fetch import SOURCES
from graft.data.problems import Problem, load_problems
from graft.errors import ConfigError


def data_files(cfg: RunConfig) -> dict[str, str]:
    """Each field of the config that names a data file, with the file (a hub dataset's is the one it is fetched
    into)."""
    files = {"data.train": cfg.data.train}
    if cfg.data.validation:
        files["data.validation"] = cfg.data.validation
    if cfg.eval is not None:
        files.update({f"eval.benchmarks.{name}": path for name, path in cfg.eval.benchmarks.items()})
        if cfg.eval.validation:
            files["eval.validation"] = cfg.eval.validation
    return files


def making_rule(cfg: RunConfig, path: str) -> str | None:
    """The rule of the workflow that makes a data file, or None: toy_data makes a toy config's files under
    ``<results>/toy/data/``, fetch_dataset the datasets it knows (a paper set or a hub dataset) under
    ``<results>/data/`` in any other config."""
    if cfg.toy is not None:
        return "toy_data" if (Path(cfg.results) / "toy" / "data").resolve() in Path(path).resolve().parents else None
    name = fetched_name(cfg.results, path)
    if name is None:
        return None
    try:
        known = name in SOURCES or name == "math_validation" or hub_dataset(name, "") is not None
    except ConfigError:  # under hf/ but no hub dataset's name
        known = False
    return "fetch_dataset" if known else None


def check_data(cfg: RunConfig) -> list[str]:
    """Refuse, before anything is submitted, a data file of the config that is missing and that no rule makes
    (``making_rule``), one that is not a prompt set of a supported layout (its first bad line named), and chat
    prompts for a model that sends none through a chat template; returns what ``graft plan`` prints of them."""
    lines = ["data files (each read whole; graft/data/problems.py lists the layouts):"]
    plain = [name for name, spec in cfg.models.items() if not spec.chat]
    read: dict[str, list[Problem]] = {}
    for what, path in data_files(cfg).items():
        if path not in read and not Path(path).exists():
            rule = making_rule(cfg, path)
            if rule is None:
                raise ConfigError(f"{what}: no such file {path!r}, and no rule of the workflow makes it")
            lines.append(f"  {what}: {path!r}, made by rule {rule}")
            continue
        if path not in read:
            read[path] = load_problems(path, what)
        chats = sum(not isinstance(p.problem, str) for p in read[path])
        if chats and plain:
            raise ConfigError(
                f"{what}: {path!r} holds chat prompts (lists of messages), which a chat template renders, but "
                f"models.{plain[0]} has chat: false; set chat: true (and chat_template where its tokenizer ships none)"
            )
        lines.append(f"  {what}: {path!r}: {len(read[path]):,} problems" + f", {chats:,} chat prompts" * bool(chats))
    return lines
