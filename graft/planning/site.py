"""The Slurm site in the workflow: each rule's Slurm resources from the config's ``slurm`` section and the GPU
partition's nodes, the lead of the warning before a training job's time limit, and the check of the site that
Snakemake runs before it submits a job (graft.planning.preflight runs ``sinfo``, ``sacctmgr`` and ``scontrol show
config``; the parsers and checks here read their text, so that recorded output tests them). The one command run
here is ``sinfo``, once, for the nodes' figures that the ``slurm`` section leaves unset (``cluster_partitions``).
"""

from __future__ import annotations

import functools
import math
import re
import shutil
import subprocess
from dataclasses import dataclass

from graft.config import RunConfig
from graft.errors import ConfigError
from graft.methods import get_method
from graft.planning.disk import checkpoint_bytes, resume_bytes
from graft.planning.step_time import longest_step_seconds

GPU_RULES = ("train", "evaluate_checkpoints", "evaluate_base", "reevaluate_selected")
"""The rules whose jobs run on GPUs (``slurm.gpus``) in ``slurm.gpu_partition``; every other rule's jobs run in
``slurm.cpu_partition``."""

STEP_MARGIN = 2.0
"""The warning's lead covers twice the predicted step: the step time's predictions run up to 1.6 times short of
the paper's measured steps (SmolLM3's GRPO n=32, docs/paper-on-slurm.md)."""

SIGNAL_DELAY_S = 60
"""Slurm sends the warning when it next checks the time limits (about every 30 s), so up to this much late."""


def runtime_hours(cfg: RunConfig, rule: str, predicted: float | None = None, lead_s: float = 0) -> float | None:
    """The time limit a job of ``rule`` asks for: its ``predicted`` length in hours (graft.planning.job_lengths)
    times ``slurm.runtime_factor``, plus ``lead_s``, a training job's warning before its limit
    (``stop_lead_seconds``), within the site's limit: training ``slurm.max_runtime_hours``, an evaluation
    ``slurm.evaluation_hours`` and never more. Without a prediction (CPU jobs, a GPU without a peak) the site's
    limit itself; None (the profile's runtime) where neither is known, and for the rules that do not run on GPUs."""
    site = cfg.slurm
    if rule not in GPU_RULES:
        return None
    limits = [site.max_runtime_hours] if rule == "train" else [site.evaluation_hours, site.max_runtime_hours]
    limit = min((h for h in limits if h is not None), default=None)
    if predicted is None:
        return limit if rule == "train" or site.evaluation_hours is not None else None
    ask = predicted * site.runtime_factor + lead_s / 3600
    return ask if limit is None else min(limit, ask)


def runtime_minutes(cfg: RunConfig, rule: str, predicted: float | None = None, lead_s: float = 0) -> int | None:
    """``runtime_hours`` in Slurm's whole minutes (the executor plugin's ``runtime``)."""
    hours = runtime_hours(cfg, rule, predicted, lead_s)
    return None if hours is None else math.ceil(hours * 60)


def runtime_asks(cfg: RunConfig, cells, hours: dict[str, dict[tuple, float | None]]) -> dict[str, dict[tuple, int]]:
    """Each GPU job's time limit in minutes (``runtime_minutes``), per rule and by the wildcards that key ``hours``
    (graft.planning.job_lengths.job_hours), a training job's with the lead of its cell (``cells``:
    graft.planning.plan.TrainingCell); only the rules whose every job has a predicted length, so that the others
    keep the site's limit (``rule_resources``)."""
    leads = {(c.method, c.cell, c.seed): stop_lead_seconds(cfg, c.method, c.models) or 0 for c in cells}
    return {
        rule: {key: runtime_minutes(cfg, rule, h, leads[key] if rule == "train" else 0) for key, h in jobs.items()}
        for rule, jobs in hours.items()
        if rule in GPU_RULES and jobs and None not in jobs.values()
    }


def rule_resources(cfg: RunConfig, rule: str, partitions: dict[str, Partition] | None = None) -> dict[str, str | int]:
    """``rule``'s resources for snakemake-executor-plugin-slurm from ``slurm``: partition, account, QoS,
    constraint, the site's time limit (a job with a predicted length asks for less: ``runtime_hours``), GPUs (a
    training job's as GRES, ``scale.processes`` on each node; an evaluation's as one ``gpu`` of ``gpu_model``) and a
    GPU job's share of its node's CPUs and memory (``node_share``, with the figures the section leaves unset from
    ``partitions``: sinfo's, read here where None). Unset fields add nothing, so the profile's resources stay."""
    site = cfg.slurm
    gpu = rule in GPU_RULES
    named = {
        "slurm_partition": site.gpu_partition if gpu else site.cpu_partition,
        "slurm_account": site.account,
        "qos": site.qos,
        "constraint": site.constraint if gpu else None,
    }
    resources: dict[str, str | int] = {name: value for name, value in named.items() if value}
    minutes = runtime_minutes(cfg, rule)
    if minutes is not None:
        resources["runtime"] = minutes
    if gpu and site.gpus:
        # one Slurm task holds every GPU of the node (torchrun's processes), not one task per GPU
        resources["tasks_per_gpu"] = 0
        typed = gres_type(site.gpu_type)
        if rule == "train":
            count = cfg.scale.processes
            resources["gres"] = f"gpu:{typed}:{count}" if typed else f"gpu:{count}"
        else:
            resources["gpu"] = 1
            if typed:
                resources["gpu_model"] = typed
        if partitions is None:
            figures = (site.node_cpus, site.node_memory_mb, site.node_gpus)
            partitions = cluster_partitions() if None in figures else {}
        node = gpu_node(cfg, partitions)
        if node is not None:
            resources.update(node_share(cfg, rule, node))
    return resources


PLUGIN_GRES_TYPE = re.compile(r"[A-Za-z0-9_.]+")
"""The GRES types snakemake-executor-plugin-slurm passes to sbatch (its own check, as of 2.8)."""


def gres_type(gpu_type: str | None) -> str | None:
    """The GRES type the jobs ask for: ``slurm.gpu_type``, or None (any GPU of the partition) where there is none or
    the Slurm executor plugin cannot pass it (a ``-``, as Slurm's AutoDetect=nvml writes them)."""
    return gpu_type if gpu_type and PLUGIN_GRES_TYPE.fullmatch(gpu_type) else None


@dataclass(frozen=True)
class Node:
    """A node of the GPU partition: what a GPU job's share of CPUs and memory is counted from."""

    cpus: int
    memory_mb: int
    """Slurm's MB (``--mem``)."""
    gpus: int


def gpu_node(cfg: RunConfig, partitions: dict[str, Partition]) -> Node | None:
    """A node of the GPU partition: the ``slurm`` section's figures (``node_cpus``, ``node_memory_mb``,
    ``node_gpus``), each one it leaves unset that of the partition's smallest GPU node in sinfo's ``partitions``;
    None where a figure is neither."""
    site = cfg.slurm
    part = chosen_partition(site.gpu_partition, partitions)
    cpus = site.node_cpus or (part.cpus if part else None)
    memory = site.node_memory_mb or (part.memory_mb if part else None)
    gpus = site.node_gpus or (part.node_gpus if part else None)
    return Node(cpus, memory, gpus) if cpus and memory and gpus else None


def node_share(cfg: RunConfig, rule: str, node: Node) -> dict[str, int]:
    """A GPU job's CPUs and memory: its GPUs' share of its node's (a training job's ``scale.processes`` GPUs on each
    of its nodes, an evaluation's one), so that the node's other GPUs keep theirs."""
    gpus = cfg.scale.processes if rule == "train" else 1
    share = min(gpus, node.gpus) / node.gpus
    return {"cpus_per_task": max(1, math.floor(node.cpus * share)), "mem_mb": math.floor(node.memory_mb * share)}


def slurm_output(command: list[str]) -> str | None:
    """A Slurm command's standard output; None where it is missing or fails (the checks then say what is missing)."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


@functools.cache
def cluster_partitions() -> dict[str, Partition]:
    """This cluster's partitions, read from sinfo once per process (when the workflow starts: the GPU nodes' figures
    that the ``slurm`` section leaves unset); none where sinfo is not on the PATH."""
    if shutil.which("sinfo") is None:
        return {}
    return parse_sinfo(slurm_output(["sinfo", "-h", "-a", "-o", SINFO_FORMAT]) or "")


def stop_lead_seconds(cfg: RunConfig, method: str, models: tuple[str, ...]) -> int | None:
    """How long before its time limit a training cell's job must be warned to finish its step and save: its longest
    predicted step (dynamic sampling's every extra draw made), twice over (``STEP_MARGIN``), plus the save of an
    interim checkpoint (weights and resume state of each model at ``slurm.save_gb_per_s``) and the signal's delay,
    in whole minutes. None where the step time has no figures (CPU jobs, or a GPU without a peak)."""
    longest = longest_step_seconds(cfg, get_method(method, cfg.methods), models)
    saved = [checkpoint_bytes(cfg, m) for m in models] + [resume_bytes(cfg, m) for m in models]
    if longest is None or None in saved:
        return None
    save = sum(saved) / (cfg.slurm.save_gb_per_s * 1e9)
    seconds = STEP_MARGIN * longest + save + SIGNAL_DELAY_S
    return math.ceil(seconds / 60) * 60


def check_time_limit(cfg: RunConfig, cells) -> None:
    """Refuse a training time limit (``slurm.max_runtime_hours``) in which a job of one of ``cells`` (each with a
    ``method`` and ``models``) could finish no step: Slurm warns it ``stop_lead_seconds`` before the limit to save
    and stop, so the limit needs that lead and a step besides, or each retry would resume, save and stop at the
    same step (``train.checkpoint_minutes`` cannot help). Nothing is checked where the step time has no figures."""
    hours = cfg.slurm.max_runtime_hours
    if hours is None:
        return
    need = None
    for method, models in dict.fromkeys((c.method, c.models) for c in cells):
        lead = stop_lead_seconds(cfg, method, models)
        step = longest_step_seconds(cfg, get_method(method, cfg.methods), models)
        if lead is not None and step is not None and (need is None or lead + step > need[0]):
            need = (lead + step, method, models, lead, step)
    if need is None or math.ceil(hours * 60) * 60 >= need[0]:  # Slurm's limit: whole minutes (rule_resources)
        return
    seconds, method, models, lead, step = need
    raise ConfigError(
        f"slurm.max_runtime_hours: {hours:g} leaves a training job no step: {method} on {', '.join(models)} is "
        f"warned {lead // 60} min before its limit to save (graft.planning.site.stop_lead_seconds) and a step takes "
        f"up to {math.ceil(step)} s; expected at least {math.ceil(seconds / 36) / 100:g} hours"
    )


@dataclass(frozen=True)
class Partition:
    """One partition as ``sinfo`` shows it."""

    name: str
    default: bool
    max_hours: float | None
    """Its MaxTime; None: no limit."""
    gpu_types: frozenset[str]
    """The types of its nodes' GPU GRES (``gpu:<type>:<count>``); empty where they have untyped GPUs or none."""
    gpus: bool
    """Whether any of its nodes has a GPU GRES."""
    cpus: int | None
    """CPUs of its smallest node (of those with GPUs, where it has any); None: sinfo gave no number."""
    memory_mb: int | None
    """Memory of its smallest node, as ``cpus``, in Slurm's MB."""
    node_gpus: int | None
    """GPUs of its node with the fewest; None: no GPU GRES."""


SINFO_FORMAT = "%P|%l|%G|%c|%m"
"""``sinfo -h -a -o`` format that ``parse_sinfo`` reads: partition (``*`` marks the default), time limit, GRES,
CPUs and memory (MB) per node."""


def chosen_partition(name: str | None, partitions: dict[str, Partition]) -> Partition | None:
    """The partition ``name`` of ``partitions``, the default one for None; None where there is no such partition."""
    if name is None:
        return next((p for p in partitions.values() if p.default), None)
    return partitions.get(name)


def parse_time_limit(text: str) -> float | None:
    """Hours of a Slurm time limit (``infinite``, ``[days-]hours:minutes:seconds``, ``minutes:seconds`` or
    ``minutes``); None: no limit."""
    text = text.strip()
    if text.lower() in ("infinite", "unlimited", "n/a", ""):
        return None
    days, _, clock = text.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    if len(parts) == 3:
        hours, minutes, seconds = parts
    elif len(parts) == 2:
        hours, (minutes, seconds) = 0, parts
    else:
        hours, minutes, seconds = 0, parts[0], 0
    return int(days or 0) * 24 + hours + minutes / 60 + seconds / 3600


def _count(text: str) -> int | None:
    """A number of sinfo's (``64``, or ``48+`` where the nodes of a line differ: their least); None: none."""
    text = text.strip().rstrip("+")
    return int(text) if text.isdigit() else None


@dataclass(frozen=True)
class _SinfoLine:
    """One line of sinfo's: a partition's nodes of one kind."""

    default: bool
    max_hours: float | None
    gpu_types: frozenset[str]
    has_gpus: bool
    gpus: int | None
    cpus: int | None
    memory_mb: int | None


def _read_line(line: str) -> tuple[str, _SinfoLine]:
    """A partition's name and its nodes of one kind, from a line of ``sinfo -o SINFO_FORMAT``."""
    name, limit, gres, cpus, memory = (field.strip() for field in line.split("|"))
    types, has_gpus, gpus = set(), False, None
    for item in gres.split(","):
        parts = item.split("(")[0].split(":")  # gpu[:<type>]:<count>, then (S:<sockets>)
        if parts[0] == "gpu":
            has_gpus, gpus = True, _count(parts[-1])
            types.update(parts[1:-1])
    kind = _SinfoLine(
        name.endswith("*"), parse_time_limit(limit), frozenset(types), has_gpus, gpus, _count(cpus), _count(memory)
    )
    return name.rstrip("*"), kind


def parse_sinfo(text: str) -> dict[str, Partition]:
    """The partitions of ``sinfo -h -a -o "%P|%l|%G|%c|%m"`` (one line per partition and kind of node); a
    partition's CPUs, memory and GPUs per node are those of its smallest node with GPUs (any node where none
    has)."""
    kinds: dict[str, list[_SinfoLine]] = {}
    for line in text.splitlines():
        if line.count("|") == SINFO_FORMAT.count("|"):
            name, nodes = _read_line(line)
            kinds.setdefault(name, []).append(nodes)
    found = {}
    for name, lines in kinds.items():
        nodes = [k for k in lines if k.has_gpus] or lines
        found[name] = Partition(
            name,
            default=any(k.default for k in lines),
            max_hours=lines[0].max_hours,
            gpu_types=frozenset().union(*(k.gpu_types for k in lines)),
            gpus=any(k.has_gpus for k in lines),
            cpus=_least([k.cpus for k in nodes]),
            memory_mb=_least([k.memory_mb for k in nodes]),
            node_gpus=_least([k.gpus for k in nodes]),
        )
    return found


def _least(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return min(known) if known else None


def parse_proctrack(text: str) -> str | None:
    """``ProctrackType`` of ``scontrol show config``'s output (e.g. ``proctrack/cgroup``); None if absent."""
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "ProctrackType":
            return value.strip()
    return None


PLACEHOLDERS = {
    "gpu_partition": "the partition of this cluster's GPU nodes",
    "cpu_partition": "a partition for the other jobs, or null for the default one",
    "account": "your Slurm account (sacctmgr show associations user=$USER format=account -n -P lists them), or "
    "null for your default one",
    "qos": "a QoS your account may use (sacctmgr show associations user=$USER format=qos -n -P), or null",
    "constraint": "the node features the GPU jobs need (sinfo -o %f), or null",
}
"""The ``slurm`` fields that may hold a placeholder, ``<...>``, and what to set in its place."""


def is_placeholder(value: str | None) -> bool:
    """Whether a value of the ``slurm`` section is a placeholder for the user to fill (``<your Slurm account>``)."""
    return value is not None and value.startswith("<") and value.endswith(">")


def limit_problem(
    cfg: RunConfig, rules: tuple[str, ...], max_hours: float | None, where: str, limit: str
) -> str | None:
    """The first of ``rules`` whose jobs ask for more time than ``where`` allows (its ``limit``, ``max_hours``;
    None: no limit), naming the setting that sets it, or None."""
    for rule in rules:
        hours = runtime_hours(cfg, rule)
        if hours is not None and max_hours is not None and hours > max_hours:
            field = "max_runtime_hours" if rule == "train" else "evaluation_hours"
            return (
                f"slurm.{field}: {rule} jobs ask for {hours:g} h, more than {where} allows ({limit} {max_hours:g} h); "
                f"set slurm.{field}: {max_hours:g}"
            )
    return None


def node_problems(cfg: RunConfig, partition: Partition) -> list[str]:
    """What the GPU partition's nodes lack that the config asks of one: GPUs for a training job's processes, and the
    CPUs, memory and GPUs the ``slurm`` section says a node has (a job's share would ask for more than it has)."""
    problems = []
    if partition.node_gpus is not None and cfg.scale.processes > partition.node_gpus:
        problems.append(
            f"scale.processes: a training job asks for {cfg.scale.processes} GPUs on each node, more than partition "
            f"{partition.name!r}'s nodes have ({partition.node_gpus}, sinfo -o %G)"
        )
    site = cfg.slurm
    for field, value, actual, column in (
        ("node_cpus", site.node_cpus, partition.cpus, "%c"),
        ("node_memory_mb", site.node_memory_mb, partition.memory_mb, "%m"),
        ("node_gpus", site.node_gpus, partition.node_gpus, "%G"),
    ):
        if value is not None and actual is not None and value > actual:
            problems.append(
                f"slurm.{field}: {value}, more than partition {partition.name!r}'s nodes have ({actual}, sinfo -o "
                f"{column}); set slurm.{field}: {actual}, or null to follow sinfo"
            )
    return problems


def site_problems(cfg: RunConfig, partitions: dict[str, Partition]) -> list[str]:
    """What the cluster lacks that the config's ``slurm`` section asks for, one line each: a placeholder left to
    fill, a partition it does not have, a time limit its partition does not allow, a GPU GRES type (or GPUs) its
    GPU partition does not have, and nodes smaller than the section says."""
    if not partitions:
        return [
            f'slurm: sinfo lists no partition (sinfo -h -a -o "{SINFO_FORMAT}"); run Snakemake where sinfo works, or, '
            "where the site keeps sinfo from its users, skip this check: slurm.site_check: false"
        ]
    site = cfg.slurm
    names = ", ".join(sorted(partitions))
    problems = [
        f"slurm.{field}: {getattr(site, field)!r} is a placeholder; set {what}"
        + (f" (partitions: {names})" if field.endswith("partition") else "")
        for field, what in PLACEHOLDERS.items()
        if is_placeholder(getattr(site, field))
    ]
    for field, name, rules in (
        ("gpu_partition", site.gpu_partition, GPU_RULES),
        ("cpu_partition", site.cpu_partition, ()),
    ):
        if is_placeholder(name):
            continue
        chosen = chosen_partition(name, partitions)
        if chosen is None:
            problems.append(
                f"slurm.{field}: this cluster has no default partition; set one of: {names}"
                if name is None
                else f"slurm.{field}: no partition {name!r} on this cluster (sinfo); partitions: {names}"
            )
            continue
        problem = limit_problem(cfg, rules, chosen.max_hours, f"partition {chosen.name!r}", "MaxTime")
        problems += [problem] if problem else []
        if rules and site.gpus:
            if not chosen.gpus:
                problems.append(
                    f"slurm.gpus: partition {chosen.name!r} has no GPUs (no gpu GRES in sinfo -o %G); set "
                    "slurm.gpu_partition to a partition with GPUs"
                )
                continue
            if site.gpu_type and site.gpu_type not in chosen.gpu_types:
                types = ", ".join(sorted(chosen.gpu_types)) or "none (untyped GPUs: set slurm.gpu_type: null)"
                problems.append(
                    f"slurm.gpu_type: {site.gpu_type!r} is no GPU GRES type of partition {chosen.name!r}; its types: "
                    f"{types}"
                )
            elif site.gpu_type and not gres_type(site.gpu_type) and len(chosen.gpu_types) > 1:
                problems.append(
                    f"slurm.gpu_type: {site.gpu_type!r} holds a '-', which snakemake-executor-plugin-slurm cannot pass "
                    f"to sbatch, so the jobs ask for any GPU of partition {chosen.name!r}, whose nodes also have "
                    f"{', '.join(sorted(chosen.gpu_types - {site.gpu_type}))}; set slurm.gpu_partition or "
                    "slurm.constraint to nodes of that type only"
                )
            problems += node_problems(cfg, chosen)
    return problems


def parse_qos(text: str) -> dict[str, float | None]:
    """Each QoS of ``sacctmgr show qos <name> format=Name,MaxWall -n -P`` with its MaxWall in hours (None: no
    limit)."""
    found = {}
    for line in text.splitlines():
        name, _, wall = line.partition("|")
        if name.strip():
            found[name.strip()] = parse_time_limit(wall)
    return found


def qos_problem(cfg: RunConfig, found: dict[str, float | None]) -> str | None:
    """Why ``slurm.qos`` cannot hold the config's jobs, by sacctmgr's ``found`` QoS (``parse_qos``), or None: no such
    QoS, or a MaxWall shorter than a GPU job's time limit."""
    name = cfg.slurm.qos
    if name not in found:
        return f"slurm.qos: no QoS {name!r} on this cluster (sacctmgr show qos); set one your account may use, or null"
    return limit_problem(cfg, GPU_RULES, found[name], f"QoS {name!r}", "MaxWall")


def proctrack_warning(proctrack: str | None) -> str | None:
    """Why Slurm's warning before the time limit will not reach the trainers, or None: Slurm signals the processes
    it tracks, and ``proctrack/pgid`` tracks one process group, which the trainers leave (torchrun starts its
    workers in their own sessions)."""
    if proctrack != "proctrack/pgid":
        return None
    return (
        "warning: ProctrackType=proctrack/pgid (scontrol show config): Slurm's warning before a training job's time "
        "limit (--signal=URG) reaches no trainer, so a job at its limit loses up to train.checkpoint_minutes of "
        "training; proctrack/cgroup or proctrack/linuxproc deliver it"
    )
