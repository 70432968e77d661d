"""Build the toy world: data splits and the three warmed-up models (``graft toy build``)."""

from __future__ import annotations

import dataclasses
import json
import random
import time
from pathlib import Path

import torch

from graft.config import ModelSpec, RunConfig, ToySpec
from graft.engine.policy import Policy
from graft.engine.prompts import prompt_format
from graft.errors import ConfigError
from graft.results import begin_dir, commit_dir, write_text
from graft.seeding import derive
from graft.toy.dialect import draw, write
from graft.toy.models import ToyArch, build_model, build_tokenizer, save
from graft.toy.shipped import SHIPPED_ROOT, build_settings, choose, copy_shipped, read_manifest
from graft.toy.task import FAMILIES, ToyProblem, make_splits, slipped_solution
from graft.toy.warmup import warm_up


def _write_jsonl(path: Path, problems: list[ToyProblem]) -> None:
    write_text(path, "".join(json.dumps(p.to_json()) + "\n" for p in problems))


def write_data(spec: ToySpec, out: Path) -> dict[str, int]:
    """Under ``out``: warmup.jsonl (the whole train split, where warm-up examples come from), train.jsonl (the RL
    prompts: ``train_per_family`` of each family from the train split), validation.jsonl and test/<family>.jsonl.
    Returns the split sizes."""
    families = tuple(spec.families)
    splits = make_splits(
        spec.seed, spec.test_per_family, spec.validation_per_family, spec.level2_share, families, spec.min_slip_points
    )
    rng = random.Random(spec.seed)
    prompts = []
    for family in families:
        pool = [p for p in splits.train if p.family == family]
        prompts += rng.sample(pool, min(spec.train_per_family, len(pool)))
    rng.shuffle(prompts)
    _write_jsonl(out / "warmup.jsonl", splits.train)
    _write_jsonl(out / "train.jsonl", prompts)
    _write_jsonl(out / "validation.jsonl", splits.validation)
    for family, problems in splits.test.items():
        _write_jsonl(out / "test" / f"{family}.jsonl", problems)
    return {
        "warmup_pool": len(splits.train),
        "train": len(prompts),
        "validation": len(splits.validation),
        "test_per_family": spec.test_per_family,
    }


def read_problems(path: Path) -> list[ToyProblem]:
    """The toy problems of a file ``graft toy data`` wrote; ConfigError in one line naming the first bad line."""
    fields = ", ".join(f.name for f in dataclasses.fields(ToyProblem))
    problems = []
    for number, line in enumerate(path.read_text().split("\n"), 1):
        if not line.strip():
            continue
        try:
            problems.append(ToyProblem(**json.loads(line)))
        except (ValueError, TypeError):
            raise ConfigError(
                f"{str(path)!r} line {number} is not a toy problem: expected a JSON object with {fields}, as "
                "`graft toy data` writes (remove the toy data directory's files to have them written again)"
            ) from None
    return problems


SLIP_VARIANTS = 8


def warmup_examples(name: str, warmup: list[ToyProblem], toy: ToySpec) -> list[tuple[str, str]]:
    """Model ``name``'s warm-up examples in world ``toy``: ``examples`` distinct problems of its spec, drawn per
    family in proportion to its ``mix``, each solution slipped point by point (graft.toy.task.slipped_solution)
    and written in the model's dialect to the degree ``toy.mismatch`` (graft.toy.dialect)."""
    spec, seed = toy.models[name], toy.seed
    rng = random.Random(seed)
    slips = random.Random(derive(seed, "warmup_slips", name))
    style = random.Random(derive(seed, "warmup_dialect", name))
    # With slips, every problem comes in SLIP_VARIANTS independently drawn versions (the same count for every
    # family, so the mix holds): a model cannot memorise which problems slip, and learns the rate instead.
    slipping = any(rate > 0 for rate in spec.slip.values())
    variants = SLIP_VARIANTS if slipping else 1
    total = sum(spec.mix.values())
    out = []
    for family in FAMILIES:
        pool = [p for p in warmup if p.family == family]
        count = min(len(pool), round(spec.examples * spec.mix.get(family, 0.0) / total))
        rate = spec.slip.get(family, 0.0)
        for p in rng.sample(pool, count):
            # slips and style are separate streams, so each keeps its sequence of draws in either order
            solutions = [slipped_solution(p, rate, slips) if rate > 0 else p.solution for _ in range(variants)]
            picks = [draw(spec.dialect, toy.mismatch, style) for _ in range(variants)]
            out += [(p.problem, write(s, pick)) for s, pick in zip(solutions, picks, strict=True)]
    rng.shuffle(out)
    return out


def build_toy_model(
    name: str, toy: ToySpec, model_spec: ModelSpec, warmup: list[ToyProblem], out: Path, log=None
) -> dict:
    """Toy model ``name`` of world ``toy``: a tokenizer trained from scratch on its warm-up text, a fresh model, the
    warm-up; saved atomically with ``save_pretrained``. Returns a summary (parameters, tokens per character, losses,
    seconds)."""
    start = time.perf_counter()
    spec, seed = toy.models[name], toy.seed
    examples = warmup_examples(name, warmup, toy)
    fmt = prompt_format(model_spec)
    texts = [fmt.template.replace("{problem}", problem) + solution for problem, solution in examples]
    tokenizer = build_tokenizer(texts, spec.pre_tokenizer, spec.vocab_size)
    if fmt.chat:
        # The warm-up sees the prompts RL will send (chat markers included), so the vocabulary is trained on them
        # too: rendered with a first tokenizer (a template needs one for its special tokens), then trained again.
        texts = [fmt.render(tokenizer, problem) + solution for problem, solution in examples]
        tokenizer = build_tokenizer(texts, spec.pre_tokenizer, spec.vocab_size)
    arch = ToyArch(spec.arch, spec.pre_tokenizer, spec.vocab_size, spec.hidden, spec.layers, spec.heads)
    model = build_model(arch, tokenizer, seed=seed)
    policy = Policy(name, model, tokenizer, fmt)
    losses = warm_up(
        policy, examples, spec.steps, spec.batch_size, spec.lr, seed, log=log, micro_batches=spec.micro_batches
    )
    tmp = begin_dir(out)
    save(model, tokenizer, tmp)
    commit_dir(tmp, out)
    solutions = [s for _, s in examples[:200]]
    tokens = sum(len(tokenizer(s)["input_ids"]) for s in solutions)
    return {
        "model": name,
        "arch": spec.arch,
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(tokenizer),
        "tokens_per_char": round(tokens / sum(len(s) for s in solutions), 4),
        "warmup_examples": len(examples),
        "warmup_loss_first": round(losses[0], 4),
        "warmup_loss_last": round(sum(losses[-10:]) / len(losses[-10:]), 4),
        "seconds": round(time.perf_counter() - start, 1),
        "threads": torch.get_num_threads(),
    }


def build_world(
    config: RunConfig, what: str, root: Path, name: str | None = None, log=None, shipped_root: Path = SHIPPED_ROOT
) -> dict:
    """``graft toy data|model|build``: the task's splits under ``root/data`` and/or warmed-up models under
    ``root/models/<name>`` (one named model, or every toy model for ``build``): each model copied from
    ``shipped_root`` where its settings equal a shipped model's (graft.toy.shipped.choose), else built.
    ``log(event, **fields)`` reports progress and where each model came from. Returns a summary per part."""
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
        warmup = read_problems(warmup_file)
        for model in names:
            settings = build_settings(config, model, warmup_file, torch.get_num_threads())
            directory, why = choose(config, model, settings, shipped_root)
            if directory is not None:
                start = time.perf_counter()
                copy_shipped(directory, read_manifest(shipped_root)["models"][model]["files"], root / "models" / model)
                info = {"model": model, "shipped": str(directory), "why": why}
                summary[model] = {**info, "seconds": round(time.perf_counter() - start, 1)}
                log("toy_model_shipped", **summary[model])
                continue
            log("toy_model_build", model=model, why=why)
            of = toy.models[model].steps
            progress = lambda step, loss, model=model, of=of: log(  # noqa: E731
                "warmup", model=model, step=step, of=of, loss=round(loss, 4)
            )
            info = build_toy_model(model, toy, config.models[model], warmup, root / "models" / model, progress)
            summary[model] = info
            log("toy_model", **info)
    return summary
