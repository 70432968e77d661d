"""Experiment tracking: each step's metric rows, as written to ``metrics.jsonl``, also go to TensorBoard and/or
Weights & Biases (config ``logging.backends``), one run per training cell, named after the cell.

A row is per model; a backend gets ``<model>/<metric>`` for every numeric field of it at the row's step, so the
two models of a pair sit side by side and every name is the one in ``metrics.jsonl``. Lists (the weight
histogram, minibatch positions) and missing values are left to the JSON Lines. Only process 0 tracks.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import numbers
from pathlib import Path

from graft.config import RunConfig
from graft.errors import ConfigError

PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb"}


def check_backends(backends: list[str]) -> None:
    """Refuse, before any compute, a backend whose package is not installed."""
    for backend in backends:
        package = PACKAGES.get(backend)
        if package and importlib.util.find_spec(package) is None:
            raise ConfigError(
                f"logging.backends: {backend!r} needs the {package} package; "
                f"install it (pip install {package}, or the 'tracking' extra) or remove it from the list"
            )


def run_name(out: Path) -> str:
    """``<method>/<cell>/seed<S>`` for a workflow cell (``runs/<method>/<cell>/seed<S>``), else the directory."""
    parts = Path(out).resolve().parts
    return "/".join(parts[-3:]) if parts[-1].startswith("seed") and len(parts) >= 3 else parts[-1]


def scalars(rows: list[dict]) -> dict[str, float]:
    return {
        f"{row['model']}/{key}": float(value)
        for row in rows
        for key, value in row.items()
        if key not in ("step", "model") and isinstance(value, numbers.Real) and not isinstance(value, bool)
    }


class Tracker:
    """The chosen backends of one run; ``log(step, rows)`` once per step, ``close()`` at the end."""

    def __init__(self, config: RunConfig, out: Path, meta: dict, first_step: int):
        self.writers = []
        spec = config.logging
        check_backends(spec.backends)
        name = run_name(out)
        resolved = {"config": dataclasses.asdict(config), **meta}
        if "tensorboard" in spec.backends:
            from torch.utils.tensorboard import SummaryWriter

            # purge_step: events of steps a resume redoes are dropped, not shown twice
            writer = SummaryWriter(log_dir=str(out / "tensorboard"), purge_step=first_step or None)
            writer.add_text("config", f"```\n{resolved}\n```", global_step=first_step)
            self.writers.append(_TensorBoard(writer))
        if "wandb" in spec.backends:
            import wandb

            run = wandb.init(
                project=spec.wandb_project,
                entity=spec.wandb_entity,
                name=name,
                group=name.split("/")[0],
                tags=[part for part in name.split("/")],
                config=resolved,
                dir=str(out),
                id=hashlib.sha1(str(Path(out).resolve()).encode()).hexdigest()[:16],  # a resume continues it
                resume="allow",
                settings=wandb.Settings(quiet=True),
            )
            self.writers.append(_WandB(run))

    def log(self, step: int, rows: list[dict]) -> None:
        values = scalars(rows)
        for writer in self.writers:
            writer.log(step, values)

    def close(self) -> None:
        for writer in self.writers:
            writer.close()


class _TensorBoard:
    def __init__(self, writer):
        self.writer = writer

    def log(self, step: int, values: dict[str, float]) -> None:
        for key, value in values.items():
            self.writer.add_scalar(key, value, global_step=step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class _WandB:
    def __init__(self, run):
        self.run = run

    def log(self, step: int, values: dict[str, float]) -> None:
        self.run.log(values, step=step)

    def close(self) -> None:
        self.run.finish()
