"""Synthetic integer arithmetic with worked solutions that end in ``\\boxed{N}``.

Five families, one per toy "benchmark" (the analogue of the paper's five): column addition, column
subtraction, one-digit-by-multi-digit multiplication, exact long division, and two-digit-by-two-digit products
by distribution (the hard family, the AIME of the toy). Each solution is a
column method whose steps are small lookups (``7+8 = 15``), so a peer's solution is mostly predictable text for
a receiver that knows the format, and a model trained on a family can generalise to unseen problems of it.
Families use different step skills, so that a model trained mostly on some families stays weak on the others.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

FAMILIES: tuple[str, ...] = ("add", "sub", "mul", "div", "mul2")


@dataclass(frozen=True)
class ToyProblem:
    id: str
    family: str
    level: int
    problem: str
    answer: str
    solution: str

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "family": self.family,
            "level": self.level,
            "problem": self.problem,
            "answer": self.answer,
            "solution": self.solution,
        }


def _digits(x: int) -> list[int]:
    """Least significant digit first."""
    return [int(c) for c in reversed(str(x))]


def solve_add(a: int, b: int) -> str:
    da, db = _digits(a), _digits(b)
    steps, carry = [], 0
    for i in range(max(len(da), len(db))):
        terms = [d[i] for d in (da, db) if i < len(d)] + ([carry] if carry else [])
        total = sum(terms)
        steps.append("+".join(map(str, terms)) + f" = {total}")
        carry = total // 10
    return f"{a}+{b}: " + ", ".join(steps) + f", so \\boxed{{{a + b}}}"


def solve_sub(a: int, b: int) -> str:
    da, db = _digits(a), _digits(b)
    steps, borrow = [], 0
    for i, top in enumerate(da):
        bottom = db[i] if i < len(db) else 0
        if i >= len(db) and borrow == 0:
            break  # the remaining digits are copied down
        need = bottom + borrow
        terms = f"{top}" + (f"-{borrow}" if borrow else "") + f"-{bottom}"
        if top < need:
            steps.append(f"1{terms} = {top + 10 - need}")
            borrow = 1
        else:
            steps.append(f"{terms} = {top - need}")
            borrow = 0
    return f"{a}-{b}: " + ", ".join(steps) + f", so \\boxed{{{a - b}}}"


def solve_mul(a: int, b: int) -> str:
    steps, carry = [], 0
    for d in _digits(b):
        product = a * d
        value = product + carry
        step = f"{a}*{d} = {product}" + (f", {product}+{carry} = {value}" if carry else "")
        carry = value // 10
        steps.append(step)
    return f"{a}*{b}: " + ", ".join(steps) + f", so \\boxed{{{a * b}}}"


def solve_div(a: int, b: int) -> str:
    steps, rest = [], 0
    digits = str(a)
    started = False
    for i, c in enumerate(digits):
        rest = rest * 10 + int(c)
        if not started and rest < b and i < len(digits) - 1:
            continue
        started = True
        q, r = divmod(rest, b)
        steps.append(f"{rest}/{b} = {q} r {r}")
        rest = r
    return f"{a}/{b}: " + ", ".join(steps) + f", so \\boxed{{{a // b}}}"


def solve_mul2(a: int, b: int) -> str:
    ta, ua, tb, ub = (a // 10) * 10, a % 10, (b // 10) * 10, b % 10
    terms = [(ta, tb), (ta, ub), (ua, tb), (ua, ub)]
    steps = [f"{x}*{y} = {x * y}" for x, y in terms]
    total = "+".join(str(x * y) for x, y in terms)
    return f"{a}*{b}: " + ", ".join(steps) + f", {total} = {a * b}, so \\boxed{{{a * b}}}"


def _space(family: str, level: int) -> Iterator[tuple[int, ...]]:
    """Every operand tuple of a family at a difficulty level."""
    if family == "add":
        lo, hi = (10, 99) if level == 1 else (100, 999)
        return ((a, b) for a in range(lo, hi + 1) for b in range(10, 100))
    if family == "sub":
        lo, hi = (20, 99) if level == 1 else (100, 999)
        return ((a, b) for a in range(lo, hi + 1) for b in range(10, min(a, 100)))
    if family == "mul":
        lo, hi = (10, 99) if level == 1 else (100, 999)
        return ((a, b) for a in range(2, 10) for b in range(lo, hi + 1) if b % 10)
    if family == "div":
        lo, hi = (10, 99) if level == 1 else (100, 999)
        return ((d * q, d) for d in range(2, 10) for q in range(lo, hi + 1))
    if family == "mul2":
        lo, hi = (11, 49) if level == 1 else (50, 99)
        return ((a, b) for a in range(lo, hi + 1) for b in range(11, 100) if a % 10 and b % 10)
    raise ValueError(f"unknown family {family!r}; families: {', '.join(FAMILIES)}")


_SOLVERS: dict[str, Callable[..., str]] = {
    "add": solve_add,
    "sub": solve_sub,
    "mul": solve_mul,
    "div": solve_div,
    "mul2": solve_mul2,
}
_TEXT = {
    "add": "What is {0} + {1}?",
    "sub": "What is {0} - {1}?",
    "mul": "What is {0} * {1}?",
    "div": "What is {0} / {1}?",
    "mul2": "What is {0} * {1}?",
}
_ANSWER: dict[str, Callable[..., int]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a // b,
    "mul2": lambda a, b: a * b,
}


def make_problem(family: str, level: int, operands: tuple[int, ...]) -> ToyProblem:
    return ToyProblem(
        id=f"{family}{level}-" + "-".join(map(str, operands)),
        family=family,
        level=level,
        problem=_TEXT[family].format(*operands),
        answer=str(_ANSWER[family](*operands)),
        solution=_SOLVERS[family](*operands),
    )


@dataclass(frozen=True)
class Splits:
    train: list[ToyProblem]
    """Everything not held out: warm-up examples and RL prompts are drawn from it."""
    validation: list[ToyProblem]
    test: dict[str, list[ToyProblem]]
    """One benchmark per family."""


def _take(pools: list[list[tuple[int, tuple[int, ...]]]], count: int, level2_share: float, family: str) -> list:
    """Pop ``count`` problems off the shuffled level pools, ``level2_share`` of them from level 2."""
    hard = min(round(count * level2_share), len(pools[1]))
    easy = count - hard
    if easy > len(pools[0]):
        raise ValueError(f"family {family!r} has too few level-1 problems for {count} held out")
    chosen = pools[0][:easy] + pools[1][:hard]
    pools[0], pools[1] = pools[0][easy:], pools[1][hard:]
    return [make_problem(family, level, ops) for level, ops in chosen]


def make_splits(seed: int, test_per_family: int, validation_per_family: int, level2_share: float = 0.0) -> Splits:
    """Disjoint per-family splits. Each family's level-1 and level-2 spaces are shuffled with the seed; test and
    validation take ``level2_share`` of their problems from level 2 (more digits) and the rest from level 1;
    train keeps the remaining problems, with level 2 in the same proportion. No problem is in two splits."""
    if not 0.0 <= level2_share < 1.0:
        raise ValueError(f"level2_share must be in [0, 1), got {level2_share}")
    rng = random.Random(seed)
    train, validation, test = [], [], {}
    for family in FAMILIES:
        pools = []
        for level in (1, 2):
            space = [(level, ops) for ops in _space(family, level)]
            rng.shuffle(space)
            pools.append(space)
        test[family] = _take(pools, test_per_family, level2_share, family)
        validation.extend(_take(pools, validation_per_family, level2_share, family))
        rest_hard = round(len(pools[0]) * level2_share / (1.0 - level2_share))
        train.extend(make_problem(family, level, ops) for level, ops in pools[0] + pools[1][:rest_hard])
    return Splits(train=train, validation=validation, test=test)
