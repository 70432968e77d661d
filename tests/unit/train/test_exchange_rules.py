"""Exchange rules of two presets: pooled groups touch only the selected prompts, and "w/o balanced
exchange" uses SGT's eligibility (any peer success, all-correct groups included)."""

from __future__ import annotations

import torch
from helpers.step_records import records

from graft.algo import pooled_advantages, success_counts
from graft.methods import get_method
from graft.seeding import generator
from graft.train.rules import ADVANTAGES, Capability, select_prompts


def test_pooled_groups_leave_unselected_prompts_as_plain_grpo():
    own = records("B", [[0, 0, 0, 0], [1, 0, 1, 0], [1, 1, 0, 0]])
    peer = records("A", [[1, 0, 0, 1], [1, 1, 1, 0], [0, 0, 0, 0]])
    selected = torch.tensor([True, False, False])
    method = get_method("graft_pooled")
    own_adv, peer_adv, _ = ADVANTAGES.of(method).advantages(own, peer, selected, Capability(1.0, 1.0))
    pooled_own, pooled_peer = pooled_advantages(own.rewards, peer.rewards)
    assert torch.equal(own_adv[0], pooled_own[0]) and torch.equal(peer_adv[0], pooled_peer[0])
    assert torch.equal(own_adv[1:], own.advantages[1:])  # the peer never leaks into an ordinary prompt
    assert torch.equal(peer_adv[1:], peer.advantages[1:])
    assert (own_adv[0] < 0).all()  # the all-fail own group, normalised against the peer's successes


def test_unbalanced_row_takes_every_prompt_the_peer_solved():
    own = records("B", [[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0]])
    peer = records("A", [[1, 1, 1, 1], [1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 0, 0]])
    k = {"A": success_counts(peer.rewards), "B": success_counts(own.rewards)}
    directions = [("A", "B"), ("B", "A")]
    sizes = {"A": 4, "B": 4}
    unbalanced, _ = select_prompts(get_method("graft_unbalanced"), k, sizes, directions, generator(0, "select", 0))
    graft, _ = select_prompts(get_method("graft"), k, sizes, directions, generator(0, "select", 0))
    assert unbalanced[("A", "B")].tolist() == [True, True, False, False]  # the all-correct group too (k_src = n)
    assert graft[("A", "B")].tolist() == [False, False, False, False]  # balanced against B's zero candidates
    assert unbalanced[("B", "A")].tolist() == [False, False, False, False]


def test_cut_to_limit_counts_what_it_cuts_and_drops_the_tail_with_its_eos():
    from graft.engine.scoring import cut_to_limit

    cut, count = cut_to_limit([[5, 6, 7, 1], [5, 1], [5, 6, 7]], 3)
    assert cut == [[5, 6, 7], [5, 1], [5, 6, 7]] and count == 1
    assert cut_to_limit([[5, 6, 7, 1]], None) == ([[5, 6, 7, 1]], 0)


def test_replay_tests_each_archives_groups_with_its_own_rollout_count(tmp_path):
    """Archives of n = 4 replayed into a receiver of n = 8: an archive's 4/4 group is all-correct, not mixed (as
    the receiver's n would have it), so it is no candidate; its 2/4 group is. One archive, and two."""
    from graft.data.problems import Problem
    from graft.data.records import write_step
    from graft.engine.reward import Grades
    from graft.train.peers import ArchivePeer

    archives = []
    for name, rewards in (("A", [[1, 1, 1, 1], [1, 1, 0, 0]]), ("C", [[1, 1, 1, 1], [0, 0, 0, 0]])):
        archive = records(name, rewards)
        archive.texts = [[str(int(r)) for r in row] for row in rewards]  # the grade below reads the reward back
        archives.append(tmp_path / name)
        write_step(archive, archives[-1])
    batch = [Problem(f"p{g}", "x", "1") for g in range(2)]
    grade = lambda texts, answers: Grades([float(t) for t in texts], 0, 0)  # noqa: E731
    for chosen in (archives[:1], archives):
        peer = ArchivePeer(get_method("replay"), 0, chosen, grade)
        view = peer.views(0, batch, {"B": records("B", [[0] * 8, [0] * 8])}, {})["B"]
        assert view.metrics["archive_rewards_changed"] == 0
        assert view.candidates == 1 and view.selected.tolist() == [False, True]
