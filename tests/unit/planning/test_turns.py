"""The cells' turns under a disk budget (graft/planning/turns.py): which cell each waits for, the lanes moving past
a cell that failed for good, and a simulated workflow that holds the budget's promise, at most k cells with unpruned
checkpoints, through failures and invocations."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from graft.planning.turns import waits


def lanes_of(before: dict, ordered: list) -> list[list]:
    """The lanes ``before`` (each cell's predecessor) forms, each from its first cell."""
    after = {waited: cell for cell, waited in before.items()}
    lanes = []
    for head in (c for c in ordered if c not in before):
        lane = [head]
        while lane[-1] in after:
            lane.append(after[lane[-1]])
        lanes.append(lane)
    return lanes


def test_without_failures_each_cell_waits_for_the_one_k_places_before_it():
    ordered = list("abcdefg")
    for k in (1, 2, 3, 7, 9):
        assert waits(ordered, k, {}, {}) == {ordered[i]: ordered[i - k] for i in range(k, len(ordered))}


def test_the_cells_behind_a_failed_one_move_to_the_shortest_open_lane():
    ordered = list("abcdefgh")  # lanes a c e g and b d f h
    moved = waits(ordered, 2, {"d": "2026-12-01T00:00:00Z"}, {})
    # d keeps its place; f and h follow the open lane's last cell; nothing waits for d
    assert lanes_of(moved, ordered) == [list("acegfh"), list("bd")]
    assert "d" not in moved.values()


def test_failures_apply_in_the_order_they_happened_and_a_closed_lane_takes_nothing():
    ordered = list("abcdefghi")  # k 3: a d g, b e h, c f i
    first, later = "2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z"
    moved = waits(ordered, 3, {"b": first, "f": later}, {})
    # b's lane closes, e h go to the shorter open lane (c f i has 3, a d g has 3: the first); f's lane closes next,
    # and its i goes to the one lane still open
    assert lanes_of(moved, ordered) == [list("adgehi"), list("b"), list("cf")]


def test_the_cells_that_read_a_failed_run_wait_behind_it_and_with_every_lane_closed_the_rest_waits_too():
    ordered = list("abcdef")  # lanes a c e, b d f; e replays what c trained
    moved = waits(ordered, 2, {"c": "2026-12-01T00:00:00Z"}, {"e": "c"})
    assert lanes_of(moved, ordered) == [list("ace"), list("bdf")]
    # both lanes closed: what follows the second failure stays behind it
    both = waits(ordered, 2, {"c": "2026-12-01T00:00:00Z", "b": "2026-12-02T00:00:00Z"}, {"e": "c"})
    assert lanes_of(both, ordered) == [list("ace"), list("bdf")]


def test_a_moved_run_goes_before_the_replay_that_reads_it_so_that_neither_waits_for_the_other():
    ordered = list("abcdefg")  # lanes a c e g and b d f; f replays what e trained
    moved = waits(ordered, 2, {"c": "2026-12-01T00:00:00Z"}, {"f": "e"})
    # e and g join b d, and f, which needs e trained, moves with them rather than staying ahead of e
    assert lanes_of(moved, ordered) == [list("ac"), list("bdefg")]


def simulate(cells: int, k: int, failing: set[int], sources: dict[int, int], seed: int) -> set[int]:
    """A workflow run invocation after invocation in a random order of events, each invocation planning the waits
    from the failures recorded so far: a cell starts once the cell it waits for is pruned and its source (a replay's
    run) is trained; a failing cell fails for good, keeps its checkpoints and is retried by the next invocation.
    Checks at every event that at most ``k`` cells hold unpruned checkpoints and that a started cell's wait never
    changes; returns the cells pruned in the end."""
    rng = random.Random(seed)
    ordered = list(range(cells))
    failed: dict[int, str] = {}
    started: dict[int, int | None] = {}  # the cell each started cell waited for
    trained: set[int] = set()
    pruned: set[int] = set()
    clock = 0
    for _ in range(len(failing) + 3):  # an invocation per failure and one to finish is enough
        before = waits(ordered, k, failed, sources)
        for cell, waited in started.items():
            assert before.get(cell) == waited, f"cell {cell} started after {waited}, now waits for {before.get(cell)}"
        retried = set(failed) - pruned  # the next invocation retries them where they stand
        gave_up: set[int] = set()
        while True:
            ready = [
                c
                for c in ordered
                if (c not in started or (c in retried and c not in trained and c not in gave_up))
                and (before.get(c) is None or before[c] in pruned)
                and (c not in sources or sources[c] in trained)
                and c not in gave_up
            ]
            events = [("start", c) for c in ready if c not in started]
            events += [("retry", c) for c in ready if c in started]
            events += [("prune", c) for c in trained - pruned]
            if not events:
                break
            kind, cell = rng.choice(events)
            clock += 1
            if kind == "prune":
                pruned.add(cell)
            elif cell in failing:
                started.setdefault(cell, before.get(cell))
                gave_up.add(cell)
                failed.setdefault(cell, f"{clock:06d}")
            else:
                started.setdefault(cell, before.get(cell))
                trained.add(cell)
                retried.discard(cell)
            holding = (set(started) | set(failed)) - pruned
            assert len(holding) <= k, f"{sorted(holding)} hold checkpoints at once, more than {k}"
    return pruned


@given(
    cells=st.integers(2, 14),
    k=st.integers(1, 5),
    data=st.data(),
)
def test_a_simulated_workflow_keeps_the_budget_through_failures_and_finishes_every_cell_that_can(cells, k, data):
    failing = data.draw(st.sets(st.integers(0, cells - 1), max_size=cells // 2))
    readers = data.draw(st.dictionaries(st.integers(1, cells - 1), st.integers(0, cells - 2), max_size=cells // 3))
    sources = {reader: source for reader, source in readers.items() if source < reader}  # a replay follows its run
    pruned = simulate(cells, k, failing, sources, data.draw(st.integers(0, 2**16)))
    blocked = set(failing)
    for cell in range(cells):  # a cell that reads a blocked one is blocked (sources come first)
        if sources.get(cell) in blocked:
            blocked.add(cell)
    if len(failing) < k:  # an open lane is left: every cell that does not need a failed run finishes
        assert pruned == set(range(cells)) - blocked
    assert not pruned & blocked
