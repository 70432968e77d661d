"""The check of graft's calls into vLLM against a build's source (tests/helpers/vllm_calls.py), on small source
trees shaped like vLLM's: it passes on the signatures of vLLM 0.33.0 and fails on an API that moved."""

from __future__ import annotations

from pathlib import Path

from helpers.vllm_calls import mismatches

FILES = {
    "entrypoints/llm.py": """
class LLM:
    def __init__(self, model, *, tokenizer=None, **kwargs): ...
    def generate(self, prompts, sampling_params=None, *, use_tqdm=True): ...
    def collective_rpc(self, method, timeout=None, args=(), kwargs=None): ...
    def reset_prefix_cache(self, reset_running_requests=False): ...
    def sleep(self, level=1): ...
    def wake_up(self, tags=None): ...
""",
    "v1/worker/gpu_worker.py": """
class Worker:
    def reload_weights(self, *args, **kwargs): ...
""",
    "v1/worker/gpu_model_runner.py": """
class GPUModelRunner:
    def reload_weights(self, weights_iterator=None, weights_path=None, is_checkpoint_format=True): ...
""",
    "engine/arg_utils.py": """
class EngineArgs:
    model: str = ""
    dtype: str = "auto"
    max_model_len: int = 0
    enable_sleep_mode: bool = False
    logprobs_mode: str = "raw_logprobs"
    worker_extension_cls: str = ""
    enable_prefix_caching: bool = True
    trust_remote_code: bool = False
    seed: int = 0
    kv_cache_memory_bytes: int = 0
    gpu_memory_utilization: float = 0.9
    enable_chunked_prefill: bool = True
    max_num_seqs: int = 0
""",
    "v1/engine/core_client.py": """
class EngineCoreClient:
    def shutdown(self, timeout=None): ...
""",
    "sampling_params.py": """
class SamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: int = 16
    seed: int = 0
    logprobs: int = 0
    skip_special_tokens: bool = True
    detokenize: bool = True
    stop_token_ids: list = []
""",
}


def _tree(root: Path, **replaced: str) -> Path:
    for name, text in {**FILES, **replaced}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_calls_match_signatures_of_the_pinned_shape(tmp_path):
    assert mismatches(_tree(tmp_path)) == []


def test_a_worker_whose_reload_takes_no_arguments_is_a_mismatch(tmp_path):
    """The shape of an earlier GPU worker: ``reload_weights(self)``, reloading from the model's own path."""
    root = _tree(tmp_path, **{"v1/worker/gpu_worker.py": "class Worker:\n    def reload_weights(self): ...\n"})
    assert any("Worker.reload_weights: takes no weights_iterator, is_checkpoint_format" in m for m in mismatches(root))


def test_a_renamed_engine_argument_and_a_missing_method_are_mismatches(tmp_path):
    args = FILES["engine/arg_utils.py"].replace("kv_cache_memory_bytes", "kv_cache_bytes")
    reset = "    def reset_prefix_cache(self, reset_running_requests=False): ...\n"
    llm = FILES["entrypoints/llm.py"].replace(reset, "")
    found = mismatches(_tree(tmp_path, **{"engine/arg_utils.py": args, "entrypoints/llm.py": llm}))
    assert any("LLM.__init__: takes no kv_cache_memory_bytes" in m for m in found)
    assert any("LLM.reset_prefix_cache: not defined" in m for m in found)
