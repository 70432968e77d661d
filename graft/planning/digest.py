"""Fingerprints of a results tree, to tell whether this machine reproduces a checked-in one digit for digit.

``graft digest --write`` records, for the toy world and one training cell: the SHA-256 of every toy data file,
of every toy model's weights and tokenizer (and each tensor's SHA-256 and norm, so a mismatch says which tensors
moved and by how much), the cell's training metrics without their timings, and the pass@1 of each of its
checkpoint evaluations with a hash of the whole file. ``graft digest --check`` compares a tree with such a
record and prints one line per difference: the file, what differs, the expected and found values. CI runs it on
its fresh clone against ``config/digests/default.json``; a user who reruns the miniature can run it too.

What decides the digits is the CPU numerics pin (graft.numerics), the thread counts of the config and the
library versions; the record keeps them and the check names those that differ when it fails.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from graft.errors import ConfigError
from graft.results import TIMING_METRICS, ResultsTree

FORMAT = 1
VERSIONED = ("torch", "transformers", "tokenizers", "safetensors")
"""The libraries whose versions can move the digits (kernels, tokenizer training, serialisation)."""


def _version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tensors(path: Path) -> dict[str, dict]:
    from safetensors.torch import load_file

    out = {}
    for name, tensor in sorted(load_file(path).items()):
        digest = hashlib.sha256(tensor.contiguous().numpy().tobytes()).hexdigest()
        out[name] = {"sha256": digest[:16], "norm": float(tensor.double().norm())}
    return out


def toy_world(tree: ResultsTree) -> dict:
    """The toy data files' hashes, and per model the weights file, tokenizer and per-tensor fingerprints."""
    data_root = tree.toy / "data"
    data = {str(p.relative_to(data_root)): _sha256(p) for p in sorted(data_root.rglob("*.jsonl"))}
    models = {}
    for weights in sorted((tree.toy / "models").glob("*/model.safetensors")):
        directory = weights.parent
        models[directory.name] = {
            "model.safetensors": _sha256(weights),
            "tokenizer.json": _sha256(directory / "tokenizer.json"),
            "tensors": _tensors(weights),
        }
    return {"data": data, "models": models}


def training_cell(tree: ResultsTree, method: str, cell: str, seed: int) -> dict:
    """One cell's metrics (timings left out: they are the clock's) and its checkpoint evaluations."""
    run = tree.run(method, cell, seed)
    rows = [json.loads(line) for line in run.metrics.read_text().splitlines() if line]
    evaluations = {}
    root = tree.eval_dir(method, cell, seed)
    for path in sorted(root.glob("*/step_*.json")):
        result = json.loads(path.read_text())
        result.pop("checkpoint", None)  # a path: differs between clones
        result.pop("checkpoint_sha256", None)  # its files' bytes: their config.json names the library's version
        text = json.dumps(result, sort_keys=True)
        scores = {name: b["pass@1"] for name, b in sorted(result["benchmarks"].items())}
        evaluations[str(path.relative_to(root))] = {"sha256": hashlib.sha256(text.encode()).hexdigest(), **scores}
    return {
        "method": method,
        "cell": cell,
        "seed": seed,
        "metrics": [{k: v for k, v in r.items() if k not in TIMING_METRICS} for r in rows],
        "evaluations": evaluations,
    }


def record(tree: ResultsTree, method: str, cell: str, seed: int) -> dict:
    """The fingerprint ``--write`` stores: toy world, one cell, and what decided the digits where it was made."""
    for needed in (tree.toy / "models", tree.run(method, cell, seed).done):
        if not needed.exists():
            raise ConfigError(f"--results: {str(needed)!r} is missing; run the main job (or its cell) first")
    run_json = json.loads(tree.run(method, cell, seed).run_json.read_text())
    return {
        "format": FORMAT,
        "numerics": run_json.get("numerics", {}),
        "versions": {name: _version(name) for name in VERSIONED},
        "toy": toy_world(tree),
        "cell": training_cell(tree, method, cell, seed),
    }


def _flat(prefix: str, value) -> dict[str, object]:
    if isinstance(value, dict):
        return {k: v for key, sub in value.items() for k, v in _flat(f"{prefix}/{key}", sub).items()}
    return {prefix: value}


def _metric_differences(expected: list[dict], found: list[dict]) -> list[str]:
    if len(expected) != len(found):
        return [f"metrics.jsonl: {len(found)} rows, expected {len(expected)}"]
    for want, got in zip(expected, found, strict=True):
        keys = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
        if keys:
            where = f"step {want.get('step')} model {want.get('model')}"
            shown = ", ".join(f"{k} {got.get(k)!r} (expected {want.get(k)!r})" for k in keys[:3])
            return [f"metrics.jsonl: first difference at {where}: {shown}"]
    return []


def checked_models(expected: dict, names: list[str] | None) -> list[str]:
    """The toy models a check compares: ``names`` (each must be in the record), or all the record's."""
    recorded = sorted(expected["toy"]["models"])
    if names is None:
        return recorded
    unknown = [name for name in names if name not in recorded]
    if unknown or not names:
        raise ConfigError(f"--models: {', '.join(unknown) or 'none given'}; the record's models: {', '.join(recorded)}")
    return sorted(names)


def differences(expected: dict, found: dict, models: list[str] | None = None) -> list[str]:
    """One line per differing thing, most telling first: data, model weights (with the tensors that moved and
    their norms), metrics (the first differing row), evaluations (pass@1 per benchmark). ``models``: compare only
    these toy models (``checked_models``), for a tree that built only some of them."""
    lines = []
    for path in sorted(set(expected["toy"]["data"]) | set(found["toy"]["data"])):
        if expected["toy"]["data"].get(path) != found["toy"]["data"].get(path):
            lines.append(f"toy/data/{path}: different bytes (the data is integer arithmetic: check the toy: section)")
    compared = set(expected["toy"]["models"]) | set(found["toy"]["models"]) if models is None else set(models)
    for model in sorted(compared):
        want, got = expected["toy"]["models"].get(model), found["toy"]["models"].get(model)
        if want is None or got is None:
            lines.append(f"toy/models/{model}: {'not expected' if want is None else 'missing'}")
            continue
        if want["tokenizer.json"] != got["tokenizer.json"]:
            lines.append(f"toy/models/{model}/tokenizer.json: different bytes")
        if want["model.safetensors"] != got["model.safetensors"]:
            moved = [n for n in want["tensors"] if want["tensors"][n] != got["tensors"].get(n)]
            shown = "; ".join(
                f"{n} norm {got['tensors'].get(n, {}).get('norm')!r} (expected {want['tensors'][n]['norm']!r})"
                for n in moved[:2]
            )
            lines.append(
                f"toy/models/{model}/model.safetensors: {len(moved)} of {len(want['tensors'])} tensors differ: {shown}"
            )
    cell = expected["cell"]
    where = f"runs/{cell['method']}/{cell['cell']}/seed{cell['seed']}"
    lines += [f"{where}/{line}" for line in _metric_differences(cell["metrics"], found["cell"]["metrics"])]
    for path in sorted(set(cell["evaluations"]) | set(found["cell"]["evaluations"])):
        want, got = cell["evaluations"].get(path, {}), found["cell"]["evaluations"].get(path, {})
        if want.get("sha256") != got.get("sha256"):
            scores = ", ".join(f"{k} {got.get(k)!r} (expected {v!r})" for k, v in want.items() if k != "sha256")
            lines.append(
                f"eval/{cell['method']}/{cell['cell']}/seed{cell['seed']}/{path}: differs: {scores or 'missing'}"
            )
    return lines


def settings_hint(expected: dict, found: dict) -> str:
    """What to look at when digits differ: the numerics of both sides where they differ, else the versions."""
    sides = [
        {"numerics": record.get("numerics", {}), "versions": record.get("versions", {})} for record in (expected, found)
    ]
    want, got = _flat("", sides[0]), _flat("", sides[1])
    differing = [k for k in sorted(set(want) | set(got)) if want.get(k) != got.get(k) and k != "/numerics/cpu"]
    if differing:
        shown = "; ".join(f"{k.lstrip('/')} here {got.get(k)!r}, recorded {want.get(k)!r}" for k in differing)
        return f"settings differ from the record's: {shown} (the pin: graft/numerics.py, GRAFT_CPU_NUMERICS)"
    return (
        "the numerics pin, threads and versions equal the record's: a code or dependency change moved the digits; "
        "if intended, rewrite the record with graft digest --write"
    )


def read_record(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"--check: {str(path)!r} does not exist") from None
    except json.JSONDecodeError as err:
        raise ConfigError(f"--check: {str(path)!r} is not JSON ({err.msg} at line {err.lineno})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not {"toy", "cell"} <= data.keys():
        raise ConfigError(f"--check: {str(path)!r} is not a digest record of format {FORMAT} (graft digest --write)")
    return data
