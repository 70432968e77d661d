"""The co-training loop (docs/design.md section 4, the paper's Algorithm 1): per step and model, rollout -> reward ->
advantages -> publish records -> read the peer's records -> select -> re-tokenize and score -> weight -> order
-> update; checkpoints every k steps.

GRPO is the same loop with no peer, co-training runs both models of a pair, and archive replay reads the peer's
stored records instead of a live model (graft.train.peers). Under torchrun the placement (graft.engine.placement)
says which models a process holds: all of them, sharded over every process (``colocated``), or one, sharded over
its own group of processes (``split``), while the other group works on the other model at the same time. Either
way each process samples, grades and scores its share of its models' prompts; after the rollouts every process
holds every model's records (under ``split`` each group's first process sends its model's records to all the
others, the only data that crosses between groups), all make the same exchange decisions, each takes its share
of every minibatch of its models, and only process 0 writes the run's files.
"""

from __future__ import annotations

import json
import pickle
import sys
import time
from contextlib import nullcontext
from functools import cached_property
from pathlib import Path

import torch

from graft.algo import CapabilityTracker, minibatch_order
from graft.data.problems import Problem, batch_indices, load_problems
from graft.data.records import write_step
from graft.engine.distributed import SINGLE, World
from graft.engine.placement import place
from graft.engine.reward import Grader
from graft.engine.scoring import ScoringSettings
from graft.engine.trajectory import Group, Trajectory
from graft.engine.weight_sync import SHM
from graft.errors import ConfigError
from graft.numerics import numerics_record
from graft.planning.step_time import longest_step_seconds
from graft.results import RunDir, write_text
from graft.seeding import generator
from graft.services.tracking import Tracker, check_backends
from graft.train import checkpoint
from graft.train.deadline import StepDeadline
from graft.train.exchange import exchange
from graft.train.learner import Learner, make_learner
from graft.train.lock import LockLost, RunLock
from graft.train.peers import ArchivePeer, LiveGroup, LivePair, NoPeer, PeerSource
from graft.train.request import TrainRequest, validate_request
from graft.train.run_state import OutPlan, plan_out, replace, retire, run_identity
from graft.train.sampling import dynamic_rollout_step, grade_in_shares, rollout_step
from graft.train.stop import StopRequests, TrainingStopped
from graft.train.update import UpdateSettings, UpdateTotals, minibatch_update


class _StepAbandoned(Exception):
    """A stop agreed before the step's first update: the step is dropped and the state it started from saved."""


def job_gpus(world: World) -> int:
    """The job's GPUs: one per process of the whole job, on every node (torchrun starts one process per GPU); none
    on the CPU."""
    return world.size if world.device.type == "cuda" else 0


class Trainer:
    def __init__(self, req: TrainRequest, world: World = SINGLE):
        validate_request(req)
        check_backends(req.config.logging.backends)
        if req.config.scale.engine == "deepspeed":
            from graft.engine.deepspeed_engine import check_available

            check_available()
        self.req, self.world, self.cfg, self.method = req, world, req.config, req.method
        self.run_dir = RunDir(req.out)
        self.problems: list[Problem] = load_problems(self.cfg.data.train, "data.train")
        if len(self.problems) < self.cfg.train.prompts_per_step:
            raise ConfigError(
                f"train.prompts_per_step: {self.cfg.train.prompts_per_step} is more than the "
                f"{len(self.problems)} prompts of data.train; expected at most {len(self.problems)}"
            )
        self.grader = Grader(self.cfg.reward.kind, self.cfg.reward.timeout, self.cfg.reward.workers)
        scale = self.cfg.scale
        self.placement = place(req.models, world, scale.placement, scale.processes, scale.sharding)
        self.capabilities = {name: CapabilityTracker(self.method.hacpo_window) for name in req.models}
        """Every model's HACPO capability, on every process (a peer's is needed where the peer does not live)."""
        self.peer = self._peer()
        self.scoring = ScoringSettings.from_train(self.cfg.train)
        self.start_step = 0
        self.stops = StopRequests()
        self.lock: RunLock | None = None
        """The run directory's lock while ``run`` holds it, on process 0."""

    @cached_property
    def learners(self) -> list[Learner]:
        """This process's models, loaded (with their rollout engines) on first use: ``run`` uses them only once it
        holds the run's lock and knows there is training to do."""
        return [make_learner(name, self.cfg, self.method, home) for name, home in self.placement.homes.items()]

    def _peer(self) -> PeerSource:
        if self.method.peer == "live":
            live = LivePair if len(self.req.models) == 2 else LiveGroup
            return live(self.method, self.req.seed)
        if self.method.peer == "archive":
            grade = lambda texts, answers: grade_in_shares(self.grader, self.world, texts, answers)  # noqa: E731
            return ArchivePeer(self.method, self.req.seed, list(self.req.peer_archives), grade)
        return NoPeer()

    def step(self, step: int) -> list[dict]:
        """One step of Algorithm 1 for every model of the run; returns one metrics row per model, on process 0
        (the rows of this process's models elsewhere)."""
        t_step = time.perf_counter()
        batch = self._batch(step)
        rollouts, records, infos, batches = {}, {}, {}, {}
        rollout = dict(n=self.method.n, seed=self.req.seed, grader=self.grader, scoring=self.scoring)
        try:
            for learner in self.learners:
                batches[learner.name] = batch
                learner.refresh_rollout()
                if self.method.dynamic_sampling:
                    rollouts[learner.name], infos[learner.name], batches[learner.name] = dynamic_rollout_step(
                        learner,
                        step,
                        lambda round_: batch if round_ == 0 else self._resample(step, round_),
                        target=len(batch),
                        rounds=self.method.resample_rounds,
                        world=learner.world,
                        **rollout,
                    )
                else:
                    rollouts[learner.name], infos[learner.name] = rollout_step(
                        learner, step, batch, world=learner.world, **rollout
                    )
                records[learner.name] = rollouts[learner.name].records
        except Exception:
            # a stop signal reaches the rollout engines too (Slurm signals every process of the job's steps) and
            # vLLM's engine cores exit on SIGTERM: the rollout then fails, and the step is dropped as on any stop
            # before the models change, its starting state saved. Every process's engines get the signal; one whose
            # rollout went on waits in a collective until its step deadline ends the job, and the retry resumes.
            if self.stops.received is None:
                raise
            raise _StepAbandoned from None
        crossed = self._publish(records, infos, batches)
        records, infos, batches = ({name: d[name] for name in self.req.models} for d in (records, infos, batches))
        for name in self.req.models:
            if self.world.is_main:
                write_step(records[name], self.run_dir.trajectories(name))
            self.capabilities[name].update(infos[name]["reward_mean"])
        received = exchange(
            self.method,
            self.peer,
            step,
            batch,
            records,
            rollouts,
            self.capabilities,
            self.learners,
            seed=self.req.seed,
            scoring=self.scoring,
        )
        # the last point before the models change; the helper processes (grading pool, vLLM engines) are done, so a
        # SIGTERM that reached them too cannot have spoilt a step that goes on
        if self._any_process(self.stops.received is not None)[0]:
            raise _StepAbandoned
        rows = []
        for learner in self.learners:
            groups, exchange_info = received[learner.name]
            info = infos[learner.name]
            info.update(exchange_info)
            t0 = time.perf_counter()
            info.update(self._update(learner, groups, step))
            info["update_s"] = time.perf_counter() - t0
            if self.placement.split:
                info["exchange_bytes"] = crossed
            rows.append({"step": step, "model": learner.name, **info})
        if self.placement.split:  # every group's rows, in the run's model order
            mine = rows if all(self.placement.publishes(row["model"]) for row in rows) else []
            by_model = {row["model"]: row for part in self.world.gather(mine) for row in part}
            rows = [by_model[name] for name in self.req.models]
        step_time = time.perf_counter() - t_step
        gpus = job_gpus(self.world)
        return [{**row, "step_time_s": step_time, "gpu_hours": step_time * gpus / 3600} for row in rows]

    def _publish(self, records: dict, infos: dict, batches: dict) -> int:
        """Under the split placement, every model's step records, rollout metrics and kept prompts onto every
        process (each group's first process sends its own); returns the bytes sent between the groups. Nothing
        crosses when the models are colocated."""
        if not self.placement.split:
            return 0
        mine = {name: (records[name], infos[name], batches[name]) for name in records if self.placement.publishes(name)}
        payload = pickle.dumps(mine, protocol=pickle.HIGHEST_PROTOCOL) if mine else b""
        for part in self.world.gather(payload):
            for name, (rec, info, kept) in (pickle.loads(part) if part else {}).items():
                if name not in records:
                    records[name], infos[name], batches[name] = rec, info, kept
        return int(self.world.sum([len(payload)])[0])

    def _batch(self, step: int) -> list[Problem]:
        """The step's prompts: from the run's seeded sampler, or the imported archive's batch that replay follows."""
        ids = self.peer.batch_ids(step) if isinstance(self.peer, ArchivePeer) else None
        if ids is None:
            size = self.cfg.train.prompts_per_step
            return [self.problems[i] for i in batch_indices(step, size, len(self.problems), self.req.seed)]
        by_id = {p.id: p for p in self.problems}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise ConfigError(f"--peer-archive: step {step} names problem {missing[0]!r}, which data.train lacks")
        return [by_id[i] for i in ids]

    def _resample(self, step: int, round_: int) -> list[Problem]:
        """Dynamic sampling's ``round_``-th extra draw of a step: a fresh seeded batch of the same size (it may
        repeat prompts of the step's batch, as drawing from the next batches of the data loader would)."""
        size, total = self.cfg.train.prompts_per_step, len(self.problems)
        order = torch.randperm(total, generator=generator(self.req.seed, "resample", step, round_)).tolist()
        return [self.problems[i] for i in order[:size]]

    def _update(self, learner: Learner, groups: list[Group], step: int) -> dict:
        """The step's optimizer updates, one per minibatch, in the method's order (peer-last for GRAFT)."""
        num = self.method.minibatches or self.cfg.train.minibatches
        settings = UpdateSettings.from_train(self.cfg.train)
        totals, peer_positions = UpdateTotals(), []
        minibatches = self._minibatches(groups, num, step, learner.name)
        for m, rows in enumerate(minibatches):
            if any(r.is_peer for r in rows):
                peer_positions.append(m)
            totals.add(
                minibatch_update(
                    self.method,
                    learner.policy,
                    learner.stepper,
                    rows,
                    settings=settings,
                    update_index=m,
                    ref_model=learner.ref_model,
                    world=learner.world,
                )
            )
        learner.rollout_stale = learner.separate_rollout
        updates = max(len(minibatches), 1)
        fraction = lambda clipped, tokens: clipped / tokens if tokens else None  # noqa: E731
        return {
            "loss": totals.loss / updates,
            "grad_norm": totals.grad_norm / updates,
            "nll": totals.nll / updates if totals.nll is not None else None,
            "clip_frac_own": fraction(totals.clipped_tokens_own, totals.tokens_own),
            "clip_frac_peer": fraction(totals.clipped_tokens_peer, totals.tokens_peer),
            "tokens_own": int(totals.tokens_own),
            "tokens_peer": int(totals.tokens_peer),
            "updates": len(minibatches),
            "peer_minibatch_positions": peer_positions,
        }

    def _minibatches(self, groups: list[Group], num: int, step: int, name: str) -> list[list[Trajectory]]:
        """The step's minibatches in update order: whole groups placed as the method's order says, or, for
        ``self_first``, single responses (own ones first)."""
        gen = generator(self.req.seed, "order", step, name)
        if self.method.order == "self_first":
            rows = [row for g in groups for row in g.rows]
            is_peer = torch.tensor([r.is_peer for r in rows], dtype=torch.bool)
            return [[rows[i] for i in chunk.tolist()] for chunk in minibatch_order(is_peer, num, "self_first", gen)]
        grafted = torch.tensor([g.grafted for g in groups], dtype=torch.bool)
        order = minibatch_order(grafted, num, self.method.order, gen)
        return [[row for gi in chunk.tolist() for row in groups[gi].rows] for chunk in order]

    def run(self, log=lambda fields: None):
        """Train (or resume) to ``req.steps``, checkpointing on the way, holding the run directory's lock, taken
        before any model loads; returns the metrics file. What is already in ``--out`` is never removed or redone
        unless asked (graft.train.run_state)."""
        self.run_dir.root.mkdir(parents=True, exist_ok=True)
        sync_dir = Path(self.cfg.scale.sync_dir) if self.cfg.scale.sync_dir else SHM
        lock = RunLock(self.run_dir.root, self.req.force_unlock, sync_dir=sync_dir) if self.world.is_main else None
        with lock or nullcontext():
            self.world.barrier()  # process 0 holds the lock before any process reads the directory
            self.lock = lock
            return self._run(log)

    def _meta(self) -> dict:
        req = self.req
        return run_identity(self.cfg, self.method.to_dict(), req.models, req.seed, req.steps, req.peer_archives)

    def _run(self, log):
        run, main, meta = self.run_dir, self.world.is_main, self._meta()
        try:
            plan: OutPlan = plan_out(run, meta, self.req.steps, self.req.resume, self.req.overwrite)
        except ConfigError:
            if not self.req.retrain:
                raise
            plan = OutPlan("retrain")
        self.world.barrier()  # every process has read the directory before process 0 changes it
        if plan.action == "finished":
            if main:
                todo = "nothing to train" if self.req.eval_dir else "nothing to do"
                self._say(f"{str(run.root)!r} holds this run, finished at {self.req.steps} steps; {todo}")
                if not run.done.is_file():  # removed by hand: the record run.json keeps of it goes back
                    write_text(run.done, json.dumps(json.loads(run.run_json.read_text())["finished"], indent=2) + "\n")
            try:
                self._evaluate()  # what a killed job's evaluations lack, if asked
            finally:
                self.grader.close()
            self.world.barrier()
            return run.metrics
        if main:
            if plan.action == "replace":
                self._say(f"--overwrite: replacing the run in {str(run.root)!r}")
                replace(run)
            if plan.action == "retrain":
                kept = retire(run, self.req.keep_evals)
                self._say(f"--retrain: the run of other settings in {str(run.root)!r} is kept in {str(kept)!r}")
            run.done.unlink(missing_ok=True)
            run.pruned.unlink(missing_ok=True)  # it describes the finished run this one continues
        self.world.barrier()
        learners = self.learners  # the models load here, once there is training to do
        if plan.action == "resume":
            self.start_step = checkpoint.restore(
                run, learners, self.world, self.req.models, self.capabilities, start_over=plan.extend_from is None
            )
        if main:  # what a previous run wrote for the steps to come is redone
            checkpoint.trim_after(run, self.start_step, self.req.models)
        if main:
            # what decides the CPU float bits (graft.numerics), beside what decides the run
            record = {**meta, "numerics": numerics_record()}
            write_text(run.run_json, json.dumps(record, indent=2) + "\n")
        tracker = Tracker(self.cfg, run.root, meta, self.start_step) if main else None
        try:
            try:
                self._train_steps(log, tracker)
            finally:
                self._close_rollouts()
            self._evaluate()
        finally:
            self.grader.close()
            if tracker is not None:
                tracker.close()
        self._check_lock()
        if main:
            self._write_done()
            # only after done.json: a run killed before it is written must still be able to resume
            if not self.cfg.train.keep_resume_state:
                checkpoint.remove_resume_state(run.saved_checkpoints(), list(self.req.models))
        self.world.barrier()
        return run.metrics

    def _close_rollouts(self) -> None:
        """Stop the learners' rollout engines once no step is left: before an evaluation's engine asks for its share
        of the GPU, and before a process of a distributed job ends without the interpreter's teardown
        (graft.engine.distributed.end_process), which would leave vLLM's engine core processes running, holding
        the job's GPU memory and its output streams."""
        for learner in self.__dict__.get("learners", ()):  # only the models this run loaded
            learner.rollout.close()

    def _evaluate(self) -> None:
        """With ``--eval-dir``, every checkpoint of the run not yet evaluated there."""
        if self.req.eval_dir is None:
            return
        from graft.eval.evaluate import Evaluator, evaluate_run

        with Evaluator(self.cfg, self.grader) as evaluator:
            evaluate_run(evaluator, self.run_dir, self.req.models, self.req.eval_dir, only_missing=True)

    def _train_steps(self, log, tracker: Tracker | None) -> None:
        """The steps from ``start_step`` on, with their metrics and checkpoints: the models every
        ``train.checkpoint_every`` steps; the resume state (optimizer and float32 masters) with them when
        ``train.checkpoint_minutes`` is unset, else once that much wall time has passed since the last (with a
        policy checkpoint when one is due, alone as an interim checkpoint when not), on a stop signal
        (graft.train.stop, after which ``TrainingStopped`` is raised) and at the last step. A kill loses at most
        ``train.checkpoint_minutes`` of training. Each step has a deadline (graft.train.deadline), past which the
        process ends."""
        run, main = self.run_dir, self.world.is_main
        every, minutes = self.cfg.train.checkpoint_every, self.cfg.train.checkpoint_minutes
        keep = self.cfg.train.resumable_checkpoints
        dtypes = {name: self.cfg.models[name].dtype for name in self.req.models}
        save = lambda next_step, interim, state=True: checkpoint.save(  # noqa: E731
            run,
            next_step,
            self.learners,
            self.world,
            dtypes,
            self.capabilities,
            self.placement.sizes,
            keep,
            interim,
            state,
            self._check_lock,
        )
        last_save, saved = time.monotonic(), self.start_step
        train = self.cfg.train
        predicted = longest_step_seconds(self.cfg, self.method, tuple(self.req.models))
        deadline = StepDeadline(train.step_deadline_factor, train.step_deadline_minutes, predicted, self.world.rank)
        with self.stops, deadline:
            for step in range(self.start_step, self.req.steps):
                rng, capabilities = checkpoint.rng_state(), {n: t.state_dict() for n, t in self.capabilities.items()}
                try:
                    with deadline.step(step):
                        rows = self.step(step)
                except _StepAbandoned:  # back to the state the step started from, which is saved
                    checkpoint.set_rng_state(rng)
                    for name, state in capabilities.items():
                        self.capabilities[name].load_state_dict(state)
                    path = save(step, interim=True) if step > saved else None
                    raise TrainingStopped(self.stops.received, step, path) from None
                if main:
                    with run.metrics.open("a") as handle:
                        handle.writelines(json.dumps(row) + "\n" for row in rows)
                    tracker.log(step, rows)
                    log({"step": step, "of": self.req.steps, **{r["model"]: round(r["reward_mean"], 4) for r in rows}})
                due = minutes is not None and time.monotonic() - last_save >= minutes * 60
                due, stop = self._any_process(due, self.stops.received is not None)
                last = step + 1 == self.req.steps
                resumable = minutes is None or due or stop or last
                path = None
                if (step + 1) % every == 0 or last:
                    path = save(step + 1, interim=False, state=resumable)
                elif due or stop:
                    path = save(step + 1, interim=True)
                if path is not None and resumable:
                    last_save, saved = time.monotonic(), step + 1
                if stop:
                    raise TrainingStopped(self.stops.received, step + 1, path)

    def _check_lock(self) -> None:
        """Raise ``LockLost`` on every process when process 0's lock is no longer this run's: a trainer that took
        the run over owns the directory now. Collective, asked before each save."""
        lost = None
        if self.lock is not None:
            try:
                self.lock.check_held()
            except LockLost as err:
                lost = str(err)
        lost = self.world.gather(lost)[0]
        if lost is not None:
            raise LockLost(lost)

    def _any_process(self, *flags: bool) -> list[bool]:
        """Each flag, true where it is true on any process: one collective that every process makes at the same
        point, so that all take the same branch (an interim checkpoint by wall time, a stop on a signal)."""
        return [total > 0 for total in self.world.sum([float(flag) for flag in flags])]

    def _write_done(self) -> None:
        """The run's completion record: written last and atomically, so its presence means a finished run."""
        rows = [json.loads(line) for line in self.run_dir.metrics.read_text().splitlines() if line]
        by_step = {r["step"]: r for r in rows}
        done = {
            "models": self.req.models,
            "steps": self.req.steps,
            "checkpoints": [p.name for p in self.run_dir.checkpoints()],
            "wall_hours": sum(r["step_time_s"] for r in by_step.values()) / 3600,
            "gpu_hours": sum(r["gpu_hours"] for r in by_step.values()),
        }
        # run.json keeps a copy: Snakemake removes done.json before it reruns a job, and a finished run stays
        # finished for graft.train.run_state
        record = json.loads(self.run_dir.run_json.read_text())
        write_text(self.run_dir.run_json, json.dumps({**record, "finished": done}, indent=2) + "\n")
        write_text(self.run_dir.done, json.dumps(done, indent=2) + "\n")

    def _say(self, line: str) -> None:
        print(f"graft train: {line}", file=sys.stderr, flush=True)
