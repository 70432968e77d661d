"""How a toy model writes its worked solutions: cross-model mismatch as a property of the models (issue 28).

Real model families solve the same problem in different words: notation, separators, the phrases around the
arithmetic. A peer's correct solution is then partly foreign to the receiver, which is what GRAFT's compatibility
gate and token clipping are for. Every toy solution has the shape ``EXPR: step, step, ..., so \\boxed{N}``
(graft.toy.task); a *dialect* rewrites its surface (never its numbers or its answer) feature by feature, and a
model warmed up on its dialect samples in it.

``toy.mismatch`` (0 to 1) is the chance that each feature of each warm-up solution is written in the model's own
dialect rather than in the common one (dialect 0, graft.toy.task's text): at 0 every model writes the common text
(the world without mismatch), at 1 each writes only its own, and in between a peer's response is plausible to the
receiver in varying degree.
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

_OPERATOR = re.compile(r"(?<=\d)([+\-*/])(?=\d)")
_END = ", so \\boxed{"


def rewrite(solution: str, dialect: int, mismatch: float, rng: random.Random) -> str:
    """``solution`` (common text) with each feature in ``dialect``'s variant with probability ``mismatch``, else
    common; draws nothing from ``rng`` when ``mismatch`` is 0 or ``dialect`` is 0, so such worlds are unchanged."""
    if mismatch == 0 or dialect == 0:
        return solution
    expr, rest = solution.split(": ", 1)
    end = rest.rindex(_END)
    body, answer = rest[:end], rest[end + len(_END) : -1]
    pick = {name: variants[dialect] if rng.random() < mismatch else variants[0] for name, variants in FEATURES.items()}

    def operators(text: str) -> str:
        space = pick["operator_space"]
        return _OPERATOR.sub(lambda m: f"{space}{m.group(1)}{space}", text) if space else text

    steps = [operators(step).replace(" = ", pick["equals"]) for step in body.split(", ")]
    return (
        pick["header"].format(expr=operators(expr))
        + pick["separator"].join(steps)
        + pick["conclusion"].format(n=answer)
    )
