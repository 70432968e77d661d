"""Every field of the generated schema refuses wrong-typed, out-of-range, NaN/inf and empty values with one line
naming it, whether the value comes from the YAML file, ``--set`` or the workflow's schema."""

from __future__ import annotations

import copy
import math
import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from snakemake.utils import validate

from graft.cli import main
from graft.config import config_from_dict, read_yaml
from graft.errors import ConfigError
from graft.planning.config_schema import SCHEMA_PATH, config_schema

ROOT = Path(__file__).resolve().parents[2]
BASE = read_yaml(ROOT / "config" / "smoke.yaml")
SCHEMA = config_schema()

WORDS = st.text(alphabet="xyzq", min_size=1)
"""Text that spells no number, bool or null, so that no field reads it as one."""


def leaves(schema: dict, path: tuple = ()) -> list[tuple[tuple, dict]]:
    """(path, schema) of every field, the values of mappings (key ``*``) and the items of lists (index 0)."""
    found = [(path, schema)] if path else []
    for name, prop in schema.get("properties", {}).items():
        found += leaves(prop, (*path, name))
    if isinstance(schema.get("additionalProperties"), dict):
        found += leaves(schema["additionalProperties"], (*path, "*"))
    if isinstance(schema.get("items"), dict):
        found += leaves(schema["items"], (*path, 0))
    return found


FIELDS = [(path, schema) for path, schema in leaves(SCHEMA) if schema.get("type") or schema.get("enum")]


def types_of(schema: dict) -> set[str]:
    kind = schema.get("type", [])
    return set(kind if isinstance(kind, list) else [kind])


def bad_values(schema: dict) -> st.SearchStrategy:
    """Values the field must refuse: another type, beyond its bounds, NaN and infinities, empty."""
    kinds = types_of(schema)
    options = []
    if "enum" in schema:
        options.append(WORDS if "string" in kinds else st.integers().filter(lambda v: v not in schema["enum"]))
        options.append(st.booleans() if "integer" in kinds else st.integers())
    elif "boolean" in kinds:
        options += [st.integers(), WORDS]
    elif kinds & {"integer", "number"}:
        options += [WORDS, st.booleans(), st.lists(st.integers(), max_size=2)]
        if "integer" in kinds:
            options.append(st.floats(allow_nan=False, allow_infinity=False).filter(lambda v: not v.is_integer()))
        else:
            options.append(st.sampled_from([math.nan, math.inf, -math.inf]))
        low, high = schema.get("minimum", schema.get("exclusiveMinimum")), schema.get("maximum")
        high = schema.get("exclusiveMaximum") if high is None else high
        if low is not None:
            below = st.integers(max_value=math.ceil(low) - 1) if "integer" in kinds else st.floats(max_value=low)
            options.append(below.filter(lambda v: v < low or "exclusiveMinimum" in schema))
        if high is not None:
            above = st.integers(min_value=math.floor(high) + 1) if "integer" in kinds else st.floats(min_value=high)
            options.append(above.filter(lambda v: v > high or "exclusiveMaximum" in schema))
    elif "string" in kinds:
        options += [st.just(""), st.integers(), st.lists(WORDS, min_size=1, max_size=2)]
    elif "array" in kinds:
        options += [WORDS, st.integers()] + ([st.just([])] if schema.get("minItems") else [])
    elif "object" in kinds:
        options += [WORDS, st.integers(), st.lists(WORDS, max_size=2)]
        options += [st.just({})] if schema.get("minProperties") else []
    if "null" not in kinds:
        options.append(st.none())
    return st.one_of(options)


def with_value(config: dict, path: tuple, value) -> tuple[dict, str]:
    """A copy of ``config`` with ``value`` at ``path`` (``*``: the mapping's first key, else ``x``; sections and
    lists it lacks are created), and the field's dotted name."""
    config = copy.deepcopy(config)
    parent, names = config, []
    for depth, key in enumerate(path):
        if key == "*":
            key = next(iter(parent), "x")
        names += [str(key)] if key != 0 else []
        if depth == len(path) - 1:
            parent[key] = value
            break
        child = parent[key] if isinstance(parent, list) or key in parent else None
        if path[depth + 1] == 0:
            parent[key] = child if isinstance(child, list) and child else [None]
        else:
            parent[key] = child if isinstance(child, dict) else {}
        parent = parent[key]
    return config, ".".join(names)


@pytest.mark.parametrize(("path", "schema"), FIELDS, ids=[".".join(map(str, p)) for p, _ in FIELDS])
@settings(max_examples=int(os.environ.get("CONFIG_FIELD_EXAMPLES", 8)))
@given(data=st.data())
def test_every_field_refuses_bad_values_with_one_line_naming_it(path, schema, data):
    value = data.draw(bad_values(schema), label="value")
    config, name = with_value(BASE, path, value)
    with pytest.raises(ConfigError) as err:
        config_from_dict(config)
    message = str(err.value)
    assert "\n" not in message
    assert re.search(rf"(^|\.){re.escape(name)}(\[0\])?: ", message), (name, message)


def test_the_walk_covers_every_section_and_the_bounds():
    names = {".".join(map(str, p)) for p, _ in FIELDS}
    assert len(names) > 150
    assert {"train.grad_clip", "train.beta2", "eval.temperature", "reward.timeout", "toy.models.*.slip.*"} <= names
    bounded = [p for p, s in FIELDS if {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"} & set(s)]
    assert len(bounded) > 60


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("train.grad_clip=-1", "train.grad_clip: -1 is not allowed; expected a number > 0"),
        ("eval.temperature=.nan", "eval.temperature: nan is not allowed; expected a number > 0"),
        ("reward.timeout=-5", "reward.timeout: -5 is not allowed; expected a number > 0"),
        ("train.lr=.nan", "train.lr: nan is not allowed; expected a number > 0"),
        ("train.lr=.inf", "train.lr: inf is not allowed; expected a number > 0"),
        ("train.beta2=1.5", "train.beta2: 1.5 is not allowed; expected a number in [0, 1)"),
        ("train.weight_decay=-1", "train.weight_decay: -1 is not allowed; expected a number >= 0"),
        ("train.rollout_batch=0", "train.rollout_batch: 0 is not allowed; expected an integer >= 1"),
        ("results=", "config.results: None is not allowed; expected a non-empty string"),
        ("train.steps=three", "train.steps: 'three' is not allowed; expected an integer >= 1"),
    ],
)
def test_plan_refuses_what_slipped_through_with_one_line_and_writes_nothing(
    setting, message, capsys, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # the config's relative results directory would land here
    assert main(["plan", "--config", str(ROOT / "config" / "smoke.yaml"), "--set", setting]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert list(tmp_path.iterdir()) == []


def test_every_shipped_field_value_passes_as_snakemake_hands_it_over():
    """Snakemake's ``--config`` gives every value as text: read through the schema's types, the smoke config's
    values, each as text, pass the schema and the dataclasses unchanged."""
    from snakemake.cli import parse_config

    from graft.config import parse_config_strings

    override = parse_config(['train={"lr": 1e-5, "steps": 3, "dual_clip": null}', "workflow={main_seeds: [0, 1]}"])
    assert override["train"] == {"lr": "1e-5", "steps": "3", "dual_clip": "null"}  # what Snakemake gives
    config = copy.deepcopy(BASE)
    for section, values in override.items():
        config[section].update(values)
    typed = parse_config_strings(config)
    validate(typed, str(ROOT / SCHEMA_PATH))
    cfg = config_from_dict(typed)
    assert (cfg.train.lr, cfg.train.steps, cfg.train.dual_clip, cfg.workflow.main_seeds) == (1e-5, 3, None, [0, 1])
