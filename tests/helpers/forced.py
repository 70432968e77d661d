"""The forced world: tiny models built on the fly (no downloads are possible), a character-level Qwen3-style
model and a byte-level-BPE GPT-2-style model, warmed up on a forced problem set so that the exchange cases
occur."""

from __future__ import annotations

import json
from pathlib import Path

from graft.engine.policy import Policy
from graft.engine.prompts import PromptFormat
from graft.toy.models import ToyArch, build_model, build_tokenizer, save
from graft.toy.warmup import warm_up

TEMPLATE = "{problem} =\n"

# problem -> (answer, A's warm-up answers, B's warm-up answers): P1 A mixed / B fails, P2 the reverse,
# P3 both always right, P4 both always wrong.
FORCED = {
    "P1": ("What is 2+3?", "5", ["5", "6"], ["7"]),
    "P2": ("What is 4+4?", "8", ["9"], ["8", "3"]),
    "P3": ("What is 1+1?", "2", ["2"], ["2"]),
    "P4": ("What is 6+1?", "7", ["4"], ["4"]),
}


def solution(answer: str) -> str:
    return f"so \\boxed{{{answer}}}"


def _examples(which: int) -> list[tuple[str, str]]:
    out = []
    for problem, _, a_answers, b_answers in FORCED.values():
        answers = a_answers if which == 0 else b_answers
        out += [(problem, solution(ans)) for ans in answers]
    return out


def build_forced_model(
    directory: Path, arch: str, pre: str, vocab: int, which: int, hidden: int = 32, max_positions: int = 64
) -> Path:
    """``hidden`` 64 gives vLLM's CPU attention a head size it has kernels for (32; not 16)."""
    texts = [TEMPLATE.replace("{problem}", p) + s for p, s in _examples(0) + _examples(1)]
    tok = build_tokenizer(texts * 4, pre, vocab)
    arch_spec = ToyArch(arch, pre, vocab, hidden=hidden, layers=2, heads=2)
    model = build_model(arch_spec, tok, max_positions=max_positions, seed=which)
    policy = Policy("m", model, tok, PromptFormat(TEMPLATE))
    warm_up(policy, _examples(which), steps=120, batch_size=16, lr=1e-2, seed=which)
    return save(model, tok, directory)


def write_forced_problems(path: Path) -> Path:
    """The forced problems as a JSON Lines prompt file (``id``, ``problem``, ``answer``)."""
    rows = ({"id": k, "problem": v[0], "answer": v[1]} for k, v in FORCED.items())
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def forced_config(root: Path, a: Path, b: Path, data: Path, **sections) -> dict:
    """The forced world's config: models A and B as pair P, 3 steps of 4 prompts, the toy grader; ``sections``
    are added as top-level sections (``scale``, ``eval``)."""
    return {
        "results": str(root / "results"),
        "models": {"A": {"path": str(a), "template": TEMPLATE}, "B": {"path": str(b), "template": TEMPLATE}},
        "data": {"train": str(data)},
        "train": {
            "steps": 3,
            "prompts_per_step": 4,
            "minibatches": 2,
            "lr": 1e-4,
            # prompt plus response within the models' 64 positions
            "max_prompt_tokens": 48,
            "max_response_tokens": 16,
            "checkpoint_every": 2,
            # the tests continue finished runs (--steps more, --resume) and stage killed ones from finished runs
            "keep_resume_state": True,
        },
        "reward": {"kind": "toy"},
        "pairs": {"P": ["A", "B"]},
        **sections,
    }
