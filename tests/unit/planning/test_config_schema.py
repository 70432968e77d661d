"""The workflow's JSON schema is generated from RunConfig's dataclasses and committed as generated, so the two cannot
disagree; every shipped config passes it; and graft.config imports nothing above its layer."""

import ast
from pathlib import Path

import pytest
import yaml
from snakemake.utils import validate

import graft.config
from graft.planning.config_schema import SCHEMA_PATH, render

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = ROOT / SCHEMA_PATH
CONFIGS = sorted([*(ROOT / "config").glob("*.yaml"), *(ROOT / "bench" / "results").glob("*.config.yaml")])


def test_the_committed_schema_is_the_one_the_dataclasses_generate():
    assert SCHEMA.read_text() == render(), "regenerate it: python -m graft.planning.config_schema > " + SCHEMA_PATH


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_config_passes_the_schema(path):
    validate(yaml.safe_load(path.read_text()), str(SCHEMA))


@pytest.mark.parametrize("path", sorted((ROOT / "config" / "overlays").glob("*.yaml")), ids=lambda p: p.name)
def test_every_overlay_on_the_default_passes_the_schema_and_the_dataclasses(path):
    """An overlay is a second --configfile on config/config.yaml, merged key by key as Snakemake merges them."""
    from graft.config import config_from_dict

    def merged(base, overlay):
        out = dict(base)
        for key, value in overlay.items():
            nested = isinstance(value, dict) and isinstance(out.get(key), dict)
            out[key] = merged(out[key], value) if nested else value
        return out

    config = merged(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()), yaml.safe_load(path.read_text()))
    validate(config, str(SCHEMA))
    config_from_dict(config)


def test_an_unknown_field_fails_the_schema_as_it_fails_the_dataclasses():
    config = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    config["train"]["steps_per_epoch"] = 3
    with pytest.raises(Exception, match="steps_per_epoch"):
        validate(config, str(SCHEMA))


def test_a_config_with_tracking_and_deepspeed_passes_the_schema():
    config = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    config["logging"] = {"backends": ["jsonl", "tensorboard"], "wandb_project": "graft"}
    config["scale"] = {**config.get("scale", {}), "engine": "deepspeed", "zero_stage": 3}
    validate(config, str(SCHEMA))


def test_config_imports_no_layer_above_it():
    modules = sorted(Path(graft.config.__file__).parent.glob("*.py"))
    assert len(modules) == 9  # the package, its seven section modules and the GPU table (gpus.py)
    imported = {
        node.module
        for module in modules
        for node in ast.walk(ast.parse(module.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module.startswith("graft")
    }
    inside = {name for name in imported if name.startswith("graft.config.")}
    assert imported - inside <= {"graft.errors", "graft.names", "graft.paths", "graft.typed_config", "graft.methods"}, (
        imported
    )


def _properties(schema: dict, where: str = ""):
    """Every property of the schema, nested sections and the values of mappings included, with its path."""
    for name, prop in schema.get("properties", {}).items():
        yield f"{where}{name}", prop
        yield from _properties(prop, f"{where}{name}.")
        for inner in ("additionalProperties", "items"):
            if isinstance(prop.get(inner), dict):
                yield from _properties(prop[inner], f"{where}{name}.*.")


def test_every_property_is_described_in_full_sentences():
    """Each field's whole docstring, not its first sentence cut at a full stop (which cut "e.g." short)."""
    schema = yaml.safe_load(render())
    found = list(_properties(schema))
    assert len(found) > 100
    undescribed = [path for path, prop in found if not prop.get("description")]
    assert undescribed == []
    cut = [path for path, prop in found if prop["description"].endswith(("e.g", "i.e"))]
    assert cut == []


def test_a_user_preset_with_a_bad_switch_is_refused_when_the_config_loads():
    from graft.config import config_from_dict
    from graft.errors import ConfigError

    data = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())
    data["methods"] = {"graft_bad": {"base": "graft", "delta": "high"}}
    with pytest.raises(ConfigError, match=r"methods\.graft_bad"):
        config_from_dict(data)
