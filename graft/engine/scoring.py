"""Cross-tokenizer scoring: a receiver re-tokenizes peer response strings and scores them with its behaviour
policy (the first term of paper Eq. 7, and the rho denominator of Eq. 9 for grafted tokens)."""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from graft.algo import mean_token_logprob
from graft.config import TrainSpec
from graft.engine.batching import plan_passes
from graft.engine.distributed import SINGLE, World
from graft.engine.policy import Policy, response_logprobs


@dataclass(frozen=True)
class ScoringSettings:
    """How a model scores responses with its training forward: transferred ones (the gate and the ratio's
    denominator), and its own when their old log-probs are recomputed. Built from the config's ``train``
    section (``from_train``), whose fields document each setting."""

    temperature: float = TrainSpec.temperature
    micro_batch: int = TrainSpec.micro_batch
    micro_batch_tokens: int | None = TrainSpec.micro_batch_tokens
    logits_chunk_mib: float = TrainSpec.logits_chunk_mib
    packing: bool = TrainSpec.packing
    max_response_tokens: int | None = None
    """The receiver's response limit: every method cuts re-tokenized peer responses to it. None: no cut."""

    @classmethod
    def from_train(cls, train: TrainSpec):
        """The settings of this class (or a subclass: graft.train.update.UpdateSettings) from the ``train``
        section, each field read from the section's field of the same name."""
        return cls(**{f.name: getattr(train, f.name) for f in fields(cls)})


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
    enc = tok(prompt_text + response, add_special_tokens=policy.add_special_tokens, return_offsets_mapping=True)
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
def score_responses(
    policy: Policy,
    prompt_ids: list[list[int]],
    response_ids: list[list[int]],
    settings: ScoringSettings,
    world: World = SINGLE,
) -> tuple[list[list[float]], torch.Tensor]:
    """Per-token log-probs of token sequences under ``policy`` (its training forward), in forward passes cut by
    ``settings.micro_batch`` rows and ``settings.micro_batch_tokens`` tokens (graft.engine.batching), packed
    without padding under ``settings.packing``.

    Under several processes each scores its share of the responses, the shares' tokens balanced, and the scores
    are gathered. The model is sharded, so every process runs the same number of forward passes: an empty pass
    is a one-row pass whose result is dropped.

    Returns:
        (per-token log-probs of each response, mean token log-likelihood [R] (Eq. 6)).
    """
    lengths = [len(p) + len(r) for p, r in zip(prompt_ids, response_ids, strict=True)]
    plan = plan_passes(lengths, world.size, settings.micro_batch, settings.micro_batch_tokens, settings.packing)
    scored: dict[int, tuple[list[float], float]] = {}
    for rows in plan[world.rank]:
        if not rows:  # keeps a sharded model's collectives in step; the result is dropped
            _logprobs(policy, prompt_ids[:1], response_ids[:1], settings)
            continue
        logp, mask = _logprobs(policy, [prompt_ids[i] for i in rows], [response_ids[i] for i in rows], settings)
        means = mean_token_logprob(logp, mask).cpu().tolist()
        logps = [row[: int(m.sum())].cpu().tolist() for row, m in zip(logp, mask, strict=True)]
        scored.update(zip(rows, zip(logps, means, strict=True), strict=True))
    for part in world.gather(scored) if world.distributed else []:
        scored.update(part)
    ordered = [scored[i] for i in range(len(prompt_ids))]
    return [lp for lp, _ in ordered], torch.tensor([m for _, m in ordered], dtype=torch.float32)


def _logprobs(policy: Policy, prompts: list[list[int]], responses: list[list[int]], settings: ScoringSettings):
    return response_logprobs(
        policy.model,
        prompts,
        responses,
        policy.pad_token_id,
        settings.temperature,
        settings.logits_chunk_mib,
        settings.packing,
    )


def score_peer_responses(
    policy: Policy,
    prompt_texts: list[str],
    responses: list[str],
    generated_eos: list[bool],
    settings: ScoringSettings,
    world: World = SINGLE,
) -> tuple[list[list[int]], list[list[int]], list[list[float]], torch.Tensor]:
    """Re-tokenize peer responses for the receiver and score them with its behaviour policy.

    Returns:
        (prompt_ids, response_ids, per-token receiver log-probs, mean token log-likelihood [R]).
    """
    prompts, resp_ids = retokenize_all(policy, prompt_texts, responses, generated_eos)
    logps, mean = score_responses(policy, prompts, resp_ids, settings, world)
    return prompts, resp_ids, logps, mean


def retokenize_all(
    policy: Policy, prompt_texts: list[str], responses: list[str], generated_eos: list[bool]
) -> tuple[list[list[int]], list[list[int]]]:
    """``retokenize`` for each (prompt, response)."""
    prompts, resp_ids = [], []
    for text, response, eos in zip(prompt_texts, responses, generated_eos, strict=True):
        p, r = retokenize(policy, text, response, eos)
        prompts.append(p)
        resp_ids.append(r)
    return prompts, resp_ids


def cut_to_limit(response_ids: list[list[int]], limit: int | None) -> tuple[list[list[int]], int]:
    """Re-tokenized responses cut to the receiver's ``limit`` tokens (``train.max_response_tokens``), and how many
    were cut. A cut response loses its EOS with its tail, as a rollout that reaches the limit has none: the
    receiver trains on at most what it could have generated itself. None: no cut."""
    if limit is None:
        return response_ids, 0
    cut = [r[:limit] for r in response_ids]
    return cut, sum(len(r) > limit for r in response_ids)
