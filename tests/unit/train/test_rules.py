"""The registries of a method's rules (graft/train/rules.py, graft/engine/transfer.py, graft/train/losses.py): every
value of every switch has its rule, a rule is registered once, and the exchange code looks rules up instead of
comparing the switches' strings."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest
import torch
from helpers.step_records import records

import graft
from graft.algo import capability_ratio, hacpo_advantages
from graft.engine.transfer import ADMISSIONS, GATES
from graft.methods import Method, Registry, get_method
from graft.train.losses import UPDATES
from graft.train.rules import ADVANTAGES, SELECTIONS, TRANSFERS, Capability

REGISTRIES = (SELECTIONS, TRANSFERS, ADVANTAGES, GATES, ADMISSIONS, UPDATES)


def test_every_value_of_every_switch_has_its_rule():
    hints = typing.get_type_hints(Method)
    for registry in REGISTRIES:
        values = set(typing.get_args(hints[registry.switch]))
        if registry.switch == "select":
            values.discard("none")  # plain GRPO selects nothing
        assert set(registry) == values, registry.switch


def test_a_rule_registered_twice_is_refused():
    registry = Registry("gate")
    registry.register("compat")(object())
    with pytest.raises(ValueError, match="gate rule 'compat' is registered twice"):
        registry.register("compat")(object())


def test_the_exchange_looks_rules_up_instead_of_comparing_switches():
    root = Path(graft.__file__).parent
    switches = "|".join(registry.switch for registry in REGISTRIES)
    compared = re.compile(rf"method\.({switches})\s*(==|!=|in\b|not in\b)")
    for path in ("train/exchange.py", "train/update.py", "train/trainer.py", "train/losses.py", "engine/transfer.py"):
        assert not compared.search((root / path).read_text()), path


def test_hacpos_capability_ratio_is_its_advantage_rules():
    """The receiver at P = 0.2, its source at 0.6: the baseline weighs the source's rewards by 0.2 / 0.6, and the
    loss scales the sent responses' advantages by 0.6 / 0.2, both clipped (HACPO Eqs. 5-6)."""
    own, peer = records("B", [[0, 0, 1, 0], [1, 1, 0, 0]]), records("A", [[1, 1, 1, 0], [1, 0, 0, 0]])
    selected = torch.tensor([True, False])
    adv = ADVANTAGES.of(get_method("hacpo")).advantages(own, peer, selected, Capability(0.2, 0.6))
    own_adv, peer_adv = hacpo_advantages(own.rewards, peer.rewards, capability_ratio(0.2, 0.6))
    assert torch.equal(adv.own, own_adv) and torch.equal(adv.peer[0], peer_adv[0])
    assert (adv.peer[1] == 0).all()  # off the selection
    assert adv.capability_ratio == capability_ratio(0.6, 0.2) == pytest.approx(3.0)
    assert (
        ADVANTAGES.of(get_method("graft")).advantages(own, peer, selected, Capability(0.2, 0.6)).capability_ratio == 1.0
    )
