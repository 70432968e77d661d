"""One deterministic minibatch (a tiny Qwen3 model and rows of own and peer responses) shared by the
single-process test and the torchrun worker, so both start from identical weights and data."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from graft.engine.policy import Policy, response_logprobs
from graft.engine.prompts import PromptFormat
from graft.engine.trajectory import Trajectory
from graft.methods import get_method
from helpers.tiny_qwen3 import tiny_qwen3


def build_case(method_name: str, rows: int = 11) -> tuple[Policy, list[Trajectory], object]:
    model = tiny_qwen3(64, layers=2, max_positions=64)
    policy = Policy("case", model, SimpleNamespace(pad_token_id=0, eos_token_id=1), PromptFormat())
    g = torch.Generator().manual_seed(1)
    prompts = [
        torch.randint(2, 64, (int(torch.randint(3, 9, (1,), generator=g)),), generator=g).tolist() for _ in range(rows)
    ]
    responses = [
        torch.randint(2, 64, (int(torch.randint(1, 13, (1,), generator=g)),), generator=g).tolist() for _ in range(rows)
    ]
    with torch.no_grad():
        logp, _ = response_logprobs(model, prompts, responses, 0)
    method = get_method(method_name)
    out = []
    for i in range(rows):
        n = len(responses[i])
        noise = torch.randn(n, generator=g) * 0.3
        out.append(
            Trajectory(
                prompt_ids=prompts[i],
                response_ids=responses[i],
                old_logp=(logp[i, :n] + noise).tolist(),
                advantage=float(torch.randn(1, generator=g)),
                weight=[1.0, 0.9, 0.0][i % 3] if i % 2 else 1.0,
                is_peer=bool(i % 2),
                src_mean_ll=-float(torch.rand(1, generator=g)),
                nll_only=method.update == "nll" and i % 4 == 3,
            )
        )
    return policy, out, method


def reference_model(policy: Policy) -> torch.nn.Module:
    import copy

    return copy.deepcopy(policy.model).requires_grad_(False)


def scoring_case(policy: Policy) -> tuple[list[str], list[str], list[bool]]:
    """Seven peer responses (an odd count, so the two processes' shares and pass counts differ)."""
    problems = ["What is 2+3?", "What is 4+4?", "What is 1+1?", "What is 6+1?", "What is 2+3?", "What is 9+9?", "2"]
    responses = ["so \\boxed{5}", "so \\boxed{8}", "so", "so \\boxed{74}", "", "x \\boxed{18}", "so \\boxed{2}"]
    return [policy.prompt_text(p) for p in problems], responses, [True, True, False, True, False, True, True]
