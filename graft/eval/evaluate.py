"""pass@1 of a checkpoint on a set of benchmarks, the paper's way (docs/design.md section 3).

k samples per problem at the configured temperature and top-p (eval section), graded by the training reward code;
pass@1 is the mean over samples, then over problems; the score is the unweighted mean over benchmarks. Each
benchmark also records the unbiased pass@k for k = 1, 2, 4, 8 up to the sample count (graft.scores).
Per-problem correctness is kept so that any score can be recomputed from the JSON.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from graft.config import RunConfig
from graft.data.problems import Problem
from graft.engine.policy import Policy
from graft.engine.reward import Grader
from graft.engine.rollout import HFRollout, RolloutBackend
from graft.errors import ConfigError
from graft.eval.matching import checkpoint_sha256, listed_model_files
from graft.results import (
    MANIFEST,
    RunDir,
    damage,
    eval_file,
    is_pruned,
    parse_step,
    step_name,
    write_text,
)
from graft.scores import mean_pass_at_k
from graft.seeding import derive


def evaluate(
    policy: Policy,
    benchmarks: dict[str, list[Problem]],
    grader: Grader,
    *,
    k: int,
    temperature: float,
    top_p: float,
    max_new_tokens: int,
    seed: int = 0,
    batch_size: int = 256,
    rollout: RolloutBackend | None = None,
    log=None,
) -> dict:
    """Sample k responses per problem of each benchmark and grade them; returns the JSON-ready result.

    ``rollout`` samples (vLLM at scale, set up with the same temperature, top-p and length); None: Hugging Face
    ``generate`` on ``policy``. ``log(**fields)`` hears of each benchmark done (``done`` of ``of``)."""
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
        samples = rollout.generate(prompts, k, seed=derive(seed, "eval", name))
        texts = [s.text for group in samples for s in group]
        grades = grader.grade(texts, [p.answer for p in problems for _ in range(k)])
        correct = torch.tensor(grades.rewards).reshape(len(problems), k)
        result["benchmarks"][name] = {
            "pass@1": float(correct.mean()),
            "pass@k": mean_pass_at_k(correct.int().tolist()),
            "problems": len(problems),
            "grader_timeouts": grades.timeouts,
            "unparsed": grades.unparsed,
            "truncated_frac": sum(s.truncated for group in samples for s in group) / max(len(texts), 1),
            "per_problem": {p.id: [int(c) for c in row.tolist()] for p, row in zip(problems, correct, strict=True)},
        }
        if log is not None:
            score = round(result["benchmarks"][name]["pass@1"], 4)
            log(benchmark=name, done=len(result["benchmarks"]), of=len(benchmarks), pass1=score)
    scores = [b["pass@1"] for b in result["benchmarks"].values()]
    result["average"] = sum(scores) / len(scores) if scores else None
    return result


def vllm_evaluator(config: RunConfig, policy: Policy, checkpoint: Path) -> RolloutBackend:
    """A vLLM engine with the evaluation's sampling settings, memory share and ``policy``'s stop tokens, started
    from ``checkpoint`` (``policy``'s weights); later checkpoints of the same model are loaded into it with
    ``load_checkpoint`` rather than starting another engine."""
    from graft.engine.vllm import VLLMRollout

    spec = config.eval
    max_tokens = config.eval_response_tokens()
    return VLLMRollout(
        str(checkpoint),
        config.models[policy.name].dtype,
        max_tokens,
        config.train.max_prompt_tokens + max_tokens,
        spec.temperature,
        spec.top_p,
        gpu_memory_utilization=spec.vllm_memory,
        colocated=False,
        cpu_kv_cache_mib=config.scale.vllm_cpu_kv_cache_mib,
        stop_token_ids=policy.stop_token_ids,
        logprobs=False,
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
    log=None,
    validation: bool = True,
) -> dict:
    """Evaluate ``policy`` (loaded from ``checkpoint``) on the config's benchmarks and validation set and write the
    result atomically. The validation set serves checkpoint selection only; the score averages the benchmarks.
    ``rollout``: a sampler holding the checkpoint's weights (vLLM); None: Hugging Face ``generate``.
    ``validation`` False: the benchmarks only (a selected checkpoint's re-evaluation, which no selection reads)."""
    from graft.data.problems import load_problems

    spec = config.eval
    reward = config.reward.kind
    sets = {name: load_problems(path, f"eval.benchmarks.{name}", reward) for name, path in spec.benchmarks.items()}
    if spec.validation and validation:
        sets["validation"] = load_problems(spec.validation, "eval.validation", reward)
    max_tokens = config.eval_response_tokens()
    was_training = policy.model.training
    policy.model.eval()
    result = evaluate(
        policy,
        sets,
        grader,
        k=spec.k,
        temperature=spec.temperature,
        top_p=spec.top_p,
        max_new_tokens=max_tokens,
        seed=seed,
        rollout=rollout,
        log=log,
    )
    policy.model.train(was_training)
    if "validation" in sets:
        result["validation"] = result["benchmarks"].pop("validation")
        scores = [b["pass@1"] for b in result["benchmarks"].values()]
        result["average"] = sum(scores) / len(scores)
    result.update(model=policy.name, checkpoint=str(checkpoint), step=step)
    result["checkpoint_sha256"] = checkpoint_sha256(checkpoint)
    write_text(out, json.dumps(result) + "\n")
    return result


ARCHITECTURE = ("model_type", "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads")
"""The config.json fields that a checkpoint shares with the model it was trained from."""


def check_checkpoint(config: RunConfig, model: str, checkpoint: Path, what: str) -> Path:
    """Refuse, before anything is loaded, a checkpoint that is not whole (``check_model_dir``, and its files against
    its checkpoint's manifest where it has one, as a resume checks them) or not one of ``model``: its config.json's
    architecture and sizes differ from those of the config's ``models.<model>.path``."""
    from graft.engine.policy import check_model_dir, read_json_object

    check_model_dir(checkpoint, what, config, model)
    manifest = checkpoint.parent / MANIFEST
    if manifest.is_file():
        problem = damage(checkpoint.parent, checkpoint.name)
        if problem:
            raise ConfigError(f"{what}: {str(checkpoint)!r} does not match {str(manifest)!r}: {problem}")
    base = Path(config.models[model].path) / "config.json"
    if base.is_file():
        found = read_json_object(checkpoint / "config.json", what)
        wanted = read_json_object(base, f"models.{model}.path")
        for key in ARCHITECTURE:
            if found.get(key) != wanted.get(key):
                raise ConfigError(
                    f"{what}: {str(checkpoint)!r} is not a checkpoint of model {model!r}: its config.json has {key} "
                    f"{found.get(key)!r} where models.{model}.path's has {wanted.get(key)!r}"
                )
    return checkpoint


def checkpoint_step(path: str | Path) -> int:
    """The step of a checkpoint: its directory (or its parent) is named step_NNNNN; 0 for the initial model."""
    path = Path(path)
    step = parse_step(path.name)
    if step is None:
        step = parse_step(path.parent.name)
    return step or 0


class Evaluator:
    """Evaluates checkpoints with the config's settings. With vLLM, one engine at a time: later checkpoints of its
    model are loaded into it from their directories, and a checkpoint of another model first shuts it down (its GPU
    memory back to the driver) and starts that model's; vLLM refuses to start an engine when less than its share of
    the GPU is free. Otherwise Hugging Face ``generate`` (on a GPU when there is one). The training loop (in-train
    evaluation) and ``graft evaluate`` share it; use it as a context manager, so that the last engine stops."""

    def __init__(self, config: RunConfig, grader: Grader, seed: int = 0, log=None):
        if config.eval is None:
            raise ConfigError("eval: this config has no 'eval:' section naming the benchmarks")
        if config.scale.rollout == "vllm":
            from graft.engine.vllm import check_available

            check_available()
        self.config, self.grader, self.seed, self.log = config, grader, seed, log
        self.engine: tuple[str, RolloutBackend] | None = None
        """The one vLLM engine and the model it holds."""

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop the engine, if one runs."""
        if self.engine is not None:
            self.engine[1].close()
            self.engine = None

    def __call__(
        self, model: str, checkpoint: Path, out: Path, seed: int | None = None, validation: bool = True
    ) -> dict:
        """Evaluate one checkpoint into ``out``; ``seed`` overrides the evaluator's sampling seed; ``validation``:
        as ``evaluate_to_file``'s."""
        from graft.engine.policy import load_policy

        policy = load_policy(model, self.config.models[model], path=checkpoint)
        rollout = None
        if self.config.scale.rollout == "vllm":
            rollout = self._engine(model, policy, checkpoint)
        elif torch.cuda.is_available():
            policy.model.to("cuda")
        step = checkpoint_step(checkpoint)
        log = None if self.log is None else (lambda **fields: self.log(model=model, checkpoint=step, **fields))
        seed = self.seed if seed is None else seed
        return evaluate_to_file(self.config, policy, checkpoint, out, self.grader, step, seed, rollout, log, validation)

    def _engine(self, model: str, policy: Policy, checkpoint: Path) -> RolloutBackend:
        """The engine holding ``checkpoint``: the running one when it holds ``model``, else a new one, started once
        the running one has stopped."""
        if self.engine is not None and self.engine[0] == model:
            self.engine[1].load_checkpoint(checkpoint)
            return self.engine[1]
        from graft.engine.vllm import check_models

        check_models({model: checkpoint})
        self.close()
        self.engine = (model, vllm_evaluator(self.config, policy, checkpoint))
        return self.engine[1]


def evaluation_key(config: RunConfig, model: str, checkpoint: Path, seed: int, validation: bool = True) -> str:
    """What a checkpoint's evaluation is a function of, as one string: the checkpoint's model files (their sha256
    from the checkpoint's manifest, else hashed here), the benchmark and (with ``validation``) validation files'
    contents, the evaluation and sampling settings, the model's prompt format and the seed. Paths are left out, so a
    moved results tree keeps its evaluations."""
    import dataclasses
    import hashlib

    def sha256(path: Path) -> str:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()

    files = listed_model_files(checkpoint)
    if files is None:
        files = {
            f"{checkpoint.name}/{p.relative_to(checkpoint)}": sha256(p)
            for p in sorted(checkpoint.rglob("*"))
            if p.is_file()
        }
    spec = config.eval
    data = {name: sha256(path) for name, path in spec.benchmarks.items()}
    if spec.validation and validation:
        data["validation"] = sha256(spec.validation)
    settings = {k: v for k, v in dataclasses.asdict(spec).items() if k not in ("benchmarks", "validation")}
    prompt = {k: v for k, v in dataclasses.asdict(config.models[model]).items() if k in ("template", "chat", "dtype")}
    if config.models[model].chat_template:
        prompt["chat_template"] = sha256(config.models[model].chat_template)
    key = {
        "checkpoint": files,
        "data": data,
        "eval": settings,
        "max_response_tokens": config.train.max_response_tokens,
        "reward": config.reward.kind,
        "rollout": config.scale.rollout,
        "prompt": prompt,
        "seed": seed,
    }
    return json.dumps(key, sort_keys=True)


def evaluate_kept(
    evaluate_one: Evaluator,
    model: str,
    checkpoint: Path,
    out: Path,
    kept: Path,
    seed: int | None = None,
    validation: bool = True,
) -> tuple[dict, bool]:
    """Evaluate one checkpoint into ``out`` unless ``kept`` holds a finished evaluation of the same checkpoint with
    the same settings and seed (then it is copied, with the checkpoint's present path: the bytes a new evaluation
    would write); a new one is kept there. ``kept`` lies beside the training run (``RunDir.kept_evaluation``), where
    a retried job's output deletion does not reach, so a killed evaluation job loses at most the evaluation it was
    running. ``seed``: None for the evaluator's; ``validation``: as ``evaluate_to_file``'s. Returns the result and
    whether it was computed."""
    seed = evaluate_one.seed if seed is None else seed
    key = evaluation_key(evaluate_one.config, model, checkpoint, seed, validation)
    if _holds(kept, key):
        result = json.loads(kept.read_text())
        result["checkpoint"] = str(checkpoint)  # where it is now (a results tree may have moved); order kept
        write_text(out, json.dumps(result) + "\n")
        return result, False
    result = evaluate_one(model, checkpoint, out, seed, validation)
    write_text(kept, out.read_text())
    write_text(kept.with_suffix(".key"), key)  # last: a key names a complete result
    return result, True


def _holds(kept: Path, key: str) -> bool:
    """Whether ``kept`` is a finished evaluation computed from what ``key`` names."""
    kept_key = kept.with_suffix(".key")
    return kept.is_file() and kept_key.is_file() and kept_key.read_text() == key


def check_pruned(config: RunConfig, run: RunDir, model: str, checkpoint: Path, seed: int) -> None:
    """Refuse, before anything is evaluated, a pruned checkpoint (its model directory removed after the cell's
    evaluations) whose evaluation with these settings and seed is not kept beside the run: nothing could compute
    it. One that is kept is copied by ``evaluate_kept``, so a retried evaluation job needs no model."""
    step = checkpoint_step(checkpoint)
    if is_pruned(checkpoint) and not _holds(
        run.kept_evaluation(model, step), evaluation_key(config, model, checkpoint, seed)
    ):
        raise ConfigError(
            f"--run: {model!r} of checkpoint {step_name(step)} in {str(run.root)!r} was pruned after the cell's "
            "evaluations (workflow.keep_checkpoints: false) and no evaluation of it with these settings and seed is "
            "kept beside the run; evaluate it with the settings it was evaluated with, or retrain the cell"
        )


def run_jobs(run: RunDir, models: list[str], out_dir: Path) -> list[tuple[str, Path, Path]]:
    """(model, checkpoint, result file) for every checkpoint of every model of a training run; the result
    files are ``<out_dir>/<model>/step_NNNNN.json``."""
    jobs = []
    for ckpt in run.checkpoints():
        jobs += [(model, ckpt / model, eval_file(out_dir, model, parse_step(ckpt.name))) for model in models]
    return sorted(jobs, key=lambda job: (job[0], job[1]))


def evaluate_run(
    evaluate_one: Evaluator, run: RunDir, models: list[str], out_dir: Path, only_missing: bool = False
) -> None:
    """Evaluate every checkpoint of ``run``; ``only_missing``: skip those with a result (a resumed run)."""
    for model, checkpoint, out in run_jobs(run, models, out_dir):
        if not (only_missing and out.is_file()):
            evaluate_one(model, checkpoint, out)
