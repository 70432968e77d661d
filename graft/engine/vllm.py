"""Rollouts with vLLM (DESIGN.md section 8), returning the same ``Sample`` structure as ``HFRollout``.

One engine per model and process, on this process's GPU, in vLLM's default mode (the engine core in a child
process). Settings that make its samples what the loss assumes:

- ``logprobs_mode="processed_logprobs"`` and ``SamplingParams(logprobs=0)``: the log-prob of each sampled token
  under the distribution it was drawn from (after temperature; with top_p = 1, as in training, this equals
  ``log_softmax(raw logits / T)``, the definition of ``HFRollout`` and of the update);
- one seed per prompt, derived from the step's seed and the prompt's position, so samples do not depend on how
  prompts are split over processes;
- new weights after every optimizer step through a worker extension (``collective_rpc`` calling the model's own
  ``load_weights``), then a prefix-cache reset, because cached KV blocks belong to the old weights;
- when colocated with training, ``sleep(level=2)`` after each rollout (weights and KV cache freed) and
  ``wake_up(["weights"])`` / ``wake_up(["kv_cache"])`` around the next weight load and rollout.

Written against vLLM 0.33.0 (the ``gpu`` extra). The conversion to ``Sample`` is tested on the CPU with real
vLLM output objects; the engine itself runs only where a GPU is present (tests/integration/test_vllm_backend.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import torch

from graft.engine.rollout import Sample
from graft.seeding import derive

VLLM_VERSION = "0.33.0"


def check_available() -> None:
    """Refuse ``scale.rollout: vllm`` with one line where vLLM or a GPU is missing, before any model loads."""
    import importlib.util

    from graft.errors import ConfigError

    if importlib.util.find_spec("vllm") is None:
        raise ConfigError("scale.rollout: 'vllm' needs the gpu extra (pip install -e '.[gpu]'); or use 'hf'")
    if not torch.cuda.is_available():
        raise ConfigError("scale.rollout: 'vllm' needs a GPU; use 'hf' on a CPU")


class WeightLoader:
    """vLLM worker extension (``worker_extension_cls="graft.engine.vllm.WeightLoader"``): methods here run
    inside the engine's worker, where ``self`` is the worker."""

    def graft_load_weights(self, weights: list[tuple[str, torch.Tensor]]) -> int:
        """Load Hugging Face-named tensors into the running model; vLLM's loader maps names and fuses
        projections (q/k/v, gate/up) as it does when reading a checkpoint."""
        model = self.model_runner.get_model()  # the model itself, not its CUDA-graph wrapper
        device = next(model.parameters()).device
        model.load_weights(weights=((name, t.to(device)) for name, t in weights))
        return len(weights)


def sampling_params(n: int, temperature: float, top_p: float, max_tokens: int, seed: int, detokenize: bool = True):
    """The per-prompt ``SamplingParams``: n samples, top_k off, the sampled token's log-prob only."""
    from vllm import SamplingParams

    return SamplingParams(
        n=n,
        temperature=temperature,
        top_p=top_p,
        top_k=0,
        max_tokens=max_tokens,
        seed=seed,
        logprobs=0,
        skip_special_tokens=True,
        detokenize=detokenize,
    )


def prompt_seed(seed: int, index: int) -> int:
    """A prompt's sampling seed: a function of the step's seed and the prompt's position only."""
    return derive(seed, "vllm_prompt", index)


def to_samples(outputs: Iterable, max_tokens: int) -> list[list[Sample]]:
    """vLLM ``RequestOutput``s (one per prompt, in prompt order) to ``[prompt][sample]`` Samples.

    The sampled token's log-prob is read from each position's log-prob dictionary (with ``logprobs=0`` it
    holds the sampled token, plus the top-1 token when that differs). A sample is truncated when vLLM stopped
    it for length.
    """
    result: list[list[Sample]] = []
    for request in outputs:
        group = []
        for completion in sorted(request.outputs, key=lambda c: c.index):
            tokens = list(completion.token_ids)
            if completion.logprobs is None or len(completion.logprobs) != len(tokens):
                raise ValueError(
                    f"vLLM request {request.request_id}: {len(tokens)} tokens but "
                    f"{'no' if completion.logprobs is None else len(completion.logprobs)} log-prob positions; "
                    "the engine must be asked for logprobs=0"
                )
            logprobs = [
                float(position[token].logprob) for token, position in zip(tokens, completion.logprobs, strict=True)
            ]
            truncated = completion.finish_reason == "length" or (
                completion.finish_reason is None and len(tokens) >= max_tokens
            )
            group.append(Sample(token_ids=tokens, logprobs=logprobs, text=completion.text, truncated=truncated))
        result.append(group)
    return result


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
        gpu_memory_utilization: float = 0.3,
        colocated: bool = True,
        device_index: int | None = None,
        engine_args: dict | None = None,
    ):
        """``engine_args`` go to ``vllm.LLM`` as they are (e.g. ``skip_tokenizer_init`` for a model without a
        tokenizer, as in bench/gpu_check.py; samples then have empty text)."""
        from vllm import LLM

        self.max_new_tokens = max_new_tokens
        self.dtype = {"bfloat16": torch.bfloat16, "float32": torch.float32}[dtype]
        self.temperature = temperature
        self.top_p = top_p
        self.colocated = colocated
        self.asleep = False
        self.detokenize = not (engine_args or {}).get("skip_tokenizer_init", False)
        self.weights_loaded = True
        """False between a level-2 sleep, which frees the weights, and the next ``load_weights``."""
        # The engine core runs in a child process that inherits the environment: pin it to this process's GPU.
        previous = os.environ.get("CUDA_VISIBLE_DEVICES")
        if device_index is not None:
            visible = previous.split(",") if previous else [str(i) for i in range(torch.cuda.device_count())]
            os.environ["CUDA_VISIBLE_DEVICES"] = visible[device_index]
        try:
            self.llm = LLM(
                model=model_path,
                dtype=dtype,
                max_model_len=max_model_len,
                gpu_memory_utilization=gpu_memory_utilization,
                enable_sleep_mode=colocated,
                logprobs_mode="processed_logprobs",
                worker_extension_cls="graft.engine.vllm.WeightLoader",
                enable_prefix_caching=True,
                trust_remote_code=False,
                seed=0,
                **(engine_args or {}),
            )
        finally:
            if device_index is not None:
                if previous is None:
                    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
                else:
                    os.environ["CUDA_VISIBLE_DEVICES"] = previous

    def load_weights(self, weights: dict[str, torch.Tensor]) -> None:
        """The trainer's current parameters (full, Hugging Face names) into the engine."""
        if self.asleep:
            self.llm.wake_up(tags=["weights"])
        # in the engine's dtype: half the bytes through the RPC for bf16 engines
        named = [(name, t.detach().to("cpu", self.dtype)) for name, t in weights.items()]
        self.llm.collective_rpc("graft_load_weights", args=(named,))
        self.llm.reset_prefix_cache()
        self.weights_loaded = True

    def generate(self, prompts: list[list[int]], n: int, seed: int) -> list[list[Sample]]:
        from vllm.inputs import TokensPrompt

        if not self.weights_loaded:
            raise RuntimeError("vLLM engine slept at level 2 and has no weights: call load_weights first")
        if self.asleep:
            self.llm.wake_up(tags=["kv_cache"])
            self.asleep = False
        params = [
            sampling_params(n, self.temperature, self.top_p, self.max_new_tokens, prompt_seed(seed, i), self.detokenize)
            for i in range(len(prompts))
        ]
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
        if self.colocated:
            self.llm.sleep(level=2)
            self.asleep = True
            self.weights_loaded = False
        return to_samples(outputs, self.max_new_tokens)
