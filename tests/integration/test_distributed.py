"""The distributed training path (FSDP2 over gloo processes on the CPU) against the single-process path:
the same loss and parameters after an update, and a sharded checkpoint that resumes exactly."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers.dist_case import build_case, reference_model
from helpers.processes import children, kill_torchrun
from hypothesis import given, settings
from hypothesis import strategies as st

from graft.engine.trajectory import Trajectory
from graft.planning.launch import FAILED
from graft.train.update import UpdateSettings, minibatch_update, plan_micro_batches

TESTS = Path(__file__).resolve().parents[1]
WORKER = TESTS / "helpers" / "dist_worker.py"


def _single(method_name: str, micro_batch: int, micro_batch_tokens: int | None, packing: bool = False):
    torch.set_num_threads(1)
    policy, rows, method = build_case(method_name)
    ref = reference_model(policy) if method.kl_coef > 0 else None
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=1e-3)
    settings = UpdateSettings(
        grad_clip=1.0, micro_batch=micro_batch, micro_batch_tokens=micro_batch_tokens, packing=packing
    )
    stats = minibatch_update(method, policy, optimizer, rows, settings=settings, ref_model=ref)
    return dataclasses.asdict(stats), {k: v.detach().clone() for k, v in policy.model.state_dict().items()}


def _torchrun(processes: int, *args: str, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    """``torchrun --standalone`` with ``processes`` processes of one thread each; ``args``: a script and its
    arguments, or ``-m module ...``."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", **({"PYTHONPATH": str(pythonpath)} if pythonpath else {})}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


def _worker_updates(method_name: str, out: Path, processes: int, engine: str = "fsdp2") -> dict:
    result = _torchrun(processes, str(WORKER), method_name, str(out), engine, pythonpath=TESTS)
    assert result.returncode == 0, result.stderr[-3000:]
    return torch.load(out / "result.pt", weights_only=False)


def _assert_close(params: dict, reference: dict) -> None:
    """Within 1% of one AdamW step (lr 1e-3): Adam divides by sqrt(v), so a gradient entry near zero turns the
    float32 rounding of another summation order into an update difference of up to that size."""
    assert params.keys() == reference.keys()
    for name, value in reference.items():
        torch.testing.assert_close(params[name], value, rtol=1e-5, atol=1e-5, msg=name)


@pytest.mark.parametrize("engine", ["fsdp2", "zero2", "zero3"])
@pytest.mark.parametrize("method_name", ["graft", "hacpo", "sgt"])
def test_two_gloo_processes_equal_one_process(method_name, engine, tmp_path):
    """FSDP2 and DeepSpeed ZeRO-2/3 over two gloo processes: the one-process loss, gradient norm and parameters
    after an update, and a sharded checkpoint that redoes the second update exactly; DeepSpeed compiles nothing."""
    single, params = _single(method_name, micro_batch=64, micro_batch_tokens=None)
    dist = _worker_updates(method_name, tmp_path, 2, engine)
    assert dist["world"] == 2
    assert not dist["native_collectives"], "DeepSpeed built its shared-memory collective op"
    sharded = dist["stats"][0]
    assert sharded["loss"] == pytest.approx(single["loss"], rel=1e-5, abs=1e-7)
    assert sharded["grad_norm"] == pytest.approx(single["grad_norm"], rel=1e-5)
    assert sharded["tokens_own"] == single["tokens_own"] and sharded["tokens_peer"] == single["tokens_peer"]
    assert sharded["clipped_tokens_peer"] == pytest.approx(single["clipped_tokens_peer"])
    assert (sharded["nll"] is None) == (single["nll"] is None) == (method_name != "sgt")
    if single["nll"] is not None:
        assert sharded["nll"] == pytest.approx(single["nll"], rel=1e-5)
    _assert_close(dist["after_one"], params)
    # the second update redone after restoring the sharded checkpoint of the first lands on the same weights
    assert dist["stats"][2] == dist["stats"][1]
    for name, value in dist["after_two"].items():
        assert torch.equal(dist["resumed"][name], value), name
    # the weight sync: one file for the node (one thread, one writer), written by its first process, read by both,
    # removed afterwards
    during, after, paths = dist["sync_files"]
    assert len(during) == 1 and after == [] and paths[0] == paths[1]
    assert dist["synced"].keys() == dist["resumed"].keys()
    for name, value in dist["resumed"].items():
        assert torch.equal(dist["synced"][name], value), name


def test_the_sync_casts_each_shard_to_bf16_before_its_gather(tmp_path):
    """FSDP2 over two gloo processes, float32 masters, a bf16 engine: every gather is given this process's shard
    already in bf16 (half the bytes over NVLink on GPUs), and both processes read the node's two files (written at
    once through buckets of 24 elements) as the unsharded model cast to bf16, bit for bit, the tied embedding under
    both names."""
    result = _torchrun(2, str(TESTS / "helpers" / "sync_worker.py"), str(tmp_path), pythonpath=TESTS)
    assert result.returncode == 0, result.stderr[-3000:]
    for rank in range(2):
        report = torch.load(tmp_path / f"rank{rank}.pt", weights_only=False)
        assert report["same"] and report["files"] == 2
        assert report["gathers"], "nothing was gathered: the model was not sharded"
        for dtype, local, full, sharded in report["gathers"]:
            assert dtype == torch.bfloat16 and sharded and local[0] < full[0]


def test_sharded_scoring_of_peer_responses_equals_one_process(forced_world, tmp_path):
    from helpers.dist_case import scoring_case

    from graft.config import ModelSpec
    from graft.engine.policy import load_policy
    from graft.engine.scoring import ScoringSettings, score_peer_responses

    worker = [str(WORKER), "score", str(forced_world["A"]), str(tmp_path)]
    result = _torchrun(2, *worker, pythonpath=TESTS)
    assert result.returncode == 0, result.stderr[-3000:]
    sharded = torch.load(tmp_path / "scores.pt", weights_only=False)
    policy = load_policy("A", ModelSpec(path=str(forced_world["A"]), template="{problem} =\n"))
    single = score_peer_responses(policy, *scoring_case(policy), ScoringSettings(micro_batch=2))
    assert sharded[0] == single[0] and sharded[1] == single[1]  # the same tokenization, in the same order
    for a, b in zip(sharded[2], single[2], strict=True):
        assert a == pytest.approx(b, abs=1e-5)
    torch.testing.assert_close(sharded[3], single[3], atol=1e-5, rtol=0)


@pytest.mark.parametrize(("engine", "method_name"), [("fsdp2", "hacpo"), ("zero3", "sgt")])
def test_packed_passes_under_two_gloo_processes_equal_the_padded_one_process_update(engine, method_name, tmp_path):
    """FSDP2 and DeepSpeed ZeRO-3 on two gloo processes, every pass packed (gradient checkpointing, the chunked
    log-prob head, passes of unequal rows and counts): the padded one-process update's loss, gradient norm and
    parameters, and its scores of the same rows."""
    from graft.engine.scoring import ScoringSettings, score_responses

    single, params = _single(method_name, micro_batch=64, micro_batch_tokens=None)
    result = _torchrun(2, str(WORKER), "packed", method_name, str(tmp_path), engine, pythonpath=TESTS)
    assert result.returncode == 0, result.stderr[-3000:]
    packed = torch.load(tmp_path / "result.pt", weights_only=False)
    stats = packed["stats"]
    assert stats["loss"] == pytest.approx(single["loss"], rel=1e-5, abs=1e-7)
    assert stats["grad_norm"] == pytest.approx(single["grad_norm"], rel=1e-5)
    assert stats["tokens_own"] == single["tokens_own"] and stats["tokens_peer"] == single["tokens_peer"]
    if single["nll"] is not None:
        assert stats["nll"] == pytest.approx(single["nll"], rel=1e-5)
    _assert_close(packed["params"], params)
    policy, rows, _ = build_case(method_name)
    logps, means = score_responses(
        policy, [r.prompt_ids for r in rows], [r.response_ids for r in rows], ScoringSettings()
    )
    for a, b in zip(packed["scores"][0], logps, strict=True):
        assert a == pytest.approx(b, abs=1e-5)
    torch.testing.assert_close(packed["scores"][1], means, atol=1e-5, rtol=0)


@pytest.mark.parametrize("method_name", ["graft", "hacpo", "sgt"])
def test_packed_update_equals_the_padded_update(method_name):
    """The loss's normalisation is unchanged by packing: the same loss, gradient norm and parameters as the padded
    update, with passes of a different make-up (longest first, by tokens) than the padded ones."""
    padded_stats, padded = _single(method_name, micro_batch=64, micro_batch_tokens=30)
    packed_stats, packed = _single(method_name, micro_batch=64, micro_batch_tokens=30, packing=True)
    assert packed_stats["loss"] == pytest.approx(padded_stats["loss"], rel=1e-5, abs=1e-7)
    assert packed_stats["grad_norm"] == pytest.approx(padded_stats["grad_norm"], rel=1e-5)
    assert packed_stats["tokens_own"] == padded_stats["tokens_own"]
    assert packed_stats["clipped_tokens_peer"] == pytest.approx(padded_stats["clipped_tokens_peer"])
    if padded_stats["nll"] is not None:
        assert packed_stats["nll"] == pytest.approx(padded_stats["nll"], rel=1e-5)
    _assert_close(packed, padded)


def test_token_budget_micro_batches_equal_one_batch():
    one_stats, one = _single("graft", micro_batch=64, micro_batch_tokens=None)
    many_stats, many = _single("graft", micro_batch=64, micro_batch_tokens=30)
    assert many_stats["loss"] == pytest.approx(one_stats["loss"], rel=1e-5)
    _assert_close(many, one)


def _rows(lengths: list[tuple[int, int]]) -> list[Trajectory]:
    return [Trajectory([2] * p, [3] * r, [0.0] * r, 0.0) for p, r in lengths]


def test_plan_by_hand():
    rows = _rows([(2, 8), (2, 2), (2, 2), (2, 1)])  # lengths 10, 4, 4, 3
    # two processes: 10 -> rank 0; 4 -> rank 1; 4 -> rank 1 (load 4 < 10); 3 -> rank 1 (8 < 10)
    assert plan_micro_batches(rows, 2, max_rows=8) == [[[0]], [[1, 2, 3]]]
    # a 8-token budget: rank 1 packs [1] (4 tokens), then 4+4 > 8 would be 2 x 4 = 8 tokens: fits; then 3 rows x 4
    assert plan_micro_batches(rows, 2, max_rows=8, max_tokens=8) == [[[0], []], [[1, 2], [3]]]
    # one process, two rows at most: consecutive chunks as before token budgets existed
    assert plan_micro_batches(rows, 1, max_rows=2) == [[[0, 1], [2, 3]]]


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.tuples(st.integers(1, 9), st.integers(0, 9)), min_size=1, max_size=30),
    world=st.integers(1, 4),
    max_rows=st.integers(1, 8),
    max_tokens=st.one_of(st.none(), st.integers(1, 60)),
)
def test_plan_covers_every_row_once_within_limits(lengths, world, max_rows, max_tokens):
    rows = _rows(lengths)
    plan = plan_micro_batches(rows, world, max_rows, max_tokens)
    assert len(plan) == world
    assert len({len(m) for m in plan}) == 1  # the same number of passes on every process
    seen = sorted(i for per_rank in plan for micro in per_rank for i in micro)
    assert seen == list(range(len(rows)))
    for per_rank in plan:
        for micro in per_rank:
            assert len(micro) <= max_rows
            if max_tokens is not None and len(micro) > 1:
                width = max(len(rows[i].prompt_ids) + len(rows[i].response_ids) for i in micro)
                assert width * len(micro) <= max_tokens


def _graft_train(
    config: Path, out: Path, steps: int, resume: bool = False, method: str = "graft_no_gate", models: str = "A,B",
    extra: tuple[str, ...] = (), groups: str | None = None,
) -> subprocess.CompletedProcess:  # fmt: skip
    """``groups``: run in process groups laid out as on GPUs (tests/helpers/cuda_only_groups.py: ``gpu`` or
    ``nccl-alone``) rather than plain gloo."""
    # without the gate every transferred response is trained on, so the peer path surely runs in 3 steps
    args = ["train", "--config", str(config), "--method", method, "--models", models, "--seed", "0"]
    args += ["--out", str(out), "--steps", str(steps), *(["--resume"] if resume else []), *extra]
    if groups is not None:
        return _torchrun(2, str(TESTS / "helpers" / "cuda_only_groups.py"), groups, *args, pythonpath=TESTS)
    return _torchrun(2, "-m", "graft.cli", *args)


@pytest.mark.parametrize("engine", ["fsdp2", "deepspeed"])
def test_sharded_co_training_run_resumes_as_an_uninterrupted_one(forced_world, tmp_path, engine):
    """`graft train` under torchrun: two gloo processes, both models sharded (FSDP2, or DeepSpeed ZeRO-3), GRAFT
    exchange between them; a run stopped after its step-2 checkpoint and resumed from the sharded checkpoint ends
    where an uninterrupted run ends, and its Hugging Face export loads like any model directory."""
    import json

    import yaml
    from safetensors.torch import load_file

    from graft.config import ModelSpec
    from graft.engine.policy import load_policy

    config = yaml.safe_load(forced_world["config"].read_text())
    config["scale"] = {"processes": 2, "engine": engine}
    config["train"]["micro_batch_tokens"] = 64
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))

    whole, parts = tmp_path / "whole", tmp_path / "parts"
    for out, steps, resume in ((whole, 3, False), (parts, 2, False), (parts, 3, True)):
        result = _graft_train(path, out, steps, resume)
        assert result.returncode == 0, result.stderr[-3000:]

    def metrics(out):
        rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        return [{k: v for k, v in r.items() if not k.endswith("_s") and k != "gpu_hours"} for r in rows]

    assert [(r["step"], r["model"]) for r in metrics(whole)] == [(s, m) for s in range(3) for m in "AB"]
    assert metrics(parts) == metrics(whole)
    assert any(r["transferred"] > 0 and r["tokens_peer"] > 0 for r in metrics(whole))  # the exchange happened
    # resume state in the newest two checkpoints (train.resumable_checkpoints); every one keeps its model
    assert (whole / "checkpoints" / "step_00003" / "A" / "sharded").is_dir()
    assert (whole / "checkpoints" / "step_00002" / "A" / "sharded").is_dir()
    assert (whole / "checkpoints" / "step_00002" / "A" / "model.safetensors").is_file()
    for m in "AB":
        final = whole / "checkpoints" / "step_00003" / m
        w1, w2 = (
            load_file(final / "model.safetensors"),
            load_file(parts / "checkpoints" / "step_00003" / m / "model.safetensors"),
        )
        assert w1.keys() == w2.keys() and all(torch.equal(w1[k], w2[k]) for k in w1)
        load_policy(m, ModelSpec(path=str(final)))
    assert json.loads((whole / "done.json").read_text())["checkpoints"] == ["step_00002", "step_00003"]

    # archive replay of A's stored trajectories by B: the archive is regraded in shares and gathered back in
    # order, so the regraded rewards equal the stored ones
    replay = tmp_path / "replay"
    archive = ("--peer-archive", str(whole / "trajectories" / "A"))
    result = _graft_train(path, replay, 2, method="replay", models="B", extra=archive)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = metrics(replay)
    assert [r["model"] for r in rows] == ["B", "B"] and all(r["archive_rewards_changed"] == 0 for r in rows)


def _metrics_without_timings(out: Path) -> list[dict]:
    import json

    from graft.results import LAYOUT_METRICS, TIMING_METRICS

    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIMING_METRICS | LAYOUT_METRICS} for r in rows]


def _final_weights(out: Path, model: str, step: int = 3) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(out / "checkpoints" / f"step_{step:05d}" / model / "model.safetensors")


def _assert_resumes_to_the_whole_run(config: Path, out: Path, whole: Path) -> None:
    """``--resume`` of the stopped GRAFT run ``out`` to step 6 ends with ``whole``'s metrics and weights, bit for
    bit."""
    result = _graft_train(config, out, 6, resume=True, method="graft")
    assert result.returncode == 0, result.stderr[-3000:]
    assert _metrics_without_timings(out) == _metrics_without_timings(whole)
    for m in "AB":
        mine, reference = _final_weights(out, m, 6), _final_weights(whole, m, 6)
        assert all(torch.equal(mine[k], reference[k]) for k in reference)


@pytest.mark.parametrize("method", ["graft", "hacpo"])
def test_split_placement_equals_colocated_and_resumes(forced_world, tmp_path, method):
    """scale.placement: split over two gloo processes, one model each, sampling, scoring and updating at the same
    time with only the step's records crossing: the metrics and weights of the same pair colocated in one
    process, bit for bit (each model has one process either way); a split run stopped after its step-2
    checkpoint and resumed ends the same. HACPO needs the peer's capability, which lives on the other process.
    The split runs are in process groups laid out as on GPUs, where a host tensor in a collective without a CPU
    backend fails as under NCCL: every collective of the run, its checkpoint and its resume takes them."""
    import yaml

    from graft.cli import main

    config = yaml.safe_load(forced_world["config"].read_text())
    colocated_path, split_path = tmp_path / "colocated.yaml", tmp_path / "split.yaml"
    colocated_path.write_text(yaml.safe_dump(config))
    config["scale"] = {"processes": 2, "placement": "split"}
    split_path.write_text(yaml.safe_dump(config))

    colocated, split = tmp_path / "colocated", tmp_path / "split"
    args = ["train", "--config", str(colocated_path), "--method", method, "--models", "A,B", "--seed", "0"]
    torch.set_num_threads(1)
    assert main([*args, "--out", str(colocated), "--steps", "3"]) == 0
    for steps, resume in ((2, False), (3, True)):
        result = _graft_train(split_path, split, steps, resume, method=method, groups="gpu")
        assert result.returncode == 0, result.stderr[-3000:]

    rows = _metrics_without_timings(split)
    assert [(r["step"], r["model"]) for r in rows] == [(s, m) for s in range(3) for m in "AB"]
    assert rows == _metrics_without_timings(colocated)
    assert any(r["transferred"] > 0 for r in rows)  # the exchange crossed between the processes
    for m in "AB":
        mine, reference = _final_weights(split, m), _final_weights(colocated, m)
        assert mine.keys() == reference.keys() and all(torch.equal(mine[k], reference[k]) for k in mine)
    import json

    crossed = [json.loads(line)["exchange_bytes"] for line in (split / "metrics.jsonl").read_text().splitlines()]
    assert all(b > 0 for b in crossed)


def test_groups_with_nccl_alone_refuse_the_host_tensors_of_a_run(forced_world, tmp_path):
    """The failure the GPU layout prevents, reproduced: with NCCL's rule and no CPU backend beside it (how the job's
    groups were made before), the first of graft's host collectives stops the run."""
    import yaml

    config = yaml.safe_load(forced_world["config"].read_text())
    config["scale"] = {"processes": 2, "placement": "split"}
    path = tmp_path / "split.yaml"
    path.write_text(yaml.safe_dump(config))
    result = _graft_train(path, tmp_path / "run", 1, groups="nccl-alone")
    assert result.returncode != 0
    assert "No backend type associated with device type cpu" in result.stderr


@pytest.fixture(scope="module")
def split_run(forced_world, tmp_path_factory) -> tuple[Path, Path]:
    """A pair split over two processes, 6 steps with a checkpoint after each, run uninterrupted: its config and its
    run directory."""
    import yaml

    config = yaml.safe_load(forced_world["config"].read_text())
    config["scale"] = {"processes": 2, "placement": "split"}
    config["train"].update(steps=6, checkpoint_every=1)
    root = tmp_path_factory.mktemp("split")
    path, whole = root / "split.yaml", root / "whole"
    path.write_text(yaml.safe_dump(config))
    result = _graft_train(path, whole, 6, method="graft")
    assert result.returncode == 0, result.stderr[-3000:]
    return path, whole


def test_a_killed_split_run_resumes_to_the_uninterrupted_result(split_run, tmp_path):
    """SIGKILL to the whole torchrun process tree of a split run once its step-2 checkpoint is committed, then
    --resume: each group restores its own model and the run ends with the uninterrupted run's metrics and weights."""
    import time

    path, whole = split_run
    killed = tmp_path / "killed"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    args = ["train", "--config", str(path), "--method", "graft", "--models", "A,B", "--seed", "0", "--steps", "6"]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", "graft.cli"]
    proc = subprocess.Popen(
        [*cmd, *args, "--out", str(killed)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while not (killed / "checkpoints" / "step_00002" / "state.json").is_file():
        assert proc.poll() is None and time.monotonic() < deadline, "the run ended or stalled before step 2"
        time.sleep(0.01)
    kill_torchrun(proc.pid)
    proc.wait(timeout=60)
    assert not (killed / "done.json").exists()
    _assert_resumes_to_the_whole_run(path, killed, whole)


def test_a_stop_signal_to_one_process_stops_the_job_at_one_step_and_the_rerun_resumes(split_run, tmp_path):
    """SIGURG (Slurm's warning before a time limit) to one of the two processes of a split run started as the
    training rule starts it (python -m graft.planning.launch): both processes stop at the same step, the state there is
    saved as an interim checkpoint (the only one before the end), process 0, which had no signal, reports the stop,
    and the job exits non-zero; --resume ends with the uninterrupted run's metrics and weights."""
    import json
    import signal
    import time

    import yaml

    from graft.results import RunDir

    path, whole = split_run
    config = yaml.safe_load(path.read_text())
    config["train"]["checkpoint_every"] = 6
    path = tmp_path / "split.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "run"
    args = ["train", "--config", str(path), "--method", "graft", "--models", "A,B", "--seed", "0", "--steps", "6"]
    launch = [sys.executable, "-m", "graft.planning.launch", "--nodes", "1", "--processes", "2", "--", *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    log = tmp_path / "stderr.log"
    with log.open("w") as stderr:
        job = subprocess.Popen([*launch, "--out", str(out)], env=env, stderr=stderr)
    deadline = time.monotonic() + 300
    while not (out / "metrics.jsonl").is_file():  # step 0 is done
        assert job.poll() is None and time.monotonic() < deadline, "the run ended or stalled before step 1"
        time.sleep(0.01)
    rank1 = next(pid for pid in children(job.pid) if "RANK=1" in Path(f"/proc/{pid}/environ").read_text().split("\0"))
    os.kill(rank1, signal.SIGURG)
    assert job.wait(timeout=300) == os.EX_TEMPFAIL  # a stop, not a failure (graft.workflow.failures)
    err = log.read_text()
    stopped = [json.loads(line) for line in err.splitlines() if '"event": "stopped"' in line]
    assert len(stopped) == 1 and "by a signal to another process" in stopped[0]["reason"], err[-3000:]
    (interim,) = RunDir(out).interim_checkpoints()
    next_step = json.loads((interim / "state.json").read_text())["next_step"]
    assert next_step == stopped[0]["next_step"] < 6 and not RunDir(out).checkpoints()
    assert {r["step"] for r in _metrics_without_timings(out)} == set(range(next_step))
    _assert_resumes_to_the_whole_run(path, out, whole)


def _launch(tmp_path: Path, worker: str, signal_after: float | None = None) -> subprocess.CompletedProcess:
    """The training rule's launcher (graft.planning.launch.run_torchrun) running ``worker`` (Python source; RANK
    set) on two processes; ``signal_after``: SIGTERM to the launcher that many seconds after both have started."""
    import signal
    import time

    script = tmp_path / "worker.py"
    script.write_text("import os, signal, sys, time\nrank = int(os.environ['RANK'])\n" + worker)
    call = "from graft.planning.launch import run_torchrun as r; raise SystemExit(r({!r}))"
    args = ["--standalone", "--nproc-per-node=2", str(script)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "30"}
    job = subprocess.Popen([sys.executable, "-c", call.format(args)], env=env, stderr=subprocess.PIPE, text=True)
    if signal_after is not None:
        deadline = time.monotonic() + 120
        while len(children(job.pid)) < 2:
            assert job.poll() is None and time.monotonic() < deadline, "the processes did not start"
            time.sleep(0.05)
        time.sleep(signal_after)
        job.send_signal(signal.SIGTERM)
    _, err = job.communicate(timeout=300)
    return subprocess.CompletedProcess(job.args, job.returncode, "", err)


def test_the_launcher_passes_a_stop_on_where_torchrun_itself_would_exit_1(tmp_path):
    """graft.train.stop's EX_TEMPFAIL (saved, resumes) reaches the rule's shell, which records only other failures
    as failed for good (graft.workflow.failures): every process stopped, or one stopped and torchrun ended the
    other, or torchrun itself got Slurm's SIGTERM; any other failure is FAILED, above it (srun reports the highest
    status of its tasks)."""
    stop = f"sys.exit({os.EX_TEMPFAIL})"
    every = _launch(tmp_path, stop + "\n")
    assert every.returncode == os.EX_TEMPFAIL, every.stderr[-3000:]
    one = _launch(tmp_path, f"if rank == 0:\n    {stop}\ntime.sleep(120)\n")
    assert one.returncode == os.EX_TEMPFAIL, one.stderr[-3000:]
    failed = _launch(tmp_path, f"time.sleep(rank)\nsys.exit({os.EX_TEMPFAIL} if rank else 3)\n")
    assert failed.returncode == FAILED > os.EX_TEMPFAIL and "exitcode  : 3" in failed.stderr, failed.stderr[-3000:]
    # a worker that saves on SIGTERM, as graft train does; torchrun passes the signal on
    saving = f"signal.signal(signal.SIGTERM, lambda *a: sys.exit({os.EX_TEMPFAIL}))\ntime.sleep(120)\n"
    signalled = _launch(tmp_path, saving, signal_after=1.0)
    assert signalled.returncode == os.EX_TEMPFAIL, signalled.stderr[-3000:]
    assert "torchrun stopped by SIGTERM" in signalled.stderr


def test_hugging_face_rollouts_seeded_per_prompt_sample_alike_on_one_process_and_two(forced_world, tmp_path):
    """train.rollout_seeds: prompt: each prompt sampled alone from a seed of the step and its position, so a pair
    colocated on two processes (each sampling half the prompts, both models sharded) samples what one process
    samples: every count and reward equal, losses and norms within float reduction order."""
    import yaml

    from graft.cli import main

    config = yaml.safe_load(forced_world["config"].read_text())
    config["train"]["rollout_seeds"] = "prompt"
    one_path, two_path = tmp_path / "one.yaml", tmp_path / "two.yaml"
    one_path.write_text(yaml.safe_dump(config))
    config["scale"] = {"processes": 2}
    two_path.write_text(yaml.safe_dump(config))
    one, two = tmp_path / "one", tmp_path / "two"
    torch.set_num_threads(1)
    args = ["train", "--method", "graft", "--models", "A,B", "--seed", "0", "--steps", "3"]
    assert main([*args, "--config", str(one_path), "--out", str(one)]) == 0
    result = _torchrun(2, "-m", "graft.cli", *args, "--config", str(two_path), "--out", str(two))
    assert result.returncode == 0, result.stderr[-3000:]
    a_rows, b_rows = _metrics_without_timings(one), _metrics_without_timings(two)
    assert [(r["step"], r["model"]) for r in b_rows] == [(r["step"], r["model"]) for r in a_rows]
    for a, b in zip(a_rows, b_rows, strict=True):
        for key, value in a.items():
            if isinstance(value, float):
                assert b[key] == pytest.approx(value, rel=1e-5, abs=1e-7), (a["step"], a["model"], key)
            else:
                assert b[key] == value, (a["step"], a["model"], key)


@pytest.fixture(scope="module")
def forced_group(forced_world, tmp_path_factory):
    """The forced world with a third model C, a Llama-style model warmed up on A's answers (mixed on P1 with A, so
    that B's all-fail prompt there has two candidate peers), and the group G of A, B and C."""
    import yaml
    from helpers.forced import build_forced_model

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("group")
    c = build_forced_model(root / "C", "llama", "chars", 258, 0)
    config = yaml.safe_load(forced_world["config"].read_text())
    config["models"]["C"] = {**config["models"]["A"], "path": str(c)}
    config["groups"] = {"G": ["A", "B", "C"]}
    config["pairs"] = {}  # split over 3 processes: a pair could not take an equal share
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_group_of_three_split_over_three_processes_equals_one_process(forced_group, tmp_path):
    """GRAFT on a group of three models: every receiver takes each all-fail prompt from one peer and the metrics
    say from which; split over three gloo processes (one model each) it equals the group trained in one process,
    bit for bit."""
    import json

    import yaml

    from graft.cli import main

    config = yaml.safe_load(forced_group.read_text())
    config["scale"] = {"processes": 3, "placement": "split"}
    split_path = tmp_path / "split.yaml"
    split_path.write_text(yaml.safe_dump(config))
    one, split = tmp_path / "one", tmp_path / "split"
    args = ["train", "--method", "graft_no_gate", "--models", "A,B,C", "--seed", "0", "--steps", "3"]
    torch.set_num_threads(1)
    assert main([*args, "--config", str(forced_group), "--out", str(one)]) == 0
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=3", "-m", "graft.cli"]
    result = subprocess.run(
        [*cmd, *args, "--config", str(split_path), "--out", str(split)], env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]

    rows = _metrics_without_timings(one)
    assert [(r["step"], r["model"]) for r in rows] == [(s, m) for s in range(3) for m in "ABC"]
    assert _metrics_without_timings(split) == rows
    for r in rows:  # each selected prompt came from exactly one peer
        peers = {k.removeprefix("received_from_"): v for k, v in r.items() if k.startswith("received_from_")}
        assert set(peers) == set("ABC") - {r["model"]} and sum(peers.values()) == r["selected"]
    assert any(r["transferred"] > 0 for r in rows)
    for m in "ABC":
        mine, reference = _final_weights(split, m), _final_weights(one, m)
        assert all(torch.equal(mine[k], reference[k]) for k in reference)
    assert all(json.loads(line)["exchange_bytes"] > 0 for line in (split / "metrics.jsonl").read_text().splitlines())


def test_replay_from_two_archives_takes_each_prompt_from_one(forced_group, tmp_path):
    """Archive replay with two --peer-archive: B replays the stored GRPO runs of A and C; each selected prompt comes
    from one archive (the one with more successes), and the metrics count each."""
    from graft.cli import main

    torch.set_num_threads(1)
    common = ["--config", str(forced_group), "--seed", "0", "--steps", "3"]
    for model in "AC":
        assert main(["train", "--method", "grpo_n8", "--models", model, "--out", str(tmp_path / model), *common]) == 0
    archives = [a for m in "AC" for a in ("--peer-archive", str(tmp_path / m / "trajectories" / m))]
    out = tmp_path / "replay"
    assert main(["train", "--method", "replay", "--models", "B", "--out", str(out), *archives, *common]) == 0
    rows = _metrics_without_timings(out)
    assert len(rows) == 3
    assert all(r["received_from_A"] + r["received_from_C"] == r["selected"] for r in rows)
    assert sum(r["selected"] for r in rows) > 0


def test_gpu_check_script_runs_its_steps_on_a_tiny_model(tmp_path):
    """bench/checks/gpu_check.py is meant for a GPU node; --tiny runs every step on the CPU, on two processes so that
    the collectives phase runs, so that the script does not rot between GPU sessions (its timings are not checked
    here). Its checks hold: the collectives' results, float32 masters on one process with most weights moved,
    packed rows scoring as padded ones."""
    import json

    script = TESTS.parent / "bench" / "checks" / "gpu_check.py"
    result = _torchrun(2, str(script), "--tiny", "--out", str(tmp_path), pythonpath=TESTS.parent)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((tmp_path / "gpu_check_tiny.json").read_text())
    phases = ["collectives", "memory", "one-process", "packing", "engines started", "training", "sync", "rollout"]
    assert report["phases_done"] == phases
    assert report["sync_bytes"] > 0 and report["sync_gb_per_s"] > 0
    assert report["memory_row"] == [16, 32]  # the tiny stand-in's row, which graft plan's step time reads
    assert report["packing_logprob_error_packed"] < 1e-4  # float32 on the CPU, attended row by row
    assert "failed" not in report and report["collectives"].startswith("ok: sum, gather and barrier on 2 processes")
    assert report["one_process_master_dtypes"] == "torch.float32" and report["one_process_share_of_weights_moved"] > 0.5
    assert report["train_tokens"] == 2 * 8 * (16 + 32) and report["rollout_backend"] == "hf generate"
    assert report["rollout_sequences"] == 8 and 0 < report["rollout_tokens"] <= 8 * 32
    assert "| train_tokens_per_s" in result.stdout


@pytest.mark.parametrize(
    ("scale", "train", "extra", "message"),
    [
        ({"rollout": "vllm"}, {}, [], "scale.rollout: 'vllm' needs"),
        ({"processes": 2}, {}, ["--eval-dir", "EVALS"], "--eval-dir: not with scale.processes > 1"),
        ({"processes": 0}, {}, [], "scale.processes: 0 is not allowed"),
        ({}, {"micro_batch_tokens": 0}, [], "train.micro_batch_tokens: 0 is not allowed"),
        ({"rollout": "sglang"}, {}, [], "scale.rollout"),
    ],
)
def test_scale_settings_are_refused_before_compute(forced_world, tmp_path, capsys, scale, train, extra, message):
    import yaml

    from graft.cli import main

    config = yaml.safe_load(forced_world["config"].read_text())
    config["scale"] = scale
    config["train"].update(train)
    config["eval"] = {"benchmarks": {"forced": str(forced_world["data"])}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "never"
    argv = ["train", "--config", str(path), "--method", "graft", "--models", "A,B", "--seed", "0", "--out", str(out)]
    code = main([*argv, *[str(tmp_path / "evals") if a == "EVALS" else a for a in extra]])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert not out.exists()
