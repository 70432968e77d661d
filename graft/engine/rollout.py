"""Rollouts: n sampled responses per prompt with their per-token generation log-probs.

``RolloutBackend`` is the interface; ``HFRollout`` fills it with Hugging Face ``generate`` and a KV cache for
the CPU default and the tests. A vLLM backend returns the same ``Sample`` structure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from graft.engine.distributed import World
from graft.engine.policy import Policy, model_device
from graft.engine.weight_sync import WeightStream
from graft.seeding import derive


@dataclass
class Sample:
    """One generated response."""

    token_ids: list[int]
    """Generated tokens, the stop token included when one was generated (``Policy.stop_token_ids``: EOS, or a
    chat turn's end), nothing after it."""
    logprobs: list[float]
    """log pi_old(o_t | q, o_<t) of each generated token, from raw logits / temperature."""
    text: str
    """The response string (special tokens removed): what a peer receives and re-tokenizes."""
    truncated: bool
    """True when the length limit was hit before a stop token."""


class RolloutBackend(Protocol):
    per_prompt_seeds: bool
    """True when each prompt is sampled with its own seed, derived from ``seed`` and the prompt's position (vLLM):
    a prompt's samples then do not depend on which other prompts share the call, so the caller may pass one seed
    to every process. False when one random stream runs through the whole call (Hugging Face ``generate``)."""

    def generate(
        self, prompts: list[list[int]], n: int, seed: int, positions: list[int] | None = None
    ) -> list[list[Sample]]:
        """n samples for each prompt (token ids), as [len(prompts)][n]. ``positions``: each prompt's position in
        the whole batch that was split over processes (default: 0, 1, ...), for per-prompt seeds."""
        ...

    def sync_from(self, weights: WeightStream, world: World) -> None:
        """The trained model's full parameters, after each optimizer step, when the backend samples from its
        own copy of the model (vLLM; the Hugging Face backend beside a sharded model). Collective: every process
        calls it."""
        ...

    def close(self) -> None:
        """Stop whatever runs beside the training process for it (vLLM's engine core); called once no rollout is
        left."""
        ...


class HFRollout:
    """Sampling with ``model.generate``: top_k=0 and top_p passed explicitly (transformers 5 otherwise samples
    from the top 50), prompts left-padded, generation stopped at any of the policy's stop tokens (its ``eos_token_id``)
    and everything after the first one masked."""

    def __init__(
        self,
        policy: Policy,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        batch_size: int = 256,
        per_prompt_seeds: bool = False,
    ):
        self.per_prompt_seeds = per_prompt_seeds
        """Each prompt generated alone from its own seed (``train.rollout_seeds: prompt``)."""
        self.policy = policy
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.batch_size = batch_size

    @torch.no_grad()
    def sync_from(self, weights: WeightStream, world: World) -> None:
        self.policy.model.load_state_dict(dict(weights.tensors()))

    def close(self) -> None:
        """Nothing to stop: ``generate`` runs in the training process."""

    @torch.no_grad()
    def generate(
        self, prompts: list[list[int]], n: int, seed: int, positions: list[int] | None = None
    ) -> list[list[Sample]]:
        if self.per_prompt_seeds:  # alone, so that neither a neighbour's padding nor its draws change its samples
            out = []
            for prompt, position in zip(
                prompts, positions if positions is not None else range(len(prompts)), strict=True
            ):
                torch.manual_seed(derive(seed, "hf_prompt", position))
                out.extend(self._generate_chunk([prompt], n))
            return out
        # generate draws from the global torch RNG: seed it per call so a step's samples depend only on the seed.
        torch.manual_seed(seed)
        per_call = max(1, self.batch_size // n)
        out: list[list[Sample]] = []
        for start in range(0, len(prompts), per_call):
            out.extend(self._generate_chunk(prompts[start : start + per_call], n))
        return out

    def _generate_chunk(self, prompts: list[list[int]], n: int) -> list[list[Sample]]:
        pol = self.policy
        pad, stops = pol.pad_token_id, pol.stop_token_ids
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), pad, dtype=torch.long)
        attn = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = torch.tensor(p)
            attn[i, width - len(p) :] = 1
        model = pol.model
        was_training = model.training
        model.eval()
        device = model_device(model)
        result = model.generate(
            input_ids=ids.to(device),
            attention_mask=attn.to(device),
            do_sample=True,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=0,
            max_new_tokens=self.max_new_tokens,
            num_return_sequences=n,
            pad_token_id=pad,
            eos_token_id=stops,
            return_dict_in_generate=True,
            output_logits=True,
        )
        model.train(was_training)
        generated = result.sequences[:, width:]
        logits = torch.stack(result.logits, dim=1).float() / self.temperature
        logp = torch.log_softmax(logits, dim=-1).gather(-1, generated.unsqueeze(-1)).squeeze(-1).cpu()
        generated = generated.cpu()
        samples: list[list[Sample]] = []
        for row in range(generated.shape[0]):
            tokens = generated[row].tolist()
            stop = next((i for i, t in enumerate(tokens) if t in stops), None)
            truncated = stop is None
            end = len(tokens) if truncated else stop + 1
            kept = tokens[:end]
            if row % n == 0:
                samples.append([])
            samples[-1].append(
                Sample(
                    token_ids=kept,
                    logprobs=logp[row, :end].tolist(),
                    text=pol.tokenizer.decode(kept, skip_special_tokens=True),
                    truncated=truncated,
                )
            )
        return samples
