"""The cells' turns under ``workflow.disk_budget_gb``: which cell each training job waits for, and which cells failed
for good (their ``failed.json``, which graft.workflow.failures writes).

With room for ``k`` cells in flight (trained or training, not yet pruned), the cells, in the plan's order, are dealt
into ``k`` lanes; a cell starts training once the cell before it in its lane is pruned, so each lane holds one cell
in flight. A cell whose training job failed on its last attempt keeps its
checkpoints, to resume from, and with them its place in the budget; the cells behind it move to another lane. They
move in the workflow's next round: Snakemake runs no job downstream of a failed one, and the lanes are inputs of the
training jobs, so a ``--keep-going`` invocation runs itself again for them (graft.workflow.rounds).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import TypeVar

from graft.errors import ConfigError
from graft.results import ResultsTree, RunDir

Cell = TypeVar("Cell", bound=Hashable)


def waits(ordered: list[Cell], k: int, failed: dict[Cell, str], sources: dict[Cell, Cell]) -> dict[Cell, Cell]:
    """The cell each cell of ``ordered`` waits for (to be pruned) before it trains, with at most ``k`` in flight:
    the one before it in its lane, ``k`` places before it. ``sources``: the cell each cell reads (a replay cell, the
    run it replays), which ``ordered`` puts before it.

    Each cell that ``failed`` for good (with the time of its first failure) keeps its place, and its lane is
    closed: the cells that read it wait behind it, and the others after it in its lane join the open lane with the
    fewest cells, after every cell planned so far, with the cells that read them. Failures are applied in
    the order they happened, and each moves only cells that were waiting for it when it failed, so a cell that has
    started keeps the cell it waited for whatever fails later. Every cell still comes after the cell it waits for
    and the cell it reads, so no cell waits on itself."""
    sequence = list(ordered)
    lane = {cell: index % k for index, cell in enumerate(ordered)}
    position = {cell: index for index, cell in enumerate(ordered)}
    closed: set[int] = set()
    for cell in sorted((c for c in failed if c in position), key=lambda c: (failed[c], position[c])):
        readers = _readers(sequence, sources, {cell})
        lane.update(dict.fromkeys(readers, lane[cell]))
        at = sequence.index(cell)
        after = [c for c in sequence[at + 1 :] if lane[c] == lane[cell] and c not in readers]
        closed.add(lane[cell])
        open_lanes = [i for i in range(min(k, len(ordered))) if i not in closed]
        if not open_lanes:  # the budget is held by failed cells: the others wait behind this one
            continue
        target = min(open_lanes, key=lambda i: (sum(1 for c in sequence if lane[c] == i), i))
        # with the cells that read them, in the order they had, so that each still comes after what it reads
        moving = set(after) | _readers(sequence, sources, set(after))
        moved = [c for c in sequence if c in moving]
        sequence = [*(c for c in sequence if c not in moved), *moved]
        lane.update(dict.fromkeys(moved, target))
    last: dict[int, Cell] = {}
    before = {}
    for cell in sequence:
        if lane[cell] in last:
            before[cell] = last[lane[cell]]
        last[lane[cell]] = cell
    return before


def held_behind(before: Mapping[Cell, Cell], failed: Iterable[Cell], finished: Callable[[Cell], bool]) -> list[Cell]:
    """The cells of ``before`` (each cell -> the cell it waits for, ``waits``) that are not ``finished`` and wait,
    directly or behind others, for one of ``failed``: Snakemake runs none of them in the invocation in which that
    cell failed, since no job runs downstream of a failed one."""
    failed = set(failed)
    held = []
    for cell in before:
        ahead = before.get(cell)
        while ahead is not None and ahead not in failed:
            ahead = before.get(ahead)
        if ahead is not None and not finished(cell):
            held.append(cell)
    return held


def _readers(sequence: list[Cell], sources: dict[Cell, Cell], read: set[Cell]) -> set[Cell]:
    """The cells of ``sequence`` that read one of ``read``, or a cell that does, and so on (sources come first)."""
    found: set[Cell] = set()
    for cell in sequence:
        if sources.get(cell) in read or sources.get(cell) in found:
            found.add(cell)
    return found


RECORD = '{"failed_at": "<UTC time>", ...}, which the disk budget\'s lanes are planned from'
"""What ``failed.json`` holds (graft.workflow.failures writes it), as a refusal of an unreadable one says."""


def failure_time(run: RunDir) -> str | None:
    """When the cell of ``run`` first failed for good (its ``failed.json``), None where it never did."""
    try:
        record = json.loads(run.failed.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise ConfigError(
            f"{str(run.failed)!r} is not readable JSON ({err.__class__.__name__}); expected the record of a training "
            "job that failed for good, " + RECORD
        ) from None
    if not isinstance(record, dict) or not isinstance(record.get("failed_at"), str):
        raise ConfigError(
            f"{str(run.failed)!r} has no failed_at; expected the record of a training job that failed for good, "
            + RECORD
        )
    return record["failed_at"]


def failed_cells(cells: list, tree: ResultsTree) -> dict:
    """Each of ``cells`` (graft.planning.plan.TrainingCell) whose training failed for good in ``tree``, with the time
    it first did: what ``waits`` moves the lanes past."""
    return {c: at for c in cells if (at := failure_time(c.run_dir(tree))) is not None}
