"""The co-training loop (DESIGN.md section 4): one step per model is rollout -> reward -> advantages -> publish
records -> read the peer's records -> select -> re-tokenize and score -> weight -> order -> update.

GRPO is the same loop with no peer; a co-training run holds both models in one process; archive replay reads
the peer's stored records instead of a live model. Checkpoints are atomic and a resumed run ends as an
uninterrupted one would.

Under torchrun (``scale.processes`` > 1) every process holds both models, sharded (graft.distributed): each
samples and grades its share of the prompts, all see the gathered records and make the same exchange
decisions, each scores its share of the transferred responses and takes its share of every minibatch, and only
process 0 writes records, metrics and the Hugging Face export of a checkpoint.
"""

from __future__ import annotations

import copy
import json
import random
import shutil
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from graft.algo import CapabilityTracker, capability_ratio, group_advantages, minibatch_order, success_counts
from graft.config import RunConfig
from graft.data import Problem, batch_indices, load_problems
from graft.distributed import (
    SINGLE,
    World,
    enable_gradient_checkpointing,
    full_state_dict,
    load_sharded,
    save_sharded,
    shard_model,
)
from graft.errors import ConfigError
from graft.exchange import Group, build_groups, recompute_rewards, select_prompts, step_generator
from graft.methods import Method
from graft.policy import DTYPES, Policy, load_policy
from graft.records import StepRecords, read_step, step_path, write_step
from graft.reward import Grader, Grades
from graft.rollout import HFRollout, RolloutBackend, Sample
from graft.update import minibatch_update

SALT_SELECT, SALT_ORDER = 1, 2


@dataclass
class Learner:
    name: str
    policy: Policy
    optimizer: torch.optim.Optimizer
    rollout: RolloutBackend
    ref_model: torch.nn.Module | None = None
    capability: CapabilityTracker = field(default_factory=CapabilityTracker)
    separate_rollout: bool = False
    """The rollout backend samples from its own copy of the weights, refreshed after every step."""


@dataclass
class TrainRequest:
    """What ``graft train`` was asked to do, validated before any compute."""

    config: RunConfig
    method: Method
    models: list[str]
    seed: int
    out: Path
    steps: int
    peer_archive: Path | None = None
    resume: bool = False
    eval_dir: Path | None = None
    """Evaluate each checkpoint as it is saved, into <eval_dir>/<model>/step_NNNNN.json (saves a process start
    and a model load per checkpoint on a CPU; a cluster evaluates in separate GPU jobs instead)."""


def validate_request(req: TrainRequest) -> None:
    """Refuse inconsistent requests with one line, before loading anything heavy."""
    unknown = [m for m in req.models if m not in req.config.models]
    if unknown:
        raise ConfigError(f"--models: unknown model {unknown[0]!r}; models: {', '.join(req.config.models)}")
    if len(set(req.models)) != len(req.models):
        raise ConfigError("--models: the two models of a pair must differ")
    live = req.method.peer == "live"
    if live and len(req.models) != 2:
        raise ConfigError(f"--models: method with a live peer needs two models A,B, got {len(req.models)}")
    if not live and len(req.models) != 1:
        raise ConfigError(f"--models: method with peer {req.method.peer!r} trains one model, got {len(req.models)}")
    if req.method.peer == "archive":
        if req.peer_archive is None:
            raise ConfigError("--peer-archive: required by a method that replays stored trajectories")
        if not step_path(req.peer_archive, 0).is_file():
            raise ConfigError(f"--peer-archive: {str(req.peer_archive)!r} holds no step_00000.parquet")
    elif req.peer_archive is not None:
        raise ConfigError(f"--peer-archive: only for archive replay, not for peer {req.method.peer!r}")
    if req.config.scale.rollout == "vllm":
        from graft.rollout_vllm import check_available

        check_available()
    if req.eval_dir is not None and req.config.scale.processes > 1:
        raise ConfigError(
            "--eval-dir: not with scale.processes > 1; evaluate checkpoints in their own jobs "
            "(workflow.eval_in_train: false)"
        )
    if req.eval_dir is not None and req.config.eval is None:
        raise ConfigError("--eval-dir: this config has no 'eval:' section naming the benchmarks")
    if req.steps < 1:
        raise ConfigError(f"--steps: {req.steps} is not allowed; expected an integer >= 1")
    if req.method.transfer != "group" and req.method.update == "hacpo":
        raise ConfigError("method: the HACPO update transfers whole groups")


def _rollout_backend(name: str, cfg: RunConfig, policy: Policy, world: World) -> tuple[RolloutBackend, bool]:
    """The sampling backend and whether it holds its own weights. One process with the Hugging Face backend
    samples from the trained model itself; a sharded model is sampled from an unsharded copy or by vLLM."""
    t, scale = cfg.train, cfg.scale
    if scale.rollout == "vllm":
        from graft.rollout_vllm import VLLMRollout

        engine = VLLMRollout(
            cfg.models[name].path,
            cfg.models[name].dtype,
            t.max_response_tokens,
            t.max_prompt_tokens + t.max_response_tokens,
            t.temperature,
            t.top_p,
            gpu_memory_utilization=scale.vllm_memory,
            colocated=True,
            device_index=world.device.index,
        )
        return engine, True
    if world.distributed:
        sampler = copy.deepcopy(policy.model).requires_grad_(False).eval()
        copy_policy = Policy(name, sampler, policy.tokenizer, policy.template)
        return HFRollout(copy_policy, t.max_response_tokens, t.temperature, t.top_p, t.rollout_batch), True
    return HFRollout(policy, t.max_response_tokens, t.temperature, t.top_p, t.rollout_batch), False


def _make_learner(name: str, cfg: RunConfig, method: Method, world: World = SINGLE) -> Learner:
    spec = cfg.models[name]
    # Sharded training keeps float32 master weights and computes in the configured dtype.
    policy = load_policy(name, spec, dtype="float32" if world.distributed else None)
    policy.model.to(world.device)
    policy.model.eval()  # no dropout in RL updates: the ratio's denominator is the same network
    if cfg.scale.gradient_checkpointing:
        enable_gradient_checkpointing(policy.model)
    rollout, separate = _rollout_backend(name, cfg, policy, world)
    ref = None
    if method.kl_coef > 0:
        ref = copy.deepcopy(policy.model).requires_grad_(False)
    if world.distributed:
        shard_model(policy.model, world, DTYPES[spec.dtype])
        if ref is not None:
            shard_model(ref, world, DTYPES[spec.dtype])
    t = cfg.train
    optimizer = torch.optim.AdamW(
        policy.model.parameters(), lr=t.lr, betas=(t.beta1, t.beta2), weight_decay=t.weight_decay
    )
    return Learner(name, policy, optimizer, rollout, ref, CapabilityTracker(method.hacpo_window), separate)


def _resume_state(ckpt: Path, model: str) -> tuple[Path, Path]:
    """Where a checkpoint keeps a model's optimizer state: one process's ``optimizer.pt``, or the directory
    of a sharded run's model and optimizer shards."""
    return ckpt / model / "optimizer.pt", ckpt / model / "sharded"


class Trainer:
    def __init__(self, req: TrainRequest, world: World = SINGLE):
        validate_request(req)
        self.req = req
        self.world = world
        self.cfg = req.config
        self.method = req.method
        self.problems: list[Problem] = load_problems(self.cfg.data.train, "data.train")
        self.out = req.out
        self.grader = Grader(self.cfg.reward.kind, self.cfg.reward.timeout, self.cfg.reward.workers)
        self.learners = [_make_learner(name, self.cfg, self.method, world) for name in req.models]
        self.start_step = 0

    # ----- checkpoints -----

    def _ckpt_dir(self, step: int) -> Path:
        return self.out / "checkpoints" / f"step_{step:05d}"

    def save_checkpoint(self, next_step: int) -> None:
        """Model (safetensors), optimizer, sampler position and RNG states, written to a temporary directory and
        renamed, so a checkpoint directory is complete or absent. A sharded run writes each process's model and
        optimizer shards (``<model>/sharded``) instead of ``optimizer.pt``; that is what it resumes from, and
        the safetensors export is what evaluation reads. Older checkpoints lose their optimizer state."""
        final = self._ckpt_dir(next_step)
        tmp = final.with_name(final.name + ".tmp")
        world = self.world
        if world.is_main:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
        world.barrier()
        for lr in self.learners:
            single, sharded = _resume_state(tmp, lr.name)
            if world.distributed:
                save_sharded(lr.policy.model, lr.optimizer, sharded)
                weights = full_state_dict(lr.policy.model, world)
                if world.is_main:  # in the configured dtype, as a single process would have written it
                    dtype = DTYPES[self.cfg.models[lr.name].dtype]
                    weights = {k: v.to(dtype) for k, v in weights.items()}
                    lr.policy.model.save_pretrained(tmp / lr.name, state_dict=weights, safe_serialization=True)
            else:
                lr.policy.model.save_pretrained(tmp / lr.name, safe_serialization=True)
                torch.save(lr.optimizer.state_dict(), single)
            if world.is_main:
                lr.policy.tokenizer.save_pretrained(tmp / lr.name)
        if world.is_main:
            state = {
                "next_step": next_step,
                "processes": world.size,
                "capability": {lr.name: lr.capability.state_dict() for lr in self.learners},
                "torch_rng": torch.get_rng_state().tolist(),
                "python_rng": [random.getstate()[0], list(random.getstate()[1]), random.getstate()[2]],
                "numpy_rng": [v.tolist() if isinstance(v, np.ndarray) else v for v in np.random.get_state()],
            }
            (tmp / "state.json").write_text(json.dumps(state))
            shutil.rmtree(final, ignore_errors=True)
            tmp.rename(final)
            self._prune_resume_state(keep=final)
        world.barrier()

    def _prune_resume_state(self, keep: Path) -> None:
        """Only the newest checkpoint is resumed from, so older ones keep their models (for evaluation) and lose
        their optimizer state: at the paper's scale that is about 50 GB per model and checkpoint."""
        for ckpt in (self.out / "checkpoints").glob("step_*"):
            if ckpt == keep or ckpt.name.endswith(".tmp"):
                continue
            for lr in self.learners:
                single, sharded = _resume_state(ckpt, lr.name)
                single.unlink(missing_ok=True)
                shutil.rmtree(sharded, ignore_errors=True)

    def evaluate_checkpoints(self) -> None:
        """pass@1 of every model at every checkpoint that has no evaluation yet (a resumed run may have lost
        some), with the config's evaluation settings."""
        from graft.evaluate import evaluate_to_file

        for ckpt in sorted((self.out / "checkpoints").glob("step_*")):
            if ckpt.name.endswith(".tmp"):
                continue
            step = int(ckpt.name.split("_")[1])
            for name in self.req.models:
                out = self.req.eval_dir / name / f"{ckpt.name}.json"
                if not out.is_file():
                    policy = load_policy(name, self.cfg.models[name], path=ckpt / name)
                    evaluate_to_file(self.cfg, policy, ckpt / name, out, self.grader, step)

    def latest_checkpoint(self) -> Path | None:
        """The newest complete checkpoint that still holds the state a resume needs (see ``save_checkpoint``)."""
        root = self.out / "checkpoints"
        found = sorted(p for p in root.glob("step_*") if p.is_dir() and not p.name.endswith(".tmp"))
        for ckpt in reversed(found):
            if (ckpt / "state.json").is_file() and all(
                any(path.exists() for path in _resume_state(ckpt, lr.name)) for lr in self.learners
            ):
                return ckpt
        return None

    def restore(self) -> None:
        ckpt = self.latest_checkpoint()
        if ckpt is None:  # nothing to resume from: start over, dropping the metrics of the lost steps
            if self.world.is_main:
                self._truncate_metrics(0)
            return
        state = json.loads((ckpt / "state.json").read_text())
        sharded = state.get("processes", 1) > 1
        if sharded != self.world.distributed:
            raise ConfigError(
                f"--resume: checkpoint {str(ckpt)!r} was written by {state.get('processes', 1)} process(es); "
                "resume it with a sharded run if it was sharded and with one process if not"
            )
        for lr in self.learners:
            if sharded:
                load_sharded(lr.policy.model, lr.optimizer, _resume_state(ckpt, lr.name)[1])
            else:
                self._load_single(lr, ckpt)
            lr.capability.load_state_dict(state["capability"][lr.name])
            if lr.separate_rollout:
                lr.rollout.load_weights(full_state_dict(lr.policy.model, self.world))
        torch.set_rng_state(torch.tensor(state["torch_rng"], dtype=torch.uint8))
        version, internal, gauss = state["python_rng"]
        random.setstate((version, tuple(internal), gauss))
        kind, keys, pos, has_gauss, cached = state["numpy_rng"]
        np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
        self.start_step = state["next_step"]
        if self.world.is_main:
            self._truncate_metrics(self.start_step)

    @staticmethod
    def _load_single(lr: Learner, ckpt: Path) -> None:
        from safetensors.torch import load_file

        weights = {}
        for file in sorted((ckpt / lr.name).glob("*.safetensors")):
            weights.update(load_file(file))
        result = lr.policy.model.load_state_dict(weights, strict=False)
        # Tied weights (lm_head = embeddings) are stored once; anything else missing is a broken checkpoint.
        tied = {k for k in result.missing_keys if "lm_head" in k}
        if result.unexpected_keys or set(result.missing_keys) - tied:
            raise ConfigError(f"--resume: checkpoint {str(ckpt)!r} does not match model {lr.name!r}")
        lr.optimizer.load_state_dict(torch.load(_resume_state(ckpt, lr.name)[0], weights_only=True))

    def _truncate_metrics(self, next_step: int) -> None:
        path = self.out / "metrics.jsonl"
        if not path.exists():
            return
        kept = [line for line in path.read_text().splitlines() if line and json.loads(line)["step"] < next_step]
        path.write_text("".join(line + "\n" for line in kept))

    # ----- one step -----

    def _sample_and_grade(
        self, lr: Learner, step: int, batch: list[Problem]
    ) -> tuple[list[list[Sample]], Grades, dict]:
        """This process's share of the prompts (every ``size``-th from its rank), sampled and graded, then
        every process's share gathered back into batch order."""
        world, n = self.world, self.method.n
        mine = world.share(batch)
        prompts = [lr.policy.encode(lr.policy.prompt_text(p.problem)) for p in mine]
        # The sampling seed depends on the model's name, not its position, so a replay run of one model draws
        # the same samples as that model did in a co-training run with the same seed (and process count).
        seed = (self.req.seed * 1_000_003 + step) * 65_537 + zlib.crc32(lr.name.encode()) + world.rank * 7_919
        t0 = time.perf_counter()
        samples = lr.rollout.generate(prompts, n, seed=seed % (2**63)) if mine else []
        t1 = time.perf_counter()
        grades = self.grader.grade(
            [s.text for group in samples for s in group], [p.answer for p in mine for _ in range(n)]
        )
        timings = {"rollout_s": t1 - t0, "reward_s": time.perf_counter() - t1}
        if not world.distributed:
            return samples, grades, timings
        per_prompt = [(group, grades.rewards[j * n : (j + 1) * n]) for j, group in enumerate(samples)]
        ordered = world.gather_shares(per_prompt, len(batch))
        timeouts, unparsed = world.sum([grades.timeouts, grades.unparsed])
        rewards = [r for _, row in ordered for r in row]
        return [group for group, _ in ordered], Grades(rewards, int(timeouts), int(unparsed)), timings

    def _rollout(self, lr: Learner, step: int, batch: list[Problem]) -> tuple[StepRecords, dict]:
        samples, grades, timings = self._sample_and_grade(lr, step, batch)
        texts = [[s.text for s in group] for group in samples]
        rewards = torch.tensor(grades.rewards, dtype=torch.float32).reshape(len(batch), self.method.n)
        records = StepRecords(
            model=lr.name,
            step=step,
            prompt_ids=[p.id for p in batch],
            texts=texts,
            token_ids=[[s.token_ids for s in group] for group in samples],
            logprobs=[[s.logprobs for s in group] for group in samples],
            rewards=rewards,
            advantages=group_advantages(rewards),
            truncated=[[s.truncated for s in group] for group in samples],
        )
        if self.world.is_main:
            write_step(records, self.out / "trajectories" / lr.name)
        lengths = [len(s.token_ids) for group in samples for s in group]
        info = {
            **timings,
            "reward_mean": float(rewards.mean()),
            "all_fail_frac": float((success_counts(rewards) == 0).float().mean()),
            "all_correct_frac": float((success_counts(rewards) == self.method.n).float().mean()),
            "response_len_mean": sum(lengths) / len(lengths),
            "truncated_frac": float(np.mean([s.truncated for group in samples for s in group])),
            "grader_timeouts": grades.timeouts,
            "unparsed": grades.unparsed,
        }
        return records, info

    def _archive_peer(self, step: int, batch: list[Problem]) -> tuple[StepRecords, int]:
        records = read_step(self.req.peer_archive, step)
        if records.prompt_ids != [p.id for p in batch]:
            raise ConfigError(
                f"--peer-archive: step {step} holds other prompts than this run's batch; "
                "replay needs the peer's GRPO run with the same data and seed"
            )
        answers = [p.answer for p in batch for _ in range(records.n)]
        grades = self._grade_in_shares([t for row in records.texts for t in row], answers)
        return recompute_rewards(records, grades.rewards)

    def _grade_in_shares(self, texts: list[str], answers: list[str]) -> Grades:
        """Grade every ``size``-th item on each process and gather the rewards back into order."""
        world = self.world
        if not world.distributed:
            return self.grader.grade(texts, answers)
        mine = self.grader.grade(world.share(texts), world.share(answers))
        timeouts, unparsed = world.sum([mine.timeouts, mine.unparsed])
        return Grades(world.gather_shares(mine.rewards, len(texts)), int(timeouts), int(unparsed))

    def step(self, step: int) -> list[dict]:
        t_step = time.perf_counter()
        batch = [
            self.problems[i]
            for i in batch_indices(step, self.cfg.train.prompts_per_step, len(self.problems), self.req.seed)
        ]
        records, infos = {}, {}
        for lr in self.learners:
            records[lr.name], infos[lr.name] = self._rollout(lr, step, batch)
            lr.capability.update(infos[lr.name]["reward_mean"])

        peers: dict[str, tuple[StepRecords | None, torch.Tensor | None, int]] = {}
        if self.method.peer == "live":
            a, b = (lr.name for lr in self.learners)
            k = {name: success_counts(rec.rewards) for name, rec in records.items()}
            selected, counts = select_prompts(
                self.method, k, self.method.n, [(a, b), (b, a)], step_generator(self.req.seed, step, SALT_SELECT)
            )
            peers[b] = (records[a], selected[(a, b)], counts[(a, b)])
            peers[a] = (records[b], selected[(b, a)], counts[(b, a)])
        elif self.method.peer == "archive":
            me = self.learners[0].name
            peer_records, changed = self._archive_peer(step, batch)
            k = {me: success_counts(records[me].rewards), "peer": success_counts(peer_records.rewards)}
            selected, counts = select_prompts(
                self.method, k, peer_records.n, [("peer", me)], step_generator(self.req.seed, step, SALT_SELECT)
            )
            peers[me] = (peer_records, selected[("peer", me)], counts[("peer", me)])
            infos[me]["archive_rewards_changed"] = changed

        rows_out = []
        for lr in self.learners:
            info = infos[lr.name]
            peer_records, selected, n_cand = peers.get(lr.name, (None, None, 0))
            omega_own_peer = omega_peer_own = 1.0
            if peer_records is not None and self.method.update == "hacpo":
                other = next((o for o in self.learners if o is not lr), None)
                p_peer = other.capability.value if other is not None else float(peer_records.rewards.mean())
                omega_own_peer = capability_ratio(lr.capability.value, p_peer)
                omega_peer_own = capability_ratio(p_peer, lr.capability.value)
            t0 = time.perf_counter()
            prompt_texts = [lr.policy.prompt_text(p.problem) for p in batch]
            groups, ex = build_groups(
                self.method,
                lr.policy,
                records[lr.name],
                peer_records,
                selected,
                prompt_texts,
                step_generator(self.req.seed, step, SALT_SELECT * 10 + zlib.crc32(lr.name.encode())),
                omega_own_peer,
                self.cfg.train.temperature,
                self.cfg.train.micro_batch,
                self.world,
            )
            info["scoring_s"] = time.perf_counter() - t0
            info.update(ex.metrics())
            info["candidates"] = n_cand
            if peer_records is not None:
                own_fail = success_counts(records[lr.name].rewards) == 0
                info["all_fail"] = int(own_fail.sum())
                # Figure 1: how many of the receiver's all-fail prompts the peer solved at least once
                info["peer_solved_all_fail"] = int((own_fail & (success_counts(peer_records.rewards) > 0)).sum())
            t0 = time.perf_counter()
            info.update(self._update(lr, groups, step, omega_peer_own))
            info["update_s"] = time.perf_counter() - t0
            rows_out.append({"step": step, "model": lr.name, **info})
        step_time = time.perf_counter() - t_step
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        for row in rows_out:
            row["step_time_s"] = step_time
            row["gpu_hours"] = step_time * gpus / 3600
        return rows_out

    def _update(self, lr: Learner, groups: list[Group], step: int, omega_src_learner: float) -> dict:
        num = self.method.minibatches or self.cfg.train.minibatches
        generator = step_generator(self.req.seed, step, SALT_ORDER * 10 + zlib.crc32(lr.name.encode()))
        order = minibatch_order(
            torch.tensor([g.grafted for g in groups], dtype=torch.bool), num, self.method.order, generator
        )
        totals: dict[str, float] = {}
        peer_positions = []
        for m, chunk in enumerate(order):
            rows = [row for gi in chunk.tolist() for row in groups[gi].rows]
            if any(groups[gi].grafted for gi in chunk.tolist()):
                peer_positions.append(m)
            stats = minibatch_update(
                self.method,
                lr.policy,
                lr.optimizer,
                rows,
                m,
                self.cfg.train.grad_clip,
                self.cfg.train.micro_batch,
                lr.ref_model,
                omega_src_learner,
                self.cfg.train.temperature,
                self.cfg.train.micro_batch_tokens,
                self.world,
            )
            for key, value in stats.items():
                totals[key] = totals.get(key, 0.0) + value
        if lr.separate_rollout:
            lr.rollout.load_weights(full_state_dict(lr.policy.model, self.world))
        updates = max(len(order), 1)
        return {
            "loss": totals.get("loss", 0.0) / updates,
            "grad_norm": totals.get("grad_norm", 0.0) / updates,
            "nll": totals["nll"] / updates if "nll" in totals else None,
            "clip_frac_own": totals["clipped_tokens_own"] / totals["tokens_own"] if totals.get("tokens_own") else None,
            "clip_frac_peer": totals["clipped_tokens_peer"] / totals["tokens_peer"]
            if totals.get("tokens_peer")
            else None,
            "tokens_own": int(totals.get("tokens_own", 0)),
            "tokens_peer": int(totals.get("tokens_peer", 0)),
            "updates": len(order),
            "peer_minibatch_positions": peer_positions,
        }

    # ----- the run -----

    def run(self, log=lambda fields: None) -> Path:
        self.out.mkdir(parents=True, exist_ok=True)
        meta = {
            "method": self.method.to_dict(),
            "models": self.req.models,
            "seed": self.req.seed,
            "steps": self.req.steps,
            "peer_archive": str(self.req.peer_archive) if self.req.peer_archive else None,
        }
        previous = self.out / "run.json"
        if self.req.resume and previous.is_file():
            old = json.loads(previous.read_text())
            if any(old.get(k) != meta[k] for k in ("method", "models", "seed")):
                raise ConfigError(
                    f"--resume: {str(self.out)!r} holds a run of another method, models or seed; "
                    "remove it or choose another --out"
                )
        main = self.world.is_main
        if main:
            (self.out / "done.json").unlink(missing_ok=True)
            if not self.req.resume:
                shutil.rmtree(self.out / "checkpoints", ignore_errors=True)
                (self.out / "metrics.jsonl").unlink(missing_ok=True)
        self.world.barrier()
        if self.req.resume:
            self.restore()
        if main:
            (self.out / "run.json").write_text(json.dumps(meta, indent=2) + "\n")
        every = self.cfg.train.checkpoint_every
        try:
            for step in range(self.start_step, self.req.steps):
                rows = self.step(step)
                if main:
                    with (self.out / "metrics.jsonl").open("a") as handle:
                        for row in rows:
                            handle.write(json.dumps(row) + "\n")
                    log({"step": step, "of": self.req.steps, **{r["model"]: round(r["reward_mean"], 4) for r in rows}})
                if (step + 1) % every == 0 or step + 1 == self.req.steps:
                    self.save_checkpoint(step + 1)
            if self.req.eval_dir is not None:
                self.evaluate_checkpoints()
        finally:
            self.grader.close()
        if main:
            self._write_done()
        self.world.barrier()
        return self.out / "metrics.jsonl"

    def _write_done(self) -> None:
        """The run's completion record: written last and atomically, so its presence means a finished run."""
        rows = [json.loads(line) for line in (self.out / "metrics.jsonl").read_text().splitlines() if line]
        by_step = {r["step"]: r for r in rows}
        done = {
            "models": self.req.models,
            "steps": self.req.steps,
            "checkpoints": sorted(p.name for p in (self.out / "checkpoints").glob("step_*") if p.is_dir()),
            "wall_hours": sum(r["step_time_s"] for r in by_step.values()) / 3600,
            "gpu_hours": sum(r["gpu_hours"] for r in by_step.values()),
        }
        tmp = self.out / ".done.json.tmp"
        tmp.write_text(json.dumps(done, indent=2) + "\n")
        tmp.replace(self.out / "done.json")
