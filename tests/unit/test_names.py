"""One name rule (graft.names) wherever a name enters: every config section that gives a model, pair, group or
preset its name, and every command-line option that takes one. Bad names of every kind (path separators, dots,
non-ASCII letters, a leading digit, what YAML reads as a boolean or a number, empty, too long) are refused with one
line naming the kind and the value, and nothing on disk changes."""

from __future__ import annotations

import contextlib
import hashlib
import io
import re
import string
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graft.cli import main
from graft.config import config_from_dict, load_config
from graft.errors import ConfigError
from graft.names import MAX_NAME_LENGTH, NAME_PATTERN, check_name

ROOT = Path(__file__).resolve().parents[2]
SMOKE = str(ROOT / "config" / "smoke.yaml")
SHIPPED = sorted(str(p) for p in (ROOT / "config").rglob("*.yaml") if "digests" not in p.parts)

_NAME_CHARS = string.ascii_letters + string.digits + "_"
_TEXT = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00'\"\\")
"""Any character but a NUL (no argv holds one), a surrogate and the quotes and backslash that ``repr`` escapes."""

bad_names = st.one_of(
    # a path: separators and dots that would leave the results tree's directory
    st.builds(
        lambda a, sep, b: a + sep + b,
        st.text(_NAME_CHARS, max_size=6),
        st.sampled_from(["/", "..", ".", "/../", "\\"]),
        st.text(_NAME_CHARS, max_size=6),
    ),
    # a letter outside ASCII, or any other character outside the rule
    st.builds(
        lambda a, c, b: a + c + b,
        st.text(string.ascii_letters, min_size=1, max_size=6),
        _TEXT.filter(lambda c: c not in _NAME_CHARS),
        st.text(_NAME_CHARS, max_size=6),
    ),
    st.from_regex(r"[0-9_][A-Za-z0-9_]{0,10}", fullmatch=True),  # a leading digit or underscore
    st.just(""),
    st.text(_NAME_CHARS, min_size=MAX_NAME_LENGTH + 1, max_size=3 * MAX_NAME_LENGTH).map(lambda s: "a" + s),
)
"""Text that is no name."""

not_text = st.one_of(st.booleans(), st.integers(), st.floats(allow_nan=False), st.none())
"""What YAML makes of an unquoted ``no``, ``on``, ``0123`` or an empty key: no text at all."""


def smoke() -> dict:
    return yaml.safe_load(Path(SMOKE).read_text())


def _models(c, name):
    c["models"][name] = c["models"]["smol"]


def _toy_models(c, name):
    c["toy"]["models"][name] = c["toy"]["models"]["smol"]


def _pairs(c, name):
    c["pairs"][name] = ["smol", "qwen"]


def _pair_member(c, name):
    c["pairs"]["P2"] = [name, "smol"]


def _groups(c, name):
    c["groups"] = {name: ["smol", "qwen", "octo"]}


def _group_member(c, name):
    c["groups"] = {"G1": ["smol", "qwen", name]}


def _methods(c, name):
    c["methods"] = {name: {"base": "graft", "delta": 0.5}}


def _method_seeds(c, name):
    c["workflow"]["method_seeds"] = {name: [0]}


def _cell_seeds(c, name):
    c["workflow"]["cell_seeds"] = {name: [0]}


CONFIG_SITES = {
    "models": (_models, "model"),
    "toy.models": (_toy_models, "model"),
    "pairs": (_pairs, "pair"),
    "pairs.P2[0]": (_pair_member, "model"),
    "groups": (_groups, "group"),
    "groups.G1[2]": (_group_member, "model"),
    "methods": (_methods, "method"),
    "workflow.method_seeds": (_method_seeds, "method"),
    "workflow.cell_seeds": (_cell_seeds, "cell"),
}
"""Every place of the config that gives or takes a name: (put a name there, the kind the refusal names)."""


def refused_in_config(site: str, name) -> str:
    put, kind = CONFIG_SITES[site]
    config = smoke()
    put(config, name)
    with pytest.raises(ConfigError) as err:
        config_from_dict(config)
    message = str(err.value)
    assert "\n" not in message and site.split("[")[0] in message and f"{kind} name" in message, message
    return message


@settings(max_examples=40)
@given(site=st.sampled_from(sorted(CONFIG_SITES)), name=bad_names)
def test_a_bad_name_anywhere_in_the_config_is_refused_in_one_line(site, name):
    message = refused_in_config(site, name)
    assert repr(name) in message, message


@settings(max_examples=40)
@given(site=st.sampled_from(sorted(CONFIG_SITES)), name=not_text)
def test_a_name_that_yaml_read_as_no_text_is_refused_with_the_advice_to_quote_it(site, name):
    message = refused_in_config(site, name)
    assert repr(name) in message and "quote it" in message, message


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(Path(p).relative_to(ROOT)))
def test_every_shipped_name_follows_the_rule(path):
    """The rule admits every name a shipped config gives (an overlay alone gives some of them)."""
    raw = yaml.safe_load(Path(path).read_text()) or {}
    names = [n for section in ("models", "pairs", "groups", "methods") for n in raw.get(section) or {}]
    names += list((raw.get("toy") or {}).get("models") or {})
    for name in names:
        assert check_name("name", name) == name


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(root.rglob("*"))
    }


def run(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    return code, err.getvalue()


def cli_sites(out: Path) -> dict[str, tuple[list[str], str]]:
    """Every option that takes a name: (the arguments, ``{}`` where the name goes; the kind the refusal names)."""
    o, config = str(out), ["--config", SMOKE]
    train = ["train", *config, "--seed", "0", "--out", o]
    archive = ["archive", "import", *config, "--format=jsonl", "--in", o, "--out", o]
    return {
        "methods NAME": (["methods", "--", "{}"], "method"),
        "train --method": ([*train, "--method={}", "--models", "smol"], "method"),
        "train --models": ([*train, "--method", "graft", "--models=smol,{}"], "model"),
        "toy model --name": (["toy", "model", *config, "--out", o, "--name={}"], "model"),
        "archive import --model": ([*archive, "--model={}"], "model"),
        "evaluate --model": (["evaluate", *config, "--run", o, "--out-dir", o, "--model={}"], "model"),
        "fetch model --model": (["fetch", "model", "--hub-id", "x/y", "--out", o, *config, "--model={}"], "model"),
        "complementarity --models": (["complementarity", *config, "--models={},smol"], "model"),
        "digest --models": (["digest", "--results", o, "--check", o, "--models=smol,{}"], "model"),
        "digest --cell method": (["digest", "--results", o, "--write", o, "--cell={}/smol/seed0"], "method"),
        "digest --cell cell": (["digest", "--results", o, "--write", o, "--cell=graft/{}/seed0"], "cell"),
    }  # fmt: skip


SITES = sorted(cli_sites(Path("x")))


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(site=st.sampled_from(SITES), name=bad_names.filter(lambda n: "," not in n))  # the comma separates --models
def test_a_bad_name_on_the_command_line_is_refused_in_one_line_and_changes_nothing(site, name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a relative path the command wrote to would land in the tree compared
    (tmp_path / "toy" / "data").mkdir(parents=True, exist_ok=True)
    (tmp_path / "toy" / "data" / "warmup.jsonl").write_text("{}\n")
    before = _tree(tmp_path)
    words, kind = cli_sites(tmp_path / "toy")[site]
    code, err = run([w.replace("{}", name) for w in words])
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert repr(name)[1:-1] in err, err
    if "digest --cell" not in site or "/" not in name:
        assert f"{kind} name" in err, err
    assert _tree(tmp_path) == before


# Each case below went wrong once.


def test_a_toy_model_named_like_a_path_cannot_delete_the_toy_data(tmp_path):
    data = tmp_path / "toy" / "data"
    data.mkdir(parents=True)
    (data / "train.jsonl").write_text("kept\n")
    code, err = run(["toy", "model", "--config", SMOKE, "--out", str(tmp_path / "toy"), "--name", "../data"])
    assert code == 2 and "'../data' is not allowed as a model name" in err, err
    assert (data / "train.jsonl").read_text() == "kept\n"
    config = smoke()
    _toy_models(config, "../data")
    with pytest.raises(ConfigError, match=re.escape("toy.models: '../data' is not allowed as a model name")):
        config_from_dict(config)


@pytest.mark.parametrize("name", ["smol-3b", "smöl", "3b", "a.b"])
def test_a_name_snakemake_would_not_match_is_refused_by_graft_plan(name, tmp_path):
    config = smoke()
    _models(config, name)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True))
    expected = (
        f"graft: error: config.models: {name!r} is not allowed as a model name; expected an ASCII letter, then "
        "letters, digits or _, at most 64 characters\n"
    )
    assert run(["plan", "--config", str(path)]) == (2, expected)


def test_every_name_graft_accepts_is_one_the_workflows_wildcards_match():
    """The Snakefile's wildcard_constraints are NAME_PATTERN: a preset such as GraftD85 that graft plan accepts
    is one Snakemake matches."""
    config = smoke()
    _methods(config, "GraftD85")
    config["workflow"]["ablations"] = ["GraftD85"]
    assert "GraftD85" in config_from_dict(config).methods
    assert re.fullmatch(NAME_PATTERN, "GraftD85") and re.fullmatch(NAME_PATTERN, "smol_from_qwen")


@pytest.mark.parametrize(("key", "read"), [("no", "False"), ("off", "False"), ("0123", "83"), ("~", "None")])
def test_a_model_key_yaml_reads_as_no_text_is_refused_naming_what_it_read(key, read, tmp_path):
    text = Path(SMOKE).read_text().replace("\n  qwen:\n", f"\n  {key}:\n", 1)
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value).startswith(f"config.models: {read} is not a model name: YAML read "), err.value
    assert "quote it" in str(err.value)
    if re.fullmatch(NAME_PATTERN, key):  # quoted, it is text, and a name
        quoted = Path(SMOKE).read_text().replace("[smol, qwen]", f'[smol, "{key}"]')
        for indent in ("\n  ", "\n    "):  # models:, toy.models:
            quoted = quoted.replace(f"{indent}qwen:\n", f'{indent}"{key}":\n')
        path.write_text(quoted.replace("qwen: qwen3}", f'"{key}": qwen3}}'))
        assert key in load_config(path).models


def test_a_pair_may_not_take_a_models_name_nor_one_that_differs_in_case():
    for name in ("smol", "SMOL"):
        config = smoke()
        _pairs(config, name)
        with pytest.raises(ConfigError, match=f"pairs.{name}: the same name as models.smol"):
            config_from_dict(config)


def test_a_user_preset_may_not_take_a_built_in_presets_name(tmp_path):
    config = smoke()
    config["methods"] = {"graft": {"base": "graft", "delta": 0.5}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    expected = (
        "graft: error: methods.graft: the same name as the built-in preset graft; a user preset needs a name of its "
        "own (graft methods lists the built-in ones)\n"
    )
    for argv in (["plan", "--config", str(path)], ["methods", "--config", str(path)]):
        assert run(argv) == (2, expected)
    config["methods"] = {"base": {"base": "graft"}}
    with pytest.raises(ConfigError, match=re.escape("methods.base: the same name as the directory of the base")):
        config_from_dict(config)
