"""How a toy model writes its worked solutions: cross-model mismatch as a property of the models.

Real model families solve the same problem in different words: notation, separators, the phrases around the
arithmetic. A peer's correct solution is then partly foreign to the receiver, which is what GRAFT's compatibility
gate and token clipping are for. Every toy solution has the shape ``EXPR: step, step, ..., so \\boxed{N}``
(graft.toy.task); a *dialect* rewrites its surface (never its numbers or its answer) feature by feature, and a
model warmed up on its dialect samples in it.

``toy.mismatch`` (0 to 1) is the chance that each feature of each warm-up solution leaves the common writing
(dialect 0, graft.toy.task's text); when it does, it is the model's own dialect's variant, except for a share
``EXPOSURE`` of another dialect's, as a real model has read a little of other families' writing. At 0 every model
writes the common text (the world without mismatch); at 1 each writes its own dialect, and a peer's variant costs the
receiver about log(EXPOSURE / (1 - EXPOSURE)) nats where they part, so a peer's response is plausible in the degree
that its features happen to be common, which the knob sets (bench/results/mismatch_probe.md).
"""

from __future__ import annotations

import random
import re

FEATURES: dict[str, tuple[str, ...]] = {
    "header": ("{expr}: ", "{expr} by columns: ", "We work out {expr}. "),
    "operator_space": ("", " ", ""),
    "equals": (" = ", " is ", " -> "),
    "separator": (", ", "; ", " and "),
    "conclusion": (", so \\boxed{{{n}}}", ". The answer is \\boxed{{{n}}}", ", giving \\boxed{{{n}}}"),
}
"""Each feature's variants; index 0 is the common writing, index d a model of ``dialect: d``. ``operator_space``
goes around ``+ - * /`` between digits (dialect 2 keeps the common spacing, so dialects 1 and 2 differ from the
common text in different ways)."""
DIALECTS = len(FEATURES["header"])
EXPOSURE = 0.05
"""The share of a model's non-common features written in another dialect. Without it a peer's variant is one the
receiver never read, and the gate score of every response with one foreign feature falls below 0.01 (measured when
the knob was first probed): the knob then switches the exchange off rather than graduating it."""

_OPERATOR = re.compile(r"(?<=\d)([+\-*/])(?=\d)")
_END = ", so \\boxed{"


def draw(dialect: int, mismatch: float, rng: random.Random, exposure: float = EXPOSURE) -> dict[str, int]:
    """Which variant each feature of one solution takes: with probability ``mismatch`` the model's ``dialect`` (or,
    a share ``exposure`` of those times, another dialect), else the common writing (0). Draws nothing from ``rng``
    when ``mismatch`` is 0 or ``dialect`` is 0, so such worlds are unchanged."""
    if mismatch == 0 or dialect == 0:
        return dict.fromkeys(FEATURES, 0)
    others = [d for d in range(1, DIALECTS) if d != dialect]

    def own_or_other() -> int:
        return rng.choice(others) if rng.random() < exposure else dialect

    return {name: 0 if rng.random() >= mismatch else own_or_other() for name in FEATURES}


def write(solution: str, picks: dict[str, int]) -> str:
    """``solution`` (common text) with each feature in the variant ``picks`` names (its numbers and answer kept)."""
    if not any(picks.values()):
        return solution
    expr, rest = solution.split(": ", 1)
    end = rest.rindex(_END)
    body, answer = rest[:end], rest[end + len(_END) : -1]
    pick = {name: FEATURES[name][index] for name, index in picks.items()}

    def operators(text: str) -> str:
        space = pick["operator_space"]
        return _OPERATOR.sub(lambda m: f"{space}{m.group(1)}{space}", text) if space else text

    steps = [operators(step).replace(" = ", pick["equals"]) for step in body.split(", ")]
    return (
        pick["header"].format(expr=operators(expr))
        + pick["separator"].join(steps)
        + pick["conclusion"].format(n=answer)
    )


def rewrite(solution: str, dialect: int, mismatch: float, rng: random.Random, exposure: float = EXPOSURE) -> str:
    """``solution`` (common text) written as a model of ``dialect`` writes it in a world of ``mismatch``
    (``draw`` then ``write``)."""
    return write(solution, draw(dialect, mismatch, rng, exposure))
