"""Cross-tokenizer scoring: a receiver re-tokenizes peer response strings and scores them with its behaviour
policy (the first term of paper Eq. 7, and the rho denominator of Eq. 9 for grafted tokens)."""

from __future__ import annotations

import math

import torch

from graft.algo import mean_token_logprob
from graft.engine.distributed import SINGLE, World
from graft.engine.policy import Policy, response_logprobs


def retokenize(policy: Policy, prompt_text: str, response: str, generated_eos: bool) -> tuple[list[int], list[int]]:
    """Split the receiver's tokenization of prompt + response at the string boundary.

    The whole text is tokenized once and the boundary found with offset mappings, because tokenizing the two
    parts separately can merge differently at the seam. A token that straddles the boundary goes to the
    response, so that every response character is scored. The receiver's EOS is appended when the source
    generated one: Eq. 6 counts the tokens the model generated, EOS included.

    Returns:
        (prompt_ids, response_ids) in the receiver's vocabulary.
    """
    tok = policy.tokenizer
    boundary = len(prompt_text)
    enc = tok(prompt_text + response, add_special_tokens=policy.template != "chat", return_offsets_mapping=True)
    ids, offsets = enc["input_ids"], enc["offset_mapping"]
    split = len(ids)
    for i, (start, end) in enumerate(offsets):
        if end > boundary and end > start:
            split = i
            break
    prompt_ids, response_ids = ids[:split], ids[split:]
    if generated_eos:
        response_ids = [*response_ids, policy.eos_token_id]
    return prompt_ids, response_ids


@torch.no_grad()
def score_peer_responses(
    policy: Policy,
    prompt_texts: list[str],
    responses: list[str],
    generated_eos: list[bool],
    temperature: float = 1.0,
    micro_batch: int = 64,
    world: World = SINGLE,
) -> tuple[list[list[int]], list[list[int]], list[list[float]], torch.Tensor]:
    """Re-tokenize peer responses for the receiver and score them with one forward pass per micro-batch.

    Under several processes each scores every ``size``-th response (the model is sharded, so every process
    runs the same number of forward passes, an empty share a one-row pass) and the scores are gathered.

    Returns:
        (prompt_ids, response_ids, per-token receiver log-probs, mean token log-likelihood [R]).
    """
    prompts, resp_ids = [], []
    for text, response, eos in zip(prompt_texts, responses, generated_eos, strict=True):
        p, r = retokenize(policy, text, response, eos)
        prompts.append(p)
        resp_ids.append(r)
    mine = world.share(range(len(prompts)))
    # process 0 has the largest share; every process runs that many passes
    passes = math.ceil(math.ceil(len(prompts) / world.size) / micro_batch)
    scored: list[tuple[list[float], float]] = []
    for k in range(passes):
        rows = mine[k * micro_batch : (k + 1) * micro_batch]
        if not rows:  # keeps a sharded model's collectives in step; the result is dropped
            response_logprobs(policy.model, prompts[:1], resp_ids[:1], policy.pad_token_id, temperature)
            continue
        logp, mask = response_logprobs(
            policy.model, [prompts[i] for i in rows], [resp_ids[i] for i in rows], policy.pad_token_id, temperature
        )
        means = mean_token_logprob(logp, mask).cpu().tolist()
        logps = [row[: int(m.sum())].cpu().tolist() for row, m in zip(logp, mask, strict=True)]
        scored.extend(zip(logps, means, strict=True))
    ordered = world.gather_shares(scored, len(prompts))
    mean = torch.tensor([m for _, m in ordered], dtype=torch.float32)
    return prompts, resp_ids, [lp for lp, _ in ordered], mean
