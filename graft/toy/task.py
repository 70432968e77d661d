"""Synthetic integer arithmetic with worked solutions that end in ``\\boxed{N}``.

Each family is one toy "benchmark" (a world has five, the analogue of the paper's five): column addition,
column subtraction, one-digit-by-multi-digit multiplication, exact long division, two-digit-by-two-digit
products by distribution (the hard family, the AIME of the toy), and column addition and subtraction of three
numbers (``add3``, ``sub3``: the step facts and the one-token carry or borrow of ``add`` and ``sub``, every
carry and borrow 1). Each solution is a
column method whose steps are small lookups (``7+8 = 15``), so a peer's solution is mostly predictable text for
a receiver that knows the format, and a model trained on a family can generalise to unseen problems of it.
Families use different step skills, so that a model trained mostly on some families stays weak on the others.
"""

from __future__ import annotations

import random
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from graft.config import DEFAULT_TOY_FAMILIES, ToyFamily

FAMILIES: tuple[str, ...] = typing.get_args(ToyFamily)
"""Every family the task knows; a toy world uses some of them (``toy.families``)."""
DEFAULT_FAMILIES = DEFAULT_TOY_FAMILIES


@dataclass(frozen=True)
class ToyProblem:
    id: str
    family: str
    level: int
    problem: str
    answer: str
    solution: str

    @property
    def operands(self) -> tuple[int, ...]:
        """The numbers of the problem, read back from its id (``make_problem`` writes them there)."""
        return tuple(int(x) for x in self.id.split("-")[1:])

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


def _never() -> bool:
    return False


def _number(columns: list[int]) -> int:
    """The integer whose columns (least significant first) hold these values; the last may exceed 9."""
    return sum(v * 10**i for i, v in enumerate(columns))


def solve_add(*terms: int, slip: Callable[[], bool] = _never) -> str:
    """Column addition of two or more numbers; ``slip()`` is asked at every incoming carry and, when True, the
    carry is forgotten."""
    digits = [_digits(t) for t in terms]
    steps, columns, carry = [], [], 0
    width = max(len(d) for d in digits)
    for i in range(width):
        if carry and slip():
            carry = 0
        here = [d[i] for d in digits if i < len(d)]
        column = here + ([carry] if carry else [])
        total = sum(column)
        steps.append("+".join(map(str, column)) + f" = {total}")
        columns.append(total if i == width - 1 else total % 10)
        carry = total // 10
    return "+".join(map(str, terms)) + ": " + ", ".join(steps) + f", so \\boxed{{{_number(columns)}}}"


def _tens_borrowed(need: int, top: int) -> int:
    """How many tens a column whose top digit is ``top`` borrows to take away ``need`` (0 when it need not)."""
    return max(0, -(-(need - top) // 10))


def solve_sub(a: int, *subtrahends: int, slip: Callable[[], bool] = _never) -> str:
    """Column subtraction of one or more numbers; a column short by up to ``k`` tens borrows ``k`` (written as
    the prefix ``k`` of its top digit). ``slip()`` is asked at every pending borrow and, when True, the borrow is
    forgotten."""
    da, below = _digits(a), [_digits(b) for b in subtrahends]
    steps, columns, borrow = [], [], 0
    for i, top in enumerate(da):
        if borrow and slip():
            borrow = 0
        bottoms = [d[i] if i < len(d) else 0 for d in below]
        if all(i >= len(d) for d in below) and borrow == 0:
            columns += da[i:]  # the remaining digits are copied down
            break
        need = sum(bottoms) + borrow
        terms = f"{top}" + (f"-{borrow}" if borrow else "") + "".join(f"-{b}" for b in bottoms)
        tens = _tens_borrowed(need, top)
        value = top + 10 * tens - need
        steps.append((f"{tens}" if tens else "") + f"{terms} = {value}")
        columns.append(value)
        borrow = tens
    return "-".join(map(str, (a, *subtrahends))) + ": " + ", ".join(steps) + f", so \\boxed{{{_number(columns)}}}"


def solve_mul(a: int, b: int, slip: Callable[[], bool] = _never) -> str:
    """One digit times many; ``slip()`` is asked at every carry and, when True, the carry is forgotten."""
    steps, columns, carry = [], [], 0
    digits = _digits(b)
    for i, d in enumerate(digits):
        if carry and slip():
            carry = 0
        product = a * d
        value = product + carry
        step = f"{a}*{d} = {product}" + (f", {product}+{carry} = {value}" if carry else "")
        columns.append(value if i == len(digits) - 1 else value % 10)
        carry = value // 10
        steps.append(step)
    return f"{a}*{b}: " + ", ".join(steps) + f", so \\boxed{{{_number(columns)}}}"


def solve_div(a: int, b: int, slip: Callable[[], bool] = _never) -> str:
    """Long division; ``slip()`` is asked at every non-zero remainder and, when True, it is not carried into
    the next digit."""
    steps, quotient, rest = [], [], 0
    digits = str(a)
    started = False
    for i, c in enumerate(digits):
        if started and rest and slip():
            rest = 0
        rest = rest * 10 + int(c)
        if not started and rest < b and i < len(digits) - 1:
            continue
        started = True
        q, r = divmod(rest, b)
        steps.append(f"{rest}/{b} = {q} r {r}")
        quotient.append(str(q))
        rest = r
    return f"{a}/{b}: " + ", ".join(steps) + f", so \\boxed{{{int(''.join(quotient))}}}"


def solve_mul2(a: int, b: int, slip: Callable[[], bool] = _never) -> str:
    """Two-digit products by distribution; ``slip()`` is asked once and, when True, the last partial product is
    left out of the sum."""
    ta, ua, tb, ub = (a // 10) * 10, a % 10, (b // 10) * 10, b % 10
    terms = [(ta, tb), (ta, ub), (ua, tb), (ua, ub)]
    steps = [f"{x}*{y} = {x * y}" for x, y in terms]
    summed = terms[:3] if slip() else terms
    total = "+".join(str(x * y) for x, y in summed)
    value = sum(x * y for x, y in summed)
    return f"{a}*{b}: " + ", ".join(steps) + f", {total} = {value}, so \\boxed{{{value}}}"


def _column_carries(first: int, rest: tuple[int, ...], sign: int) -> list[int]:
    """The carries (``sign`` 1: ``first + sum(rest)``) or borrows (-1: ``first - sum(rest)``) the column method
    passes on, one per column but the last (whose overflow is written out, not carried). Integer arithmetic
    only: the toy data enumerates millions of operand tuples through it."""
    width = len(str(max(first, *rest)))
    carries, carry, place = [], 0, 1
    for _ in range(width - 1):
        here = first // place % 10
        column = sum(x // place % 10 for x in rest)
        carry = (here + column + carry) // 10 if sign > 0 else _tens_borrowed(column + carry, here)
        carries.append(carry)
        place *= 10
    return carries


def _largest_carry(first: int, rest: tuple[int, ...], sign: int) -> int:
    """The largest carry or borrow of the column method (see ``_column_carries``)."""
    return max(_column_carries(first, rest, sign), default=0)


_COLUMN_SIGN = {"add": 1, "add3": 1, "sub": -1, "sub3": -1}


def slip_points(family: str, operands: tuple[int, ...]) -> int:
    """How many steps of the solution could slip (carries, borrows, carried remainders, the partial sum)."""
    if family in _COLUMN_SIGN:  # a slip point is a carry or borrow passed on: counted without writing the text
        return sum(1 for carry in _column_carries(operands[0], operands[1:], _COLUMN_SIGN[family]) if carry)
    return solver_slip_points(family, operands)


def solver_slip_points(family: str, operands: tuple[int, ...]) -> int:
    """The slip points of a family's solver, counted by running it: every time it asks whether to slip."""
    count = 0

    def counting() -> bool:
        nonlocal count
        count += 1
        return False

    _SOLVERS[family](*operands, slip=counting)
    return count


def _space(family: str, level: int, min_slip_points: int = 1) -> Iterator[tuple[int, ...]]:
    """Every operand tuple of a family at a difficulty level that has at least ``min_slip_points`` slip points:
    every problem exercises its family's step skill (a carry, a borrow, a carried remainder), so a model that
    slips gets it wrong; with two or more, a model that slips at each point with probability p solves it with
    probability at most (1 - p)^2."""
    return (ops for ops in _operands(family, level) if slip_points(family, ops) >= min_slip_points)


def _operands(family: str, level: int) -> Iterator[tuple[int, ...]]:
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
    # Three terms: level 1 two-digit numbers, level 2 a three-digit first term; the smaller terms in decreasing
    # order and at most 39 at level 2, so that a space is a few hundred thousand problems, not millions. Every
    # carry and borrow is 1, as in add and sub: the unslipped step differs from the slipped one by one "+1" or
    # "-1", never by a carry of 2 that the two-term families do not have.
    if family == "add3":
        if level == 1:
            ops = ((a, b, c) for a in range(10, 100) for b in range(10, a + 1) for c in range(10, b + 1))
        else:
            ops = ((a, b, c) for a in range(100, 1000) for b in range(10, 40) for c in range(10, b + 1))
        return (t for t in ops if _largest_carry(t[0], t[1:], sign=1) <= 1)
    if family == "sub3":
        if level == 1:
            ops = ((a, b, c) for a in range(30, 100) for b in range(10, 50) for c in range(10, b + 1) if b + c <= a)
        else:
            ops = ((a, b, c) for a in range(100, 1000) for b in range(10, 40) for c in range(10, b + 1))
        return (t for t in ops if _largest_carry(t[0], t[1:], sign=-1) <= 1)
    raise ValueError(f"unknown family {family!r}; families: {', '.join(FAMILIES)}")


_SOLVERS: dict[str, Callable[..., str]] = {
    "add": solve_add,
    "sub": solve_sub,
    "mul": solve_mul,
    "div": solve_div,
    "mul2": solve_mul2,
    "add3": solve_add,
    "sub3": solve_sub,
}
_TEXT = {
    "add": "What is {0} + {1}?",
    "sub": "What is {0} - {1}?",
    "mul": "What is {0} * {1}?",
    "div": "What is {0} / {1}?",
    "mul2": "What is {0} * {1}?",
    "add3": "What is {0} + {1} + {2}?",
    "sub3": "What is {0} - {1} - {2}?",
}
_ANSWER: dict[str, Callable[..., int]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a // b,
    "mul2": lambda a, b: a * b,
    "add3": lambda a, b, c: a + b + c,
    "sub3": lambda a, b, c: a - b - c,
}


def slipped_solution(problem: ToyProblem, rate: float, rng: random.Random) -> str:
    """The problem's worked solution with each slip point (a carry, a borrow, a remainder, a partial product)
    slipped with probability ``rate``: the procedure as a model that has half-learned it writes it, ending in the
    answer that procedure gives. ``rate`` 0 is the correct solution."""
    return _SOLVERS[problem.family](*problem.operands, slip=lambda: rng.random() < rate)


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
        raise ValueError(
            f"family {family!r} has {len(pools[0])} level-1 problems left with enough slip points, {easy} needed: "
            "raise toy.level2_share or lower toy.min_slip_points"
        )
    chosen = pools[0][:easy] + pools[1][:hard]
    pools[0], pools[1] = pools[0][easy:], pools[1][hard:]
    return [make_problem(family, level, ops) for level, ops in chosen]


def make_splits(
    seed: int,
    test_per_family: int,
    validation_per_family: int,
    level2_share: float = 0.0,
    families: tuple[str, ...] = DEFAULT_FAMILIES,
    min_slip_points: int = 1,
) -> Splits:
    """Disjoint per-family splits of ``families``. Each family's level-1 and level-2 spaces (problems with at
    least ``min_slip_points`` slip points) are shuffled with the seed; test and validation take
    ``level2_share`` of their problems from level 2 (more digits) and the rest from level 1; train keeps the
    remaining problems, with level 2 in the same proportion (only level 2 at a share of 1). No problem is in two
    splits."""
    if not 0.0 <= level2_share <= 1.0:
        raise ValueError(f"level2_share must be in [0, 1], got {level2_share}")
    rng = random.Random(seed)
    train, validation, test = [], [], {}
    for family in families:
        pools = []
        for level in (1, 2):
            used = level == 2 or level2_share < 1  # at a share of 1 level 1 is not even enumerated
            space = [(level, ops) for ops in _space(family, level, min_slip_points)] if used else []
            rng.shuffle(space)
            pools.append(space)
        test[family] = _take(pools, test_per_family, level2_share, family)
        validation.extend(_take(pools, validation_per_family, level2_share, family))
        rest_hard = len(pools[1]) if level2_share == 1 else round(len(pools[0]) * level2_share / (1 - level2_share))
        train.extend(make_problem(family, level, ops) for level, ops in pools[0] + pools[1][:rest_hard])
    return Splits(train=train, validation=validation, test=test)
