"""Build a toy model from scratch: its warm-up examples, a tokenizer and a model trained on them (``graft toy model``
where no shipped model matches; graft.toy.world decides)."""

from __future__ import annotations

import random
import time
from pathlib import Path

import torch

from graft.config import ModelSpec, ToySpec
from graft.engine.policy import Policy
from graft.engine.prompts import prompt_format
from graft.results import begin_dir, commit_dir
from graft.seeding import derive
from graft.toy.dialect import draw, write
from graft.toy.models import ToyArch, build_model, build_tokenizer, save
from graft.toy.task import FAMILIES, ToyProblem, slipped_solution
from graft.toy.warmup import warm_up

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
