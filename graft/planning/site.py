"""The Slurm site in the workflow: each rule's Slurm resources from the config's ``slurm`` section, the lead of
the warning before a training job's time limit, and the check of the site that Snakemake runs before it submits a
job (graft.planning.preflight runs ``sinfo`` and ``scontrol show config``; the parsers and checks here read their
text, so that recorded output tests them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from graft.config import RunConfig
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


def runtime_hours(cfg: RunConfig, rule: str) -> float | None:
    """The time limit ``rule``'s jobs ask for: training ``slurm.max_runtime_hours``, an evaluation
    ``slurm.evaluation_hours`` but never more; None (the profile's runtime) where those are unset and for the rules
    that do not run on GPUs."""
    site = cfg.slurm
    if rule == "train":
        return site.max_runtime_hours
    if rule not in GPU_RULES or site.evaluation_hours is None:
        return None
    return min(site.evaluation_hours, site.max_runtime_hours or site.evaluation_hours)


def rule_resources(cfg: RunConfig, rule: str) -> dict[str, str | int]:
    """``rule``'s resources for snakemake-executor-plugin-slurm from ``slurm``: partition, account, QoS,
    constraint, time limit and GPUs (a training job's as GRES, ``scale.processes`` on each node; an evaluation's
    as one ``gpu`` of ``gpu_model``). Unset fields add nothing, so the profile's resources stay."""
    site = cfg.slurm
    gpu = rule in GPU_RULES
    named = {
        "slurm_partition": site.gpu_partition if gpu else site.cpu_partition,
        "slurm_account": site.account,
        "qos": site.qos,
        "constraint": site.constraint if gpu else None,
    }
    resources: dict[str, str | int] = {name: value for name, value in named.items() if value}
    hours = runtime_hours(cfg, rule)
    if hours is not None:
        resources["runtime"] = math.ceil(hours * 60)
    if gpu and site.gpus:
        # one Slurm task holds every GPU of the node (torchrun's processes), not one task per GPU
        resources["tasks_per_gpu"] = 0
        if rule == "train":
            count = cfg.scale.processes
            resources["gres"] = f"gpu:{site.gpu_type}:{count}" if site.gpu_type else f"gpu:{count}"
        else:
            resources["gpu"] = 1
            if site.gpu_type:
                resources["gpu_model"] = site.gpu_type
    return resources


def stop_lead_seconds(cfg: RunConfig, method: str, models: tuple[str, ...]) -> int | None:
    """How long before its time limit a training cell's job must be warned to finish its step and save: its longest
    predicted step (dynamic sampling's every extra draw made), twice over (``STEP_MARGIN``), plus the save of an
    interim checkpoint (weights and resume state of each model at ``slurm.save_gb_per_s``) and the signal's delay,
    in whole minutes. None where the step time has no figures (a CPU configuration)."""
    longest = longest_step_seconds(cfg, get_method(method, cfg.methods), models)
    saved = [checkpoint_bytes(cfg, m) for m in models] + [resume_bytes(cfg, m) for m in models]
    if longest is None or None in saved:
        return None
    save = sum(saved) / (cfg.slurm.save_gb_per_s * 1e9)
    seconds = STEP_MARGIN * longest + save + SIGNAL_DELAY_S
    return math.ceil(seconds / 60) * 60


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


SINFO_FORMAT = "%P|%l|%G"
"""``sinfo -h -a -o`` format that ``parse_sinfo`` reads: partition (``*`` marks the default), time limit, GRES."""


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


def parse_sinfo(text: str) -> dict[str, Partition]:
    """The partitions of ``sinfo -h -a -o "%P|%l|%G"`` (one line per partition and kind of node)."""
    found: dict[str, Partition] = {}
    for line in text.splitlines():
        if line.count("|") != 2:
            continue
        name, limit, gres = (field.strip() for field in line.split("|"))
        default = name.endswith("*")
        name = name.rstrip("*")
        types, gpus = set(), False
        for item in gres.split(","):
            parts = item.split("(")[0].split(":")
            if parts[0] == "gpu":
                gpus = True
                if len(parts) == 3:
                    types.add(parts[1])
        before = found.get(name)
        if before is not None:
            types |= before.gpu_types
            gpus = gpus or before.gpus
        found[name] = Partition(name, default, parse_time_limit(limit), frozenset(types), gpus)
    return found


def parse_proctrack(text: str) -> str | None:
    """``ProctrackType`` of ``scontrol show config``'s output (e.g. ``proctrack/cgroup``); None if absent."""
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "ProctrackType":
            return value.strip()
    return None


def site_problems(cfg: RunConfig, partitions: dict[str, Partition]) -> list[str]:
    """What the cluster lacks that the config's ``slurm`` section asks for, one line each: a partition it does
    not have, a time limit its partition does not allow, a GPU GRES type (or GPUs) its GPU partition does not
    have."""
    if not partitions:
        return [f'slurm: sinfo lists no partition (sinfo -h -a -o "{SINFO_FORMAT}"); run Snakemake where sinfo works']
    site = cfg.slurm
    names = ", ".join(sorted(partitions))
    problems = []
    for field, name, rules in (
        ("gpu_partition", site.gpu_partition, GPU_RULES),
        ("cpu_partition", site.cpu_partition, ()),
    ):
        if name is None:
            chosen = next((p for p in partitions.values() if p.default), None)
            if chosen is None:
                problems.append(f"slurm.{field}: this cluster has no default partition; set one of: {names}")
                continue
        elif name not in partitions:
            problems.append(f"slurm.{field}: no partition {name!r} on this cluster (sinfo); partitions: {names}")
            continue
        else:
            chosen = partitions[name]
        for rule in rules:
            hours = runtime_hours(cfg, rule)
            if hours is not None and chosen.max_hours is not None and hours > chosen.max_hours:
                problems.append(
                    f"slurm.max_runtime_hours: {rule} jobs ask for {hours:g} h, more than partition {chosen.name!r} "
                    f"allows (MaxTime {chosen.max_hours:g} h); set slurm.max_runtime_hours: {chosen.max_hours:g}"
                )
                break
        if rules and site.gpus:
            if not chosen.gpus:
                problems.append(
                    f"slurm.gpus: partition {chosen.name!r} has no GPUs (no gpu GRES in sinfo -o %G); set "
                    "slurm.gpu_partition to a partition with GPUs"
                )
            elif site.gpu_type and site.gpu_type not in chosen.gpu_types:
                types = ", ".join(sorted(chosen.gpu_types)) or "none (untyped GPUs: set slurm.gpu_type: null)"
                problems.append(
                    f"slurm.gpu_type: {site.gpu_type!r} is no GPU GRES type of partition {chosen.name!r}; its types: "
                    f"{types}"
                )
    return problems


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
