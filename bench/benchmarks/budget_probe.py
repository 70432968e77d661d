"""Where the main job's time could be cut without changing what it computes.

Three probes on the embedded default's built toy models, one thread each (as the main job runs them):

- warm-up: milliseconds per step of the supervised warm-up's forward + backward on 64 examples, padded to the
  batch's longest row (today) against the same batch sorted by length and cut into 2 or 4 micro-batches (the same
  gradient up to float rounding), with the share of real tokens among the padded ones;
- update: one GRPO n=8 step's update time with the config's micro-batch against smaller, length-sorted ones;
- rollout: Hugging Face ``generate`` responses per second against the number of sequences per call.

Prints a table and writes bench/results/budget_probe.json.

Usage: python bench/benchmarks/budget_probe.py [--results results/default] [--steps 60]
Needs a built toy world (the main job's toy_model jobs, or graft toy build --config config/config.yaml).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import tempfile
import time
from pathlib import Path

import torch

from graft.config import load_config
from graft.engine.policy import load_policy
from graft.engine.rollout import HFRollout
from graft.methods import get_method
from graft.results import ResultsTree, write_text
from graft.toy.build import warmup_examples
from graft.toy.data import read_problems
from graft.toy.warmup import length_parts, nll_backward
from graft.train import update
from graft.train.request import TrainRequest
from graft.train.trainer import Trainer


def warmup_ms(policy, encoded, steps: int, parts: int) -> tuple[float, float]:
    """Milliseconds per warm-up step with each batch cut into ``parts`` length-sorted micro-batches, and the
    share of real tokens among padded ones."""
    rng = random.Random(0)
    model = policy.model
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    real = padded = 0
    for step in range(steps + 5):
        if step == 5:  # the first steps (allocator, kernel selection) are not timed
            real = padded = 0
            start = time.perf_counter()
        cut = length_parts([encoded[rng.randrange(len(encoded))] for _ in range(64)], parts)
        lengths = [[len(p) + len(r) for p, r in part] for part in cut]
        real += sum(map(sum, lengths))
        padded += sum(max(part) * len(part) for part in lengths)
        optimizer.zero_grad(set_to_none=True)
        nll_backward(model, cut, policy.pad_token_id)
        optimizer.step()
    return 1000 * (time.perf_counter() - start) / steps, real / padded


def sorted_plan(rows, world_size, max_rows, max_tokens=None):
    """``plan_micro_batches`` over the rows in length order (the probe's alternative packing)."""
    order = sorted(range(len(rows)), key=lambda i: (len(rows[i].prompt_ids) + len(rows[i].response_ids), i))
    plan = PLAN([rows[i] for i in order], world_size, max_rows, max_tokens)
    return [[[order[i] for i in micro] for micro in rank] for rank in plan]


PLAN = update.plan_micro_batches


def update_s(config, micro_batch: int, length_sorted: bool, steps: int) -> float:
    update.plan_micro_batches = sorted_plan if length_sorted else PLAN
    try:
        cfg = dataclasses.replace(config, train=dataclasses.replace(config.train, micro_batch=micro_batch))
        with tempfile.TemporaryDirectory() as tmp:
            Trainer(TrainRequest(cfg, get_method("grpo_n8"), ["smol"], 0, Path(tmp) / "run", steps)).run()
            rows = [json.loads(line) for line in (Path(tmp) / "run" / "metrics.jsonl").read_text().splitlines()]
    finally:
        update.plan_micro_batches = PLAN
    return sum(r["update_s"] for r in rows[1:]) / len(rows[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("results/default"))
    parser.add_argument("--steps", type=int, default=60, help="warm-up steps timed per setting")
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "results" / "budget_probe.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    tree = ResultsTree(args.results)
    config = load_config(tree.config)
    warmup = read_problems(tree.toy / "data" / "warmup.jsonl")
    out: dict = {"threads": 1, "warmup": {}, "update": {}, "rollout": {}}
    print(f"{'model':<6} {'micro-batches':>13} {'ms/step':>8} {'real/padded':>11}")
    for name in config.toy.models:
        policy = load_policy(name, config.models[name], tree.toy / "models" / name)
        examples = warmup_examples(name, warmup, config.toy)
        encoded = [
            (policy.encode(policy.prompt_text(p)), policy.tokenizer(s)["input_ids"] + [policy.eos_token_id])
            for p, s in examples
        ]
        for parts in (1, 2, 4):
            ms, share = warmup_ms(policy, encoded, args.steps, parts)
            out["warmup"].setdefault(name, {})[parts] = {"ms_per_step": round(ms, 1), "real_share": round(share, 3)}
            print(f"{name:<6} {parts:>13} {ms:>8.0f} {share:>11.3f}")
    print(f"\n{'GRPO n=8 update, smol':<28} {'s/step':>7}")
    for micro_batch, length_sorted in ((config.train.micro_batch, False), (16, False), (16, True), (32, True)):
        seconds = update_s(config, micro_batch, length_sorted, 8)
        label = f"micro_batch {micro_batch}{' sorted' if length_sorted else ''}"
        out["update"][label] = round(seconds, 3)
        print(f"{label:<28} {seconds:>7.3f}")
    policy = load_policy("smol", config.models["smol"], tree.toy / "models" / "smol")
    validation = (tree.toy / "data" / "validation.jsonl").read_text().splitlines()
    problems = [json.loads(line)["problem"] for line in validation]
    prompts = [policy.encode(policy.prompt_text(p)) for p in (problems * 4)[:1024]]
    print(f"\n{'sequences per generate call':<28} {'responses/s':>11}")
    for batch in (128, 256, 512, 1024):
        rollout = HFRollout(policy, config.train.max_response_tokens, 0.6, 0.95, batch)
        start = time.perf_counter()
        rollout.generate(prompts, 1, 0)
        rate = len(prompts) / (time.perf_counter() - start)
        out["rollout"][batch] = round(rate, 1)
        print(f"{batch:<28} {rate:>11.0f}")
    write_text(args.out, json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
