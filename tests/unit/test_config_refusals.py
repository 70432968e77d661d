"""What the config reader and the plan refuse before any job, each in one line and exit code 2: numbers out of any
field's range, keys that are not text, a selection rule with nothing to select by, a time limit that leaves a
training job no step, and seeds beyond the range every seed of a run is derived in."""

from __future__ import annotations

import copy
import re
import typing
from pathlib import Path

import pytest
import torch
import yaml
from helpers import config_walk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graft.cli import main
from graft.config import RunConfig, config_from_dict, load_config, read_yaml
from graft.errors import ConfigError
from graft.methods import get_method
from graft.planning.plan import training_cells
from graft.planning.site import stop_lead_seconds
from graft.planning.step_time import longest_step_seconds
from graft.seeding import PURPOSES, derive
from graft.typed_config import PATH, Seed, load_yaml, read_option

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "config" / "smoke.yaml"
PAPER = ROOT / "config" / "paper.yaml"
BASE = read_yaml(SMOKE)


def refused(argv: list[str], capsys, watched: Path) -> str:
    """The one line ``graft`` prints for ``argv``, which exits 2 and changes nothing under ``watched``."""
    before = sorted(p for p in watched.rglob("*"))
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("graft: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert sorted(p for p in watched.rglob("*")) == before
    return err


def plan_refuses(tmp_path, capsys, text: str) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return refused(["plan", "--config", str(path)], capsys, tmp_path)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("  lr: 1" + "0" * 400, "config.train.lr: an integer of 401 digits is out of range; expected a number > 0"),
        ("  steps: 1" + "0" * 400, "config.train.steps: an integer of 401 digits is out of range; expected a 64-bit"),
        ("  steps: 9223372036854775808", "config.train.steps: 9223372036854775808 is out of range"),
        ("  steps: 1" + "0" * 5000, "': the integer at line 21 is out of range (more than 4300 digits)"),
        ("  steps: 0x" + "f" * 4000, "': the integer at line 21 is out of range (more than 4300 digits)"),
    ],
)
def test_a_number_out_of_range_is_refused_in_one_line(tmp_path, capsys, line, message):
    text = SMOKE.read_text().replace("  lr: 2.0e-4\n" if "lr" in line else "  steps: 2\n", line + "\n")
    assert message in plan_refuses(tmp_path, capsys, text)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("? [1, 2]\n: 3\n", "': a list as a key at line 64; a key is text"),
        ("? {a: 1}\n: 3\n", "': a mapping as a key at line 64; a key is text"),
        ("1: 3\nzz: 4\n", "config: the key 1 is not allowed (YAML read a number there, not text; quote it)"),
        ("true: 3\n", "config: the key True is not allowed (YAML read a boolean there"),
    ],
)
def test_a_key_that_is_not_text_is_refused_in_one_line(tmp_path, capsys, extra, message):
    assert message in plan_refuses(tmp_path, capsys, SMOKE.read_text() + extra)


def test_mixed_keys_in_a_section_and_in_a_user_preset_are_refused_naming_them(tmp_path, capsys):
    text = SMOKE.read_text().replace("  steps: 2\n", "  steps: 2\n  1: 3\n  zz: 4\n")
    assert "config.train: the key 1 is not allowed" in plan_refuses(tmp_path, capsys, text)
    text = SMOKE.read_text().replace("methods: {}\n", "methods:\n  mine: {base: graft, 1: 2, zz: 3}\n")
    assert "methods.mine: the key 1 is not allowed" in plan_refuses(tmp_path, capsys, text)


def _numbers(data, path=()):
    """The dotted path of every number of a parsed config."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _numbers(value, (*path, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from _numbers(value, (*path, i))
    elif isinstance(data, int | float) and not isinstance(data, bool):
        yield path


def _sections(data, path=()):
    """The path of every mapping of a parsed config, the top included."""
    if isinstance(data, dict):
        yield path
        for key, value in data.items():
            yield from _sections(value, (*path, key))


def _put(data: dict, path: tuple, key, value) -> dict:
    data = copy.deepcopy(data)
    where = data
    for part in path:
        where = where[part]
    where[key] = value
    return data


def _read(data: dict) -> None:
    """The config read as a file of it would be: dumped, loaded with graft's YAML loader, checked; a refusal is one
    line and a ConfigError, nothing else."""
    try:
        config_from_dict(load_yaml(yaml.safe_dump(data), "test"))
    except ConfigError as err:
        assert "\n" not in str(err)


POWERS = st.integers(min_value=18, max_value=4000).map(lambda n: 10**n)
EXTREME = st.one_of(
    POWERS,
    POWERS.map(lambda n: -n),
    st.sampled_from([2**63, -(2**63) - 1, float("inf"), float("-inf"), float("nan"), 1e308, -1e308, 5e-324]),
    st.integers(),
)
"""Numbers of every magnitude, most beyond what any field takes."""


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(list(_numbers(BASE))), EXTREME)
def test_a_number_of_any_magnitude_in_any_field_loads_or_is_refused_in_one_line(path, value):
    _read(_put(BASE, path[:-1], path[-1], value))


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(list(_sections(BASE))),
    st.lists(st.one_of(st.integers(), st.booleans(), st.none(), st.floats(allow_nan=False), st.text()), min_size=1),
)
def test_keys_of_mixed_types_in_any_mapping_are_refused_in_one_line(path, keys):
    data = BASE
    for key in keys:
        data = _put(data, path, key, 1)
    _read(data)


def test_val_best_without_a_validation_set_is_refused_by_the_config_and_the_plan(tmp_path, capsys):
    text = SMOKE.read_text().replace('  validation: "{results}/toy/data/validation.jsonl"\n  k: 2', "  k: 2")
    assert "validation" not in read_yaml_text(text)["eval"]
    text = text.replace("report:\n", "report:\n  selection: val_best\n")
    err = plan_refuses(tmp_path, capsys, text)
    assert "report.selection: 'val_best' selects by the validation score, but eval.validation names no" in err
    with pytest.raises(ConfigError, match=re.escape("report.selection: 'val_best'")):
        config_from_dict(read_yaml_text(text))  # the workflow's start reads it so
    assert load_config(SMOKE, [("report.selection", "val_best")]).report.selection == "val_best"


def read_yaml_text(text: str) -> dict:
    return load_yaml(text, "test")


def test_a_time_limit_shorter_than_the_stop_lead_and_a_step_is_refused_giving_the_minimum(tmp_path, capsys):
    config = load_config(PAPER)
    need = max(
        stop_lead_seconds(config, c.method, c.models)
        + longest_step_seconds(config, get_method(c.method, config.methods), c.models)
        for c in training_cells(config)
    )
    minimum = -(-need // 36) / 100
    argv = ["plan", "--config", str(PAPER), "--set"]
    for hours in (0.01, minimum - 0.02):
        err = refused([*argv, f"slurm.max_runtime_hours={hours}"], capsys, tmp_path)
        assert f"graft: error: slurm.max_runtime_hours: {hours:g} leaves a training job no step: " in err
        assert "(graft.planning.site.stop_lead_seconds) and a step takes up to " in err
        assert err.rstrip().endswith(f"expected at least {minimum:g} hours"), err
    cells = training_cells(load_config(PAPER, [("slurm.max_runtime_hours", minimum)]))  # the minimum passes
    assert cells
    with pytest.raises(ConfigError, match=re.escape("slurm.max_runtime_hours: 0.01 leaves")):
        training_cells(load_config(PAPER, [("slurm.max_runtime_hours", 0.01)]))  # the workflow's start too


def test_a_cpu_config_has_no_stop_lead_and_any_time_limit_passes():
    assert training_cells(load_config(SMOKE, [("slurm.max_runtime_hours", 0.01)]))


BIGGEST = 2**63 - 1


@pytest.mark.parametrize("seed", [str(2**63), "-1", "1" + "0" * 400])
@pytest.mark.parametrize("command", ["train", "evaluate", "complementarity"])
def test_a_seed_beyond_the_range_is_refused_by_every_command_before_anything_runs(tmp_path, capsys, command, seed):
    out = tmp_path / "run"
    argv = {
        "train": ["train", "--config", str(SMOKE), "--method", "grpo_n8", "--models", "smol", "--out", str(out)],
        "evaluate": ["evaluate", "--config", str(SMOKE), "--run", str(out), "--out-dir", str(tmp_path / "ev")],
        "complementarity": ["complementarity", "--config", str(SMOKE), "--models", "smol,qwen"],
    }[command]
    capsys.readouterr()
    assert main([*argv, "--seed", seed]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "argument --seed: " in err and "expected an integer in [0, " in err, err
    assert not out.exists()


def test_the_configs_seeds_have_the_same_range(tmp_path, capsys):
    for field in ("main_seeds", "other_seeds"):
        text = SMOKE.read_text().replace(f"  {field}: [0]", f"  {field}: [{2**63}]")
        err = plan_refuses(tmp_path, capsys, text)
        assert f"config.workflow.{field}[0]: {2**63} is not allowed; expected an integer in [0, {BIGGEST}]" in err
    text = SMOKE.read_text().replace("  seed: 0\n", f"  seed: {2**63}\n")
    assert f"config.toy.seed: {2**63} is not allowed" in plan_refuses(tmp_path, capsys, text)


@settings(max_examples=100)
@given(st.integers(min_value=0, max_value=BIGGEST), st.integers(min_value=0, max_value=10**6))
def test_every_seed_in_the_range_derives_seeds_a_generator_takes(seed, part):
    assert read_option(str(seed), Seed) == seed
    args = {"rollout": (part, "m", 3), "resample_rollout": (part, 2, "m", 3), "admit": (part, "m")}
    args |= {"order": (part, "m"), "eval": ("b",), "complementarity": ("m",)}
    args |= {"warmup_slips": ("m",), "warmup_dialect": ("m",), "resample": (part, 2)}
    for purpose in PURPOSES:
        torch.Generator().manual_seed(derive(seed, purpose, *args.get(purpose, (part,))))


def _path_fields() -> list[tuple[str, bool]]:
    """Every config field that holds a path (``PathText``, as a value or a mapping's values): its dotted path to
    set, and whether it is a mapping. Read from the config's dataclasses, so a new path field is walked at once."""
    config = config_from_dict(copy.deepcopy(BASE))
    found = []
    for set_path, _, hint, _ in config_walk.fields(RunConfig, config):
        if _holds_path(hint):
            found.append((set_path, "dict" in repr(hint)))
    return found


def _holds_path(hint) -> bool:
    """Whether ``hint`` is ``PathText``, or a type built of it (``| None``, a mapping's values)."""
    if typing.get_origin(hint) is typing.Annotated and PATH in typing.get_args(hint)[1:]:
        return True
    return any(_holds_path(arg) for arg in typing.get_args(hint))


PATH_FIELDS = _path_fields()
UNEXPANDED = st.one_of(
    st.builds(lambda user, rest: f"~{user}/{rest}", st.sampled_from(["", "me", "other"]), st.text(min_size=1)),
    st.builds(
        lambda name, rest: f"{rest}/${name}/x",
        st.from_regex(r"\{?[A-Za-z_][A-Za-z0-9_]*\}?", fullmatch=True),
        st.text(alphabet="abc/ ", max_size=5),
    ),
    st.builds(lambda rest, c: f"data/{rest}{c}x", st.text(alphabet="ab", max_size=3), st.characters(max_codepoint=31)),
)
"""Paths as a shell would expand them, or with a control character: no field takes them as written."""


def test_the_path_fields_are_found_by_kind():
    names = {name for name, _ in PATH_FIELDS}
    assert {"results", "data.train", "models.smol.path", "eval.benchmarks", "workflow.environment"} <= names


@settings(max_examples=80, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PATH_FIELDS), UNEXPANDED)
def test_a_path_that_a_shell_would_expand_is_refused_in_one_line_naming_its_field(field, text):
    name, mapping = field
    value = {"add": text} if mapping else text
    *section, key = name.split(".")
    data = copy.deepcopy(BASE)
    where = data
    for part in section:
        where = where.setdefault(part, {})
    where[key] = value
    with pytest.raises(ConfigError) as refusal:
        config_from_dict(load_yaml(yaml.safe_dump(data), "test"))
    line = str(refusal.value)
    # results fills {results} in the other paths, which may be checked first
    assert "\n" not in line and repr(text)[1:-1] in line, line
    assert line.startswith(f"config.{name}") or name == "results", line


def test_a_path_with_a_tilde_is_refused_by_the_plan_before_anything_runs(tmp_path, capsys):
    err = plan_refuses(tmp_path, capsys, SMOKE.read_text().replace("results: ", "results: ~/", 1))
    assert "config.results: '~/" in err and "does not expand ~" in err


def test_a_config_path_of_the_wrong_kind_is_named_for_what_it_is(tmp_path, capsys):
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    (tmp_path / "binary.yaml").write_bytes(b"\xff\xfe\x00")
    for path, message in [
        (tmp_path, "is a directory; expected a file"),
        (tmp_path / "missing.yaml", "no such file"),
        (tmp_path / "loop1", "no such file"),
        (tmp_path / "binary.yaml", "is not UTF-8 text; expected a YAML file"),
    ]:
        assert message in refused(["plan", "--config", str(path)], capsys, tmp_path)
