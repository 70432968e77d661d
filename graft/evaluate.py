"""pass@1 of a checkpoint on a set of benchmarks, the paper's way (DESIGN.md section 3).

k samples per problem at temperature 0.6 / top-p 0.95 (configurable), graded by the training reward code;
pass@1 is the mean over samples, then over problems; the score is the unweighted mean over benchmarks.
Per-problem correctness is kept so that any score can be recomputed from the JSON.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import torch

from graft.config import RunConfig
from graft.data import Problem
from graft.policy import Policy
from graft.reward import Grader
from graft.rollout import HFRollout, RolloutBackend


def evaluate(
    policy: Policy,
    benchmarks: dict[str, list[Problem]],
    grader: Grader,
    k: int = 8,
    temperature: float = 0.6,
    top_p: float = 0.95,
    max_new_tokens: int = 4096,
    seed: int = 0,
    batch_size: int = 256,
    rollout: RolloutBackend | None = None,
) -> dict:
    """Sample k responses per problem of each benchmark and grade them; returns the JSON-ready result.

    ``rollout`` samples (vLLM at scale, set up with the same temperature, top-p and length); None: Hugging Face
    ``generate`` on ``policy``."""
    rollout = rollout or HFRollout(policy, max_new_tokens, temperature, top_p, batch_size)
    result: dict = {
        "k": k,
        "temperature": temperature,
        "top_p": top_p,
        "max_new_tokens": max_new_tokens,
        "seed": seed,
        "benchmarks": {},
    }
    for name, problems in benchmarks.items():
        prompts = [policy.encode(policy.prompt_text(p.problem)) for p in problems]
        samples = rollout.generate(prompts, k, seed=seed * 65_537 + zlib.crc32(name.encode()))
        texts = [s.text for group in samples for s in group]
        grades = grader.grade(texts, [p.answer for p in problems for _ in range(k)])
        correct = torch.tensor(grades.rewards).reshape(len(problems), k)
        result["benchmarks"][name] = {
            "pass@1": float(correct.mean()),
            "problems": len(problems),
            "grader_timeouts": grades.timeouts,
            "unparsed": grades.unparsed,
            "truncated_frac": sum(s.truncated for group in samples for s in group) / max(len(texts), 1),
            "per_problem": {p.id: [int(c) for c in row.tolist()] for p, row in zip(problems, correct, strict=True)},
        }
    scores = [b["pass@1"] for b in result["benchmarks"].values()]
    result["average"] = sum(scores) / len(scores) if scores else None
    return result


def vllm_evaluator(config: RunConfig, model: str, checkpoint: Path) -> RolloutBackend:
    """A vLLM engine with the evaluation's sampling settings, started from ``checkpoint``; later checkpoints of
    the same model are loaded into it with ``load_weights`` rather than starting another engine."""
    from graft.rollout_vllm import VLLMRollout

    spec = config.eval
    max_tokens = spec.max_response_tokens or config.train.max_response_tokens
    return VLLMRollout(
        str(checkpoint),
        config.models[model].dtype,
        max_tokens,
        config.train.max_prompt_tokens + max_tokens,
        spec.temperature,
        spec.top_p,
        gpu_memory_utilization=0.85,
        colocated=False,
    )


def evaluate_to_file(
    config: RunConfig,
    policy: Policy,
    checkpoint: Path,
    out: Path,
    grader: Grader,
    step: int,
    seed: int = 0,
    rollout: RolloutBackend | None = None,
) -> dict:
    """Evaluate ``policy`` (loaded from ``checkpoint``) on the config's benchmarks and validation set and write the
    result atomically. The validation set serves checkpoint selection only; the score averages the benchmarks.
    ``rollout``: a sampler holding the checkpoint's weights (vLLM); None: Hugging Face ``generate``."""
    from graft.benchmarks import load_benchmark

    spec = config.eval
    sets = {name: load_benchmark(path, f"eval.benchmarks.{name}") for name, path in spec.benchmarks.items()}
    if spec.validation:
        sets["validation"] = load_benchmark(spec.validation, "eval.validation")
    max_tokens = spec.max_response_tokens or config.train.max_response_tokens
    was_training = policy.model.training
    policy.model.eval()
    result = evaluate(policy, sets, grader, spec.k, spec.temperature, spec.top_p, max_tokens, seed, rollout=rollout)
    policy.model.train(was_training)
    if spec.validation:
        result["validation"] = result["benchmarks"].pop("validation")
        scores = [b["pass@1"] for b in result["benchmarks"].values()]
        result["average"] = sum(scores) / len(scores)
    result.update(model=policy.name, checkpoint=str(checkpoint), step=step)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(json.dumps(result) + "\n")
    tmp.replace(out)
    return result


def checkpoint_step(path: str | Path) -> int:
    """The step number of a checkpoint directory named step_NNNNN (0 for the initial model)."""
    name = Path(path).name if Path(path).name.startswith("step_") else Path(path).parent.name
    return int(name.split("_")[1]) if name.startswith("step_") else 0
