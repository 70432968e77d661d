"""The toy world under a results tree (``graft toy data|model|build``): its data files, and each toy model copied
from the shipped ones where its settings equal one (graft.toy.shipped), else built (graft.toy.build). torch is
loaded only to build a model: writing the data and copying a shipped model take about a second without it."""

from __future__ import annotations

import time
from pathlib import Path

from graft.config import RunConfig
from graft.errors import ConfigError
from graft.toy.data import read_problems, write_data
from graft.toy.shipped import SHIPPED_ROOT, build_settings, choose, copy_shipped, read_manifest


def build_world(
    config: RunConfig,
    what: str,
    root: Path,
    name: str | None = None,
    log=None,
    shipped_root: Path = SHIPPED_ROOT,
    threads: int | None = None,
) -> dict:
    """``graft toy data|model|build``: the task's splits under ``root/data`` and/or warmed-up models under
    ``root/models/<name>`` (one named model, or every toy model for ``build``): each model copied from
    ``shipped_root`` where its settings equal a shipped model's (graft.toy.shipped.choose), else built.
    ``log(event, **fields)`` reports progress and where each model came from; ``threads``: torch's thread count for
    a build (a shipped model's settings record it), torch's own when None. Returns a summary per part."""
    if config.toy is None:
        raise ConfigError("toy: this config has no 'toy:' section to build from")
    toy = config.toy
    if what == "model" and name not in toy.models:
        raise ConfigError(f"--name: unknown toy model {name!r}; toy models: {', '.join(toy.models)}")
    names = [name] if what == "model" else list(toy.models)
    log = log or (lambda event, **fields: None)
    summary: dict = {}
    if what in ("data", "build"):
        summary["data"] = write_data(toy, root / "data")
        log("toy_data", **summary["data"])
    if what in ("model", "build"):
        warmup_file = root / "data" / "warmup.jsonl"
        if not warmup_file.is_file():
            raise ConfigError(f"toy model: {str(warmup_file)!r} is missing; run 'graft toy data' first")
        if threads is None:
            import torch

            threads = torch.get_num_threads()
        warmup = None
        for model in names:
            settings = build_settings(config, model, warmup_file, threads)
            directory, why = choose(config, model, settings, shipped_root)
            if directory is not None:
                start = time.perf_counter()
                copy_shipped(directory, read_manifest(shipped_root)["models"][model]["files"], root / "models" / model)
                info = {"model": model, "shipped": str(directory), "why": why}
                summary[model] = {**info, "seconds": round(time.perf_counter() - start, 1)}
                log("toy_model_shipped", **summary[model])
                continue
            log("toy_model_build", model=model, why=why)
            import torch

            from graft.toy.build import build_toy_model

            torch.set_num_threads(threads)
            if warmup is None:
                warmup = read_problems(warmup_file)
            of = toy.models[model].steps
            progress = lambda step, loss, model=model, of=of: log(  # noqa: E731
                "warmup", model=model, step=step, of=of, loss=round(loss, 4)
            )
            info = build_toy_model(model, toy, config.models[model], warmup, root / "models" / model, progress)
            summary[model] = info
            log("toy_model", **info)
    return summary
