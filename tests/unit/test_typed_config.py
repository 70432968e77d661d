"""graft's YAML loader (YAML 1.2 floats, duplicate keys refused) and the one reading of text as a field's type."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import pytest

from graft.cli import main
from graft.config import load_config
from graft.errors import ConfigError
from graft.methods import PRESETS, get_method, with_switches
from graft.typed_config import Count, Positive, load_yaml, parse_strings

ROOT = Path(__file__).resolve().parents[2]
SMOKE = (ROOT / "config" / "smoke.yaml").read_text()


@pytest.mark.parametrize(
    ("text", "value"),
    [("1e-6", 1e-6), ("1E5", 1e5), ("-2e+3", -2e3), ("1.0e5", 1e5), (".5e-1", 0.05), ("2.0e-4", 2e-4), ("3", 3)],
)
def test_numbers_without_a_dot_or_a_signed_exponent_are_floats(text, value):
    assert load_yaml(f"lr: {text}", "test") == {"lr": value}
    assert type(load_yaml(f"lr: {text}", "test")["lr"]) is type(value)


def test_a_config_file_with_lr_1e_6_loads(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(SMOKE.replace("  lr: 2.0e-4\n", "  lr: 1e-6\n"))
    assert load_config(path).train.lr == 1e-6


def test_a_duplicate_key_is_refused_with_one_line_naming_it_and_the_file(tmp_path, capsys):
    path = tmp_path / "config.yaml"
    path.write_text(SMOKE.replace("  lr: 2.0e-4\n", "  lr: 2.0e-4\n  steps: 5\n"))
    assert main(["plan", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"'{path}': duplicate key 'steps' at line " in err, err


def test_graft_reads_every_yaml_file_with_its_loader():
    sources = [*(ROOT / "graft").rglob("*.py"), ROOT / "Snakefile", *(ROOT / "rules").glob("*.smk")]
    direct = [str(p.relative_to(ROOT)) for p in sources if re.search(r"yaml\.(safe_)?load\(", p.read_text())]
    assert direct == []


@pytest.mark.parametrize(
    ("value", "tp", "read"),
    [
        ("3", Count, 3),
        ("-3", int, -3),
        ("3.0", int, "3.0"),  # not an integer: left for the check to refuse by name
        ("1e-5", Positive, 1e-5),
        ("true", bool, True),
        ("False", bool, False),
        ("yes", bool, "yes"),
        ("null", Count | None, None),
        ("null", int, "null"),
        ("3", Literal[2, 3], 3),
        ("3", str, "3"),
        (["0", "1"], list[int], [0, 1]),
        ({"a": "0.5"}, dict[str, float], {"a": 0.5}),
    ],
)
def test_text_is_read_as_the_type_its_field_expects(value, tp, read):
    parsed = parse_strings(value, tp)
    assert parsed == read and type(parsed) is type(read)


def test_a_user_presets_switches_given_as_text_are_typed():
    method = get_method("mine", {"mine": {"base": "graft", "delta": "0.85", "n": "16", "balanced": "false"}})
    assert (method.delta, method.n, method.balanced) == (0.85, 16, False)
    changed = with_switches(PRESETS["graft"].method, {"delta": 0.85}, "method")
    assert changed.delta == 0.85 and changed.select == "complementary" and changed.balanced
    with pytest.raises(ConfigError, match=re.escape("method.delta: 1.5 is not allowed; expected a number in [0, 1)")):
        with_switches(PRESETS["graft"].method, {"delta": "1.5"}, "method")
