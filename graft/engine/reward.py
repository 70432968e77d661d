"""Verifiable rewards: exact integers for the toy task, math-verify for real math (docs/design.md sections 3, 9).

Both graders look only at the *last* ``\\boxed{...}`` of a response. math-verify's own timeouts use signal
alarms, which work only on a process's main thread, so batched math grading runs in worker processes (whose
tasks run on their main thread) under a hard deadline; a timeout or a parse failure scores 0, is counted,
and never raises out of a training step.
"""

from __future__ import annotations

import functools
import logging
import math
import multiprocessing
import re
import signal
import time
from dataclasses import dataclass
from typing import Literal

BOXED = "\\boxed"


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` in text, braces balanced; None if there is none or it is unclosed."""
    start = text.rfind(BOXED + "{")
    if start < 0:
        return None
    end = _closing_brace(text[start:], BOXED + "{")
    return text[start + len(BOXED) + 1 : start + end] if end >= 0 else None


_WRAPPERS = ("\\textbf{", "\\mathbf{", "\\text{", "\\mathrm{")
_SINGLE_NUMBER_IN_PARENS = re.compile(r"^\(\s*[-+]?\d+(?:\.\d+)?\s*\)$")


def clean_answer(answer: str) -> str:
    """Undo answer decorations that change no value, before math-verify sees the boxed text.

    Trailing sentence punctuation (``104.``), a wrapper around the whole answer (``\\textbf{...}``), and an
    answer-choice style single number in parentheses (``(073)``). A tuple or interval keeps its parentheses.
    """
    text = answer.strip()
    changed = True
    while changed:
        changed = False
        stripped = text.rstrip(".,;").rstrip()
        if stripped != text and stripped:
            text, changed = stripped, True
        for wrapper in _WRAPPERS:
            if text.startswith(wrapper) and text.endswith("}") and _closing_brace(text, wrapper) == len(text) - 1:
                text, changed = text[len(wrapper) : -1].strip(), True
        if _SINGLE_NUMBER_IN_PARENS.match(text):
            text, changed = text[1:-1].strip(), True
    return text


MAX_ANSWER_CHARS = 1000
"""Longer boxed answers score 0 without parsing (the longest reference answer in the benchmarks has 58)."""
MAX_BRACE_DEPTH = 32
"""Deeper nesting scores 0 without parsing (references nest at most 2 deep)."""
_TOWER = re.compile(r"\d\s*\^\s*\{?\s*\(?\s*\d+\s*\)?\s*\^\s*\{?\s*\(?\s*\d")


def too_costly(answer: str) -> str | None:
    """Why an answer is refused before math-verify sees it, or None. Each of these inputs can hold a parser or
    sympy in C code that no alarm interrupts (a 100 kB string, thousands of nested braces, a numeric power
    tower such as 9^{9^{9}}), so that a flood of them would cost the grader's full deadline per item."""
    if len(answer) > MAX_ANSWER_CHARS:
        return "long"
    depth = deepest = 0
    for char in answer:
        if char == "{":
            depth += 1
            deepest = max(deepest, depth)
        elif char == "}":
            depth -= 1
    if deepest > MAX_BRACE_DEPTH:
        return "nested"
    if _TOWER.search(answer):
        return "tower"
    return None


def _closing_brace(text: str, opener: str) -> int:
    """Index of the brace that closes ``opener``'s brace at the start of text, or -1."""
    depth = 0
    for j in range(len(opener) - 1, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return -1


def toy_reward(response: str, gold: str) -> float:
    """1.0 when the last boxed answer is exactly the gold integer, else 0.0.

    Exact integer comparison on purpose: math-verify would also reward a boxed "17+25" for gold 42, and the toy
    task asks the model to compute. Integers too long for Python's int parsing score 0.
    """
    answer = last_boxed(response)
    if answer is None:
        return 0.0
    answer = answer.strip()
    body = answer[1:] if answer.startswith("-") else answer
    if not body.isascii() or not body.isdigit():
        return 0.0
    try:
        return 1.0 if int(answer) == int(gold) else 0.0
    except ValueError:  # more digits than int() accepts
        return 0.0


def math_reward(response: str, gold: str, timeout: int = 5) -> float:
    """math-verify of the response's last boxed answer against the gold answer (gold first), 1.0 or 0.0.

    Call it on a main thread (math-verify's alarms), e.g. inside ``Grader``'s worker processes.
    """
    from math_verify import parse, verify

    answer = last_boxed(response)
    if answer is None or too_costly(answer):
        return 0.0
    answer = clean_answer(answer)
    try:
        gold_parsed = parse(f"{BOXED}{{{gold}}}", parsing_timeout=timeout)
        answer_parsed = parse(f"{BOXED}{{{answer}}}", parsing_timeout=timeout)
        if not gold_parsed or not answer_parsed:
            return 0.0
        return 1.0 if verify(gold_parsed, answer_parsed, timeout_seconds=timeout) else 0.0
    except Exception:  # math-verify raises on timeouts and on malformed input; both score 0
        return 0.0


GOLD_PARSE_SECONDS = 5
"""math-verify's parsing timeout for a gold answer read at load (a reference answer parses in milliseconds)."""


@functools.cache  # an evaluation job reads the same benchmarks for every checkpoint (5-15 ms an answer)
def gold_problem(gold: str, kind: Literal["toy", "math"]) -> str | None:
    """Why the grader of ``kind`` could never reward an answer to ``gold``, or None: the toy grader compares
    integers, and ``math_reward`` scores 0 when math-verify parses nothing from the boxed gold."""
    if kind == "toy":
        try:
            int(gold)
        except ValueError:
            return "is not an integer (the toy grader compares integers)"
        return None
    from math_verify import parse

    try:
        parsed = parse(f"{BOXED}{{{gold}}}", parsing_timeout=GOLD_PARSE_SECONDS)
    except Exception:  # math-verify raises on timeouts and on malformed input, which math_reward scores 0
        parsed = None
    return None if parsed else "is not an answer math-verify parses (every response to it would score 0)"


def _math_worker(item: tuple[str, str, int]) -> float:
    return math_reward(*item)


def _quiet_worker() -> None:
    # math-verify logs the whole input on every timeout; the Grader counts them instead.
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    # Ctrl-C reaches the whole terminal's process group: the parent says what it saved, the workers say nothing
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@dataclass
class Grades:
    rewards: list[float]
    timeouts: int
    """Items that hit the hard deadline (scored 0)."""
    unparsed: int
    """Responses without a final boxed answer (scored 0)."""
    refused: int = 0
    """Math answers refused unparsed as too costly to verify (``too_costly``; scored 0)."""


class Grader:
    """Batched grading: toy in-process, math in a pool of worker processes with a hard deadline.

    The deadline for a batch is ``timeout * (ceil(items / workers) + 1)`` seconds, so each item has at least its
    own timeout even when queued; items not done by then score 0 and the pool is replaced, which kills any worker
    stuck in a runaway sympy computation.
    """

    def __init__(self, kind: Literal["toy", "math"], timeout: float = 5.0, workers: int = 2):
        self.kind = kind
        self.timeout = timeout
        self.workers = max(1, workers)
        self._pool = None

    def _get_pool(self):
        if self._pool is None:
            self._pool = multiprocessing.get_context("spawn").Pool(self.workers, initializer=_quiet_worker)
        return self._pool

    def grade(self, responses: list[str], golds: list[str]) -> Grades:
        if len(responses) != len(golds):
            raise ValueError("responses and golds must have the same length")
        answers = [last_boxed(r) for r in responses]
        unparsed = sum(a is None for a in answers)
        if self.kind == "toy":
            return Grades([toy_reward(r, g) for r, g in zip(responses, golds, strict=True)], 0, unparsed)
        costly = [a is not None and too_costly(a) is not None for a in answers]
        work = [i for i, c in enumerate(costly) if not c and answers[i] is not None]
        rewards = [0.0] * len(responses)
        if not work:
            return Grades(rewards, 0, unparsed, sum(costly))
        pool = self._get_pool()
        per_item = max(1, math.ceil(self.timeout))
        pending = [pool.apply_async(_math_worker, ((responses[i], golds[i], per_item),)) for i in work]
        deadline = self.timeout * (math.ceil(len(pending) / self.workers) + 1)
        end = time.monotonic() + deadline
        timeouts = 0
        for i, result in zip(work, pending, strict=True):
            try:
                rewards[i] = float(result.get(timeout=max(0.0, end - time.monotonic())))
            except multiprocessing.TimeoutError:
                timeouts += 1
        if timeouts:
            self.close()
        return Grades(rewards, timeouts, unparsed, sum(costly))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None

    def __enter__(self) -> Grader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
