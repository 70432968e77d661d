"""The default world's warmed-up toy models, shipped with the project as the paper's base models are downloaded.

``toy-models/`` holds the three models of toy seed 0 as ``config/config.yaml`` builds them (rule toy_model: one
thread, the numerics pin), with ``manifest.json``: where they were built (the CPU: under the same pin an AMD EPYC
and an Intel Xeon give different bits, docs/reproducibility.md), and per model the settings it was built from (its
toy rule params, the warm-up data's SHA-256, the thread count and the numerics mode), their digest, and the SHA-256
of each of its files. ``graft toy model`` copies a shipped model instead of warming one up when, and only when,
``toy.shipped_models`` is on, this config's settings for the model equal the recorded ones, and every shipped file
has its recorded digest; any other world (another toy seed, spec, mismatch or data) builds its own. A shipped file
that does not match its digest is refused with one line, never copied.

``python -m graft.toy.shipped --config config/config.yaml --from results/default/toy --threads 1 --out toy-models``
writes the directory and its manifest from a tree whose models the toy_model rule built.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
from dataclasses import asdict
from pathlib import Path

from graft.config import RunConfig, load_config
from graft.errors import ConfigError
from graft.numerics import PIN_VARIABLE, cpu_model, cpu_vendor
from graft.results import begin_dir, commit_dir, write_text

SHIPPED_ROOT = Path(__file__).resolve().parents[2] / "toy-models"
"""The repository's shipped models (next to ``graft/``); absent where the package was installed without it."""
MANIFEST = "manifest.json"
FORMAT = 1
NOT_BUILT_FROM = ("lr", "path", "hub_id")
"""A model entry's RL learning rate and where the model is stored or downloaded from: no part of its build."""
SETTING_NAMES = ("toy.models.{name}", "models.{name}", "toy.seed", "toy.mismatch")
"""What each item of ``model_settings`` is, for the line that says which one differs."""


def model_settings(config: RunConfig, name: str) -> list:
    """What toy model ``name`` computes from in the config: its toy entry, its model entry but the RL learning rate
    and where it is stored, the world's seed and how much each model writes in its own dialect (the toy_model
    rule's params are this list, graft.workflow.reruns.toy_model_params)."""
    if config.toy is None:
        raise ConfigError("toy: this config has no 'toy:' section to build from")
    spec = {k: v for k, v in asdict(config.models[name]).items() if k not in NOT_BUILT_FROM}
    return json.loads(json.dumps([asdict(config.toy.models[name]), spec, config.toy.seed, config.toy.mismatch]))


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_settings(config: RunConfig, name: str, warmup_file: Path, threads: int) -> dict:
    """Everything a toy model's bytes follow from on one CPU vendor: its settings, the warm-up data it draws from,
    the thread count (float sums are split by threads) and the numerics mode (graft.numerics)."""
    return {
        "settings": model_settings(config, name),
        "warmup_sha256": sha256_file(warmup_file),
        "threads": threads,
        "numerics": os.environ.get(PIN_VARIABLE, "avx2"),
    }


def settings_digest(settings: dict) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()


def read_manifest(root: Path) -> dict | None:
    """The shipped models' manifest; None where there is none. A manifest that cannot be read is refused."""
    path = root / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(
            f"toy models: {str(path)!r} is not a shipped-models manifest ({err}); restore it "
            "(git checkout -- toy-models) or build the models (toy.shipped_models: false)"
        ) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or "models" not in manifest:
        raise ConfigError(
            f"toy models: {str(path)!r} is not a shipped-models manifest of format {FORMAT}; restore it "
            "(git checkout -- toy-models) or build the models (toy.shipped_models: false)"
        )
    return manifest


def _differences(want: dict, got: dict, name: str) -> list[str]:
    """The settings that differ between the shipped model's (``want``) and this build's (``got``)."""
    out = []
    for label, was, now in zip(SETTING_NAMES, want.get("settings", []), got["settings"], strict=False):
        label = label.format(name=name)
        if was == now:
            continue
        if isinstance(was, dict) and isinstance(now, dict):
            keys = sorted(k for k in set(was) | set(now) if was.get(k) != now.get(k))
            out += [f"{label}.{k} {json.dumps(now.get(k))} (shipped: {json.dumps(was.get(k))})" for k in keys]
        else:
            out.append(f"{label} {json.dumps(now)} (shipped: {json.dumps(was)})")
    if len(want.get("settings", [])) != len(got["settings"]):
        out.append("the settings' format")
    if want.get("warmup_sha256") != got["warmup_sha256"]:
        out.append("the warm-up data (toy/data/warmup.jsonl)")
    if want.get("threads") != got["threads"]:
        out.append(f"threads {got['threads']} (shipped: {want.get('threads')}; workflow.build_threads, --threads)")
    if want.get("numerics") != got["numerics"]:
        out.append(f"{PIN_VARIABLE} {got['numerics']} (shipped: {want.get('numerics')})")
    return out


def choose(config: RunConfig, name: str, settings: dict, root: Path = SHIPPED_ROOT) -> tuple[Path | None, str]:
    """Whether toy model ``name`` is copied from ``root`` (``build_settings`` of this build: ``settings``): the
    shipped model's directory and why, or None and why it is built. Refuses, with one line, a shipped model whose
    settings match but whose files do not have their recorded digests."""
    if config.toy is not None and not config.toy.shipped_models:
        return None, "toy.shipped_models is false"
    manifest = read_manifest(root)
    if manifest is None:
        return None, f"no shipped models in {str(root)!r}"
    entry = manifest["models"].get(name)
    if entry is None:
        return None, f"no shipped model {name!r} in {str(root)!r}"
    differ = _differences(entry, settings, name)
    if differ:
        return None, f"its settings are not the shipped model's: {'; '.join(differ[:3])}"
    directory = root / name
    for file, digest in sorted(entry["files"].items()):
        path = directory / file
        found = sha256_file(path) if path.is_file() else None
        if found != digest:
            what = "is missing" if found is None else f"has SHA-256 {found[:16]}..."
            raise ConfigError(
                f"toy model {name}: the shipped {str(path)!r} {what}, its manifest records {digest[:16]}... (a "
                "damaged or incomplete checkout); restore it (git checkout -- toy-models) or build the model "
                "(toy.shipped_models: false)"
            )
    built_on = manifest.get("built_on", {}).get("cpu", "a machine not recorded")
    return directory, f"its settings equal the shipped model's (built on {built_on})"


def copy_shipped(directory: Path, files: dict[str, str], out: Path) -> None:
    """The shipped model's files into ``out``, atomically, each checked against its digest as it is copied."""
    tmp = begin_dir(out)
    for file, digest in sorted(files.items()):
        data = (directory / file).read_bytes()
        if hashlib.sha256(data).hexdigest() != digest:
            shutil.rmtree(tmp, ignore_errors=True)
            raise ConfigError(f"toy model: the shipped {str(directory / file)!r} changed while it was copied")
        (tmp / file).write_bytes(data)
    commit_dir(tmp, out)


def write_shipped(config: RunConfig, toy_root: Path, threads: int, out: Path) -> dict:
    """``out``: a copy of every toy model built under ``toy_root/models`` and the manifest that lets ``graft toy
    model`` use them (``threads``: the thread count they were built with). Returns the manifest."""
    if config.toy is None:
        raise ConfigError("toy: this config has no 'toy:' section")
    warmup = toy_root / "data" / "warmup.jsonl"
    models = {}
    for name in config.toy.models:
        built = toy_root / "models" / name
        if not (built / "model.safetensors").is_file():
            raise ConfigError(f"--from: {str(built)!r} holds no built model; run the toy_model rule first")
        settings = build_settings(config, name, warmup, threads)
        # the files save_pretrained wrote (Snakemake marks a directory output with a hidden timestamp file)
        files = {p.name: sha256_file(p) for p in sorted(built.iterdir()) if p.is_file() and not p.name.startswith(".")}
        models[name] = {**settings, "settings_sha256": settings_digest(settings), "files": files}
    manifest = {
        "format": FORMAT,
        "about": f"toy seed {config.toy.seed}'s warmed-up models as the toy_model rule built them; "
        "graft/toy/shipped.py uses them where a config's settings equal these",
        "built_on": {"cpu": cpu_model(), "vendor": cpu_vendor()},
        "versions": _versions(),
        "models": models,
    }
    tmp = begin_dir(out)
    for name in models:
        (tmp / name).mkdir()
        for file in models[name]["files"]:
            shutil.copyfile(toy_root / "models" / name / file, tmp / name / file)
    write_text(tmp / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    commit_dir(tmp, out)
    return manifest


def _versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for name in ("torch", "transformers", "tokenizers", "safetensors"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="Write the shipped toy models and their manifest from a built tree.")
    parser.add_argument("--config", type=Path, required=True, help="the config the models were built with")
    parser.add_argument("--from", dest="toy_root", type=Path, required=True, help="the tree's toy root")
    parser.add_argument("--threads", type=int, required=True, help="the threads the toy_model jobs ran with")
    parser.add_argument("--out", type=Path, default=SHIPPED_ROOT)
    args = parser.parse_args()
    manifest = write_shipped(load_config(args.config), args.toy_root, args.threads, args.out)
    for name, entry in manifest["models"].items():
        print(f"{name}: model.safetensors {entry['files']['model.safetensors']}")


if __name__ == "__main__":
    main()
