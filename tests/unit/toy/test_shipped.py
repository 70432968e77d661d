"""Which toy models are copied from the shipped ones: only where every setting equals the shipped model's and its
files have their recorded digests; any other setting builds, a damaged file is refused. No warm-up runs here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from graft.config import load_config
from graft.errors import ConfigError
from graft.numerics import PIN_VARIABLE
from graft.toy import build as toy_build
from graft.toy.shipped import (
    MANIFEST,
    SHIPPED_ROOT,
    build_settings,
    choose,
    model_settings,
    settings_digest,
    sha256_file,
)
from graft.toy.world import build_world

ROOT = Path(__file__).resolve().parents[3]
DEFAULT = ROOT / "config" / "config.yaml"


def _config(*settings):
    return load_config(DEFAULT, list(settings))


def _world(tmp_path: Path, threads: int = 1) -> tuple[Path, Path]:
    """A toy root with warm-up data, and a shipped root whose model ``smol`` was built from the default's settings
    on that data (its files stand-ins: the logic reads their digests, not their weights)."""
    toy = tmp_path / "toy"
    (toy / "data").mkdir(parents=True)
    (toy / "data" / "warmup.jsonl").write_text("")
    shipped = tmp_path / "shipped"
    (shipped / "smol").mkdir(parents=True)
    files = {"model.safetensors": b"weights", "tokenizer.json": b"{}", "config.json": b"{}"}
    for name, data in files.items():
        (shipped / "smol" / name).write_bytes(data)
    settings = build_settings(_config(), "smol", toy / "data" / "warmup.jsonl", threads)
    entry = {**settings, "settings_sha256": settings_digest(settings)}
    entry["files"] = {name: sha256_file(shipped / "smol" / name) for name in files}
    manifest = {"format": 1, "built_on": {"cpu": "AMD EPYC", "vendor": "amd"}, "models": {"smol": entry}}
    (shipped / MANIFEST).write_text(json.dumps(manifest))
    return toy, shipped


def _choose(config, toy: Path, shipped: Path, threads: int = 1):
    return choose(config, "smol", build_settings(config, "smol", toy / "data" / "warmup.jsonl", threads), shipped)


def test_equal_settings_copy_the_shipped_model_without_a_warm_up(tmp_path, monkeypatch):
    toy, shipped = _world(tmp_path)
    directory, why = _choose(_config(), toy, shipped)
    assert directory == shipped / "smol" and "equal" in why and "AMD EPYC" in why

    def no_warm_up(*args, **kwargs):
        raise AssertionError("a shipped model was warmed up")

    monkeypatch.setattr(toy_build, "build_toy_model", no_warm_up)
    events = []
    log = lambda e, **f: events.append(e)  # noqa: E731
    summary = build_world(_config(), "model", toy, "smol", log, shipped_root=shipped, threads=1)
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert (toy / "models" / "smol" / name).read_bytes() == (shipped / "smol" / name).read_bytes()
    assert summary["smol"]["shipped"] == str(shipped / "smol") and events == ["toy_model_shipped"]


def test_copying_a_shipped_model_does_not_load_torch(tmp_path):
    """The workflow's toy_model jobs of the main job copy: they take about a second where loading torch took four."""
    toy, shipped = _world(tmp_path)
    script = (
        "import sys; from pathlib import Path; from graft.config import load_config; "
        "from graft.toy.world import build_world; "
        f"build_world(load_config({str(DEFAULT)!r}), 'model', Path({str(toy)!r}), 'smol', "
        f"shipped_root=Path({str(shipped)!r}), threads=1); "
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]" and (toy / "models" / "smol" / "model.safetensors").read_bytes() == b"weights"


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        (("toy.seed", 1), "toy.seed 1 (shipped: 0)"),
        (("toy.models.smol.steps", 1499), "toy.models.smol.steps 1499 (shipped: 1500)"),
        (("toy.models.smol.vocab_size", 401), "toy.models.smol.vocab_size"),
        (("toy.mismatch", 0.5), "toy.mismatch 0.5 (shipped: 0.0)"),
        (("models.smol.template", "{problem} =\n"), "models.smol.template"),
    ],
)
def test_any_setting_that_differs_builds_and_says_which(tmp_path, setting, named):
    toy, shipped = _world(tmp_path)
    directory, why = _choose(_config(setting), toy, shipped)
    assert directory is None and named in why


def test_other_warm_up_data_threads_or_numerics_build(tmp_path, monkeypatch):
    toy, shipped = _world(tmp_path)
    assert "threads 2 (shipped: 1" in _choose(_config(), toy, shipped, threads=2)[1]
    monkeypatch.setenv(PIN_VARIABLE, "native")
    assert "GRAFT_CPU_NUMERICS native" in _choose(_config(), toy, shipped)[1]
    monkeypatch.delenv(PIN_VARIABLE)
    (toy / "data" / "warmup.jsonl").write_text("{}\n")
    directory, why = _choose(_config(), toy, shipped)
    assert directory is None and "warm-up data" in why


def test_the_switch_off_no_manifest_or_no_entry_builds(tmp_path):
    toy, shipped = _world(tmp_path)
    assert _choose(_config(("toy.shipped_models", False)), toy, shipped) == (None, "toy.shipped_models is false")
    settings = build_settings(_config(), "qwen", toy / "data" / "warmup.jsonl", 1)
    assert choose(_config(), "qwen", settings, shipped)[0] is None
    assert choose(_config(), "smol", settings, tmp_path / "nowhere")[0] is None


@pytest.mark.parametrize("damage", ["edited", "missing"])
def test_a_damaged_shipped_file_is_refused_in_one_line(tmp_path, damage):
    toy, shipped = _world(tmp_path)
    weights = shipped / "smol" / "model.safetensors"
    if damage == "edited":
        weights.write_bytes(b"weightz")
    else:
        weights.unlink()
    with pytest.raises(ConfigError) as refusal:
        _choose(_config(), toy, shipped)
    message = str(refusal.value)
    assert "\n" not in message and str(weights) in message and "toy.shipped_models: false" in message
    # with the switch off the model is built, shipped files unread
    assert _choose(_config(("toy.shipped_models", False)), toy, shipped)[0] is None


def test_a_broken_manifest_is_refused_in_one_line(tmp_path):
    toy, shipped = _world(tmp_path)
    (shipped / MANIFEST).write_text("{not json")
    with pytest.raises(ConfigError, match="manifest"):
        _choose(_config(), toy, shipped)


def test_the_shipped_models_are_the_default_worlds_and_its_digest_records():
    """The repository's toy-models/: every file has its recorded digest, each model was built from the default's
    settings on the warm-up data the digest record holds, and its weights and tokenizer are the record's of the CPU
    vendor that built them."""
    manifest = json.loads((SHIPPED_ROOT / MANIFEST).read_text())
    config = _config()
    vendor = manifest["built_on"]["vendor"]
    record_path = ROOT / "config" / "digests" / ("default.json" if vendor == "amd" else f"default.{vendor}.json")
    record = json.loads(record_path.read_text())
    assert sorted(manifest["models"]) == sorted(config.toy.models)
    for name, entry in manifest["models"].items():
        for file, digest in entry["files"].items():
            assert sha256_file(SHIPPED_ROOT / name / file) == digest, f"toy-models/{name}/{file}"
        assert entry["settings"] == model_settings(config, name)
        assert entry["threads"] == config.workflow.build_threads and entry["numerics"] == "avx2"
        assert entry["warmup_sha256"] == record["toy"]["data"]["warmup.jsonl"]
        settings = {k: entry[k] for k in ("settings", "warmup_sha256", "threads", "numerics")}
        assert entry["settings_sha256"] == settings_digest(settings)
        for file in ("model.safetensors", "tokenizer.json"):
            assert entry["files"][file] == record["toy"]["models"][name][file], f"{name}/{file}"
