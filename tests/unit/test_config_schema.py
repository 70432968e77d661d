"""The workflow's JSON schema knows every section of RunConfig, so a valid config is not refused by Snakemake."""

import dataclasses
from pathlib import Path

import yaml
from snakemake.utils import validate

from graft.config import RunConfig

SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"


def test_every_config_section_is_in_the_schema():
    schema = yaml.safe_load(SCHEMA.read_text())
    assert {f.name for f in dataclasses.fields(RunConfig)} == set(schema["properties"])


def test_a_config_with_tracking_and_deepspeed_passes_the_schema():
    config = yaml.safe_load((SCHEMA.parents[2] / "config" / "paper.yaml").read_text())
    config["logging"] = {"backends": ["jsonl", "tensorboard"], "wandb_project": "graft"}
    config["scale"] = {**config.get("scale", {}), "engine": "deepspeed", "zero_stage": 3}
    validate(config, str(SCHEMA))


def test_a_per_model_learning_rate_passes_the_schema():
    config = yaml.safe_load((SCHEMA.parents[2] / "config" / "config.yaml").read_text())
    config["models"]["smol"]["lr"] = 6e-5
    validate(config, str(SCHEMA))
