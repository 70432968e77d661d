"""Every preset, with the switch values that define it, and the refusal of bad method input."""

import re

import pytest
import yaml

from graft.cli import main
from graft.errors import ConfigError
from graft.methods import PRESETS, Method, get_method, preset_names, with_switches

GRAFT = {"peer": "live", "select": "complementary", "balanced": True}
HACPO_UPDATE = {
    "keep_own": True,
    "advantage": "hacpo",
    "update": "hacpo",
    "gate": "none",
    "kl_coef": 1e-3,
    "order": "self_first",
}
SGT_UPDATE = {"transfer": "one_success", "keep_own": True, "update": "nll", "gate": "none", "order": "prompt"}

# The switches that differ from Method()'s defaults, for every row the paper reports.
EXPECTED = {
    "grpo_n8": {},
    "grpo_n16": {"n": 16},
    "grpo_n32": {"n": 32},
    "grpo_n8_ds": {"dynamic_sampling": True},
    "graft": GRAFT,
    "hacpo": {"peer": "live", "select": "all", **HACPO_UPDATE},
    "sgt": {"peer": "live", "select": "any_success", **SGT_UPDATE},
    "replay": {"peer": "archive", "select": "complementary"},
    "graft_no_gate": {**GRAFT, "gate": "none"},
    "graft_no_floor": {**GRAFT, "delta": 0.0},
    "graft_unbalanced": {"peer": "live", "select": "any_success"},
    "graft_seq_ratio": {**GRAFT, "ratio": "sequence"},
    "graft_seq_ratio_peer": {**GRAFT, "ratio": "sequence_peer"},
    "graft_random_prompts": {**GRAFT, "select": "random_prompts"},
    "graft_random_admission": {**GRAFT, "admission": "random"},
    "graft_peer_first": {**GRAFT, "order": "peer_first"},
    "graft_uniform": {**GRAFT, "order": "uniform"},
    "graft_delta07": {**GRAFT, "delta": 0.7},
    "graft_delta09": {**GRAFT, "delta": 0.9},
    "graft_pooled": {**GRAFT, "keep_own": True, "advantage": "pooled"},
    "graft_success_only": {**GRAFT, "transfer": "success_only"},
    "graft_success_only_no_floor": {**GRAFT, "transfer": "success_only", "delta": 0.0},
    "graft_hacpo_update": {**GRAFT, **HACPO_UPDATE},
    "graft_sgt_update": {**GRAFT, **SGT_UPDATE},
    "graft_luffy_update": {**GRAFT, "update": "luffy", "gate": "none"},
    "graft_random_peer": {**GRAFT, "peer_choice": "random"},
}


def test_every_preset_is_listed_and_defined_by_its_switches():
    assert preset_names() == list(EXPECTED)
    defaults = Method().to_dict()
    for name, switches in EXPECTED.items():
        got = PRESETS[name].method.to_dict()
        differs = {k: v for k, v in got.items() if v != defaults[k]}
        assert differs == switches, name


def test_paper_defaults():
    m = Method()
    assert (m.n, m.delta, m.cap, m.eps_low, m.eps_high, m.order, m.ratio) == (
        8,
        0.8,
        1.0,
        0.2,
        0.28,
        "peer_last",
        "token",
    )
    hacpo = get_method("hacpo")
    assert (
        hacpo.hacpo_clip_low,
        hacpo.hacpo_clip_high,
        hacpo.hacpo_cross_delta,
        hacpo.hacpo_cross_step,
        hacpo.hacpo_window,
    ) == (3e-4, 4e-4, 0.2, 0.025, 5)
    assert get_method("sgt").nll_coef == 0.1 and get_method("graft_luffy_update").luffy_gamma == 0.1


def test_every_table_row_has_a_label():
    tables = {p.table for p in PRESETS.values()}
    assert tables == {"1", "2a", "2b", "F", "stored", "5", "group"}
    assert len({p.label for p in PRESETS.values()}) == len(PRESETS)


def test_unknown_preset_names_the_allowed_ones():
    with pytest.raises(ConfigError, match="unknown method preset 'grafft'; allowed: grpo_n8, grpo_n16"):
        get_method("grafft")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"n": 1}, "method.n: 1 is not allowed"),
        ({"delta": 1.2}, "method.delta: 1.2 is not allowed; expected a number in [0, 1)"),
        ({"peer": "archive"}, "method.balanced: true is not allowed with peer 'archive'"),
        ({"advantage": "pooled"}, "method.keep_own"),
        ({"update": "hacpo"}, "method.update: 'hacpo' and advantage 'hacpo' go together"),
        ({"gate": "none", "admission": "random"}, "method.admission"),
        ({"peer": "none"}, "method.select"),
        (
            {"update": "hacpo", "advantage": "hacpo", "keep_own": True, "transfer": "success_only"},
            "method.transfer: 'success_only' is not allowed with update 'hacpo'",
        ),
    ],
)
def test_invalid_switch_combinations(changes, message):
    with pytest.raises(ConfigError, match=re.escape(message)) as err:
        with_switches(PRESETS["graft"].method, changes, "method")
    assert "\n" not in str(err.value)


def test_user_presets_from_config():
    custom = {"graft_delta085": {"base": "graft", "delta": 0.85}}
    m = get_method("graft_delta085", custom)
    assert m.delta == 0.85 and m.balanced
    with pytest.raises(ConfigError, match=r"methods.bad.order: 'last' is not allowed; expected one of"):
        get_method("bad", {"bad": {"base": "graft", "order": "last"}})
    with pytest.raises(
        ConfigError, match=r"methods.bad: unknown field 'dleta' \(did you mean 'delta'\?\); allowed fields: n, peer"
    ):
        get_method("bad", {"bad": {"base": "graft", "dleta": 0.5}})
    with pytest.raises(ConfigError, match=r"methods.bad.balanced: 1 is not allowed; expected true or false"):
        get_method("bad", {"bad": {"base": "graft", "balanced": 1}})
    with pytest.raises(ConfigError, match=r"methods.bad.base: unknown preset 'gpro'"):
        get_method("bad", {"bad": {"base": "gpro"}})


def test_cli_lists_and_shows_presets(capsys):
    assert main(["methods"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in EXPECTED)
    assert main(["methods", "graft_uniform"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert shown["graft_uniform"] == get_method("graft_uniform").to_dict()


def test_cli_refuses_unknown_preset_with_exit_code_2(capsys):
    assert main(["methods", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown method preset 'nope'; allowed:" in err


def test_methods_lists_the_definitions_the_paper_leaves_open(capsys):
    assert main(["methods"]) == 0
    out = capsys.readouterr().out
    assert "graft_seq_ratio: every response, own and peer" in out
    assert "graft_seq_ratio_peer: the second reading" in out
    assert main(["methods", "graft_seq_ratio"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("# ") and "sequence-level ratio" in first
