"""Prompt sets: the files that hold them, read into one record (``Problem``), and the seeded, stateless prompt
sampler.

``data.train``, ``data.validation`` and every benchmark are files of one of three layouts, told apart record by
record, JSON Lines (``.jsonl``, ``.json``) or Parquet (``.parquet``) by the file's extension:

- graft's: ``problem`` text (or ``question``), its ``answer`` (or the last ``\\boxed{}`` of a reference
  ``solution``), an ``id`` (or ``unique_id``, ``idx``);
- TRL's: a ``prompt`` that is text or a list of chat messages (``role``, ``content``), with ``answer``,
  ``solution`` or ``ground_truth``;
- verl's: a ``prompt`` of chat messages, its answer under ``reward_model.ground_truth``, its id under
  ``extra_info.index`` (``data_source`` and the rest are not read).

A problem's text fills each model's ``template``; a chat prompt goes through each model's chat template as it is
(graft.engine.prompts). A record without an id takes its line (or row) number, counted from 1: the same file gives
the same ids, and two copies of one problem, which real sets hold, stay two problems (a hash of the content would
make them one id). An answer that ends GSM8K-style, ``... #### 72``, is the text after ``####``.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from graft import seeding
from graft.engine.prompts import Chat, Message
from graft.engine.reward import gold_problem, last_boxed
from graft.errors import ConfigError

LAYOUTS = {".jsonl": "line", ".json": "line", ".parquet": "row"}
"""The extensions a prompt set may have, each with what its records are counted in (JSON Lines or Parquet)."""
PROMPT_FIELDS = ("prompt", "problem", "question")
"""Where a record's problem is, the first one present: TRL's and verl's prompt, graft's problem, or a question."""
ANSWER_FIELDS = ("answer", "ground_truth", "reward_model.ground_truth")
"""Where a record's gold answer is, the first one with text; else the last ``\\boxed{}`` of its ``solution``."""
ID_FIELDS = ("id", "unique_id", "idx", "extra_info.index")
"""Where a record's id is, the first one present; else its line (or row) number."""


@dataclass(frozen=True)
class Problem:
    id: str
    problem: str | Chat
    """The problem's text, which fills each model's ``template``; or a chat prompt's messages, which each model's
    chat template renders as they are."""
    answer: str

    @property
    def text(self) -> str:
        """The problem as text: itself, or the user's message of a chat prompt (what finds it in a dumped prompt)."""
        return self.problem if isinstance(self.problem, str) else self.problem[-1].content


def problem_record(problem: Problem) -> dict:
    """A problem as a line of graft's JSON Lines, which ``load_problems`` reads back as it was."""
    if isinstance(problem.problem, str):
        return {"id": problem.id, "problem": problem.problem, "answer": problem.answer}
    return {"id": problem.id, "prompt": [m._asdict() for m in problem.problem], "answer": problem.answer}


def read_jsonl(path: str | Path, what: str) -> Iterator[tuple[int, dict]]:
    """(line number, object) for every non-blank line of a JSON Lines file, one line at a time, so that the first
    bad line is the one named: a missing file, a line that is not UTF-8 text, not JSON or not an object is refused
    with one line naming it. A byte-order mark is skipped, as the config's reader skips one; lines end at ``\n``
    only, as JSON Lines say (a raw U+2028, U+2029 or U+0085 inside a JSON string is text, which
    ``str.splitlines`` would cut)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{what}: no such file {str(path)!r}")
    for number, raw in enumerate(path.read_bytes().removeprefix(codecs.BOM_UTF8).split(b"\n"), start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"{what}: {str(path)!r} line {number} is not UTF-8 text (JSON Lines are UTF-8)") from None
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            raise ConfigError(f"{what}: {str(path)!r} line {number} is not valid JSON") from None
        if not isinstance(record, dict):
            raise ConfigError(f"{what}: {str(path)!r} line {number} is not a JSON object")
        yield number, record


def read_parquet(path: str | Path, what: str) -> Iterator[tuple[int, dict]]:
    """(row number from 1, row) for every row of a Parquet file, nested columns as dicts and lists; a missing or
    unreadable file is refused with one line naming it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{what}: no such file {str(path)!r}")
    try:
        rows = pq.read_table(path).to_pylist()
    except (pa.ArrowException, OSError) as err:
        raise ConfigError(f"{what}: {str(path)!r} is not a readable Parquet file ({type(err).__name__})") from None
    return enumerate(rows, start=1)


def read_records(path: str | Path, what: str) -> Iterator[tuple[int, dict]]:
    """(line or row number, record) of a prompt set, read as its extension says (``LAYOUTS``); another extension
    is refused with one line."""
    suffix = Path(path).suffix.lower()
    if suffix not in LAYOUTS:
        raise ConfigError(
            f"{what}: {str(path)!r} is neither JSON Lines nor Parquet; expected a file ending in {', '.join(LAYOUTS)}"
        )
    return read_parquet(path, what) if suffix == ".parquet" else read_jsonl(path, what)


def record_count(path: str | Path) -> int:
    """The records of an existing prompt set, counted without reading them."""
    path = Path(path)
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata.num_rows
    with path.open("rb") as handle:
        return sum(1 for line in handle if line.strip())


def json_kind(value: object) -> str:
    """How a refusal names a value that is not of the type it should be."""
    kinds = {type(None): "null", bool: "a boolean", dict: "an object", list: "a list", str: "text"}
    return kinds.get(type(value), "a number")


def _field(record: dict, dotted: str) -> object:
    """The value at a dotted path of nested objects (``reward_model.ground_truth``), None where there is none."""
    value: object = record
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _chat(messages: list, where: str) -> Chat:
    """A chat prompt's messages; refused unless each has text ``role`` and ``content`` and the last is the user's,
    with text."""
    if not all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in messages
    ):
        raise ConfigError(f"{where}: 'prompt' is a list but not of chat messages with text 'role' and 'content'")
    if not messages or messages[-1]["role"] != "user":
        last = f"ends with a message of role {messages[-1]['role']!r}" if messages else "is an empty list"
        raise ConfigError(f"{where}: 'prompt' {last}; a chat prompt ends with the user's message")
    if not messages[-1]["content"].strip():
        raise ConfigError(f"{where}: the user's message of 'prompt' is empty; expected text")
    return tuple(Message(m["role"], m["content"]) for m in messages)


def _answer(record: dict, where: str) -> str:
    for name in ANSWER_FIELDS:
        value = _field(record, name)
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ConfigError(f"{where}: {name!r} is {json_kind(value)}; expected text or a number")
        answer = str(value).strip()
        if "####" in answer:  # GSM8K: the reasoning, then "#### <answer>"
            answer = answer.rpartition("####")[2].strip().replace(",", "")
        if not answer:
            raise ConfigError(f"{where}: {name!r} has no answer after '####'")
        return answer
    solution = record.get("solution")
    boxed = last_boxed(solution) if isinstance(solution, str) else None
    if boxed is None or not boxed.strip():
        raise ConfigError(
            f"{where} has no answer: expected 'answer', 'ground_truth' or 'reward_model.ground_truth', or a "
            "\\boxed{} answer in 'solution'"
        )
    return boxed.strip()


def _id(record: dict, number: int, where: str) -> str:
    for name in ID_FIELDS:
        value = _field(record, name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise ConfigError(f"{where}: {name!r} is {json_kind(value)}; expected text or an integer")
        if isinstance(value, str) and not value.strip():
            raise ConfigError(f"{where} has an empty {name!r}; expected text")
        return str(value)
    return str(number)


def to_problem(record: dict, number: int, where: str) -> Problem:
    """A record of any of the three layouts (module docstring) as a problem; ``number`` is its line or row, its id
    where it names none, and ``where`` names it in a refusal."""
    field = next((f for f in PROMPT_FIELDS if record.get(f) is not None), None)
    if field is None:
        raise ConfigError(f"{where} has no problem: expected 'problem' or 'question' text, or a 'prompt'")
    value = record[field]
    if field == "prompt" and isinstance(value, list):
        problem: str | Chat = _chat(value, where)
    elif isinstance(value, str):
        if not value.strip():
            raise ConfigError(f"{where} has an empty {field!r}; expected text")
        problem = value
    else:
        chat = " or a list of chat messages" if field == "prompt" else ""
        raise ConfigError(f"{where}: {field!r} is {json_kind(value)}; expected text{chat}")
    ident = _id(record, number, where)
    return Problem(ident, problem, _answer(record, where))


def load_problems(path: str | Path, what: str = "data", reward: Literal["toy", "math"] | None = None) -> list[Problem]:
    """Read a prompt set of any supported layout and extension (module docstring); a missing file or a bad line
    (or row) is refused with one line naming it, so is an id seen before and, with ``reward``, a gold answer that
    grader could never reward (``check_gold``)."""
    unit = LAYOUTS.get(Path(path).suffix.lower())
    problems, seen = [], set()
    for number, record in read_records(path, what):
        where = f"{what}: {str(path)!r} {unit} {number}"
        problem = to_problem(record, number, where)
        if problem.id in seen:
            raise ConfigError(f"{where} repeats id {problem.id!r}")
        if reward is not None:
            check_gold(problem, reward, where)
        seen.add(problem.id)
        problems.append(problem)
    if not problems:
        raise ConfigError(f"{what}: {str(path)!r} holds no problems")
    return problems


def check_gold(problem: Problem, reward: Literal["toy", "math"], where: str) -> None:
    """Refuse a problem whose gold answer the ``reward`` grader cannot read, so that no run scores 0 on it
    unnoticed."""
    why = gold_problem(problem.answer, reward)
    if why:
        raise ConfigError(f"{where} (id {problem.id!r}): gold answer {problem.answer!r} {why}")


def batch_indices(step: int, batch_size: int, num_problems: int, seed: int) -> list[int]:
    """The prompt indices of a step: consecutive slices of per-epoch permutations seeded by (seed, epoch).

    An epoch is ``num_problems // batch_size`` steps and the last partial batch of each permutation is dropped,
    as verl's sampler does (the paper's 174 steps are 3 x 58 batches of 128 from 7,500 prompts), so no batch
    mixes two epochs or repeats a prompt. Stateless in the step, so every model of a run, a resumed run and an
    archive replay with the same seed see the same prompt order.
    """
    per_epoch = num_problems // batch_size
    if per_epoch == 0:
        raise ValueError(f"a batch of {batch_size} prompts needs at least as many problems, got {num_problems}")
    epoch, position = divmod(step, per_epoch)
    import torch  # here, not at the top: the workflow reads data files at parse time, and torch takes seconds

    generator = seeding.generator(seed, "epoch", epoch)
    permutation = torch.randperm(num_problems, generator=generator).tolist()
    return permutation[position * batch_size : (position + 1) * batch_size]
