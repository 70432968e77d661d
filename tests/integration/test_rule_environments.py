"""Every package a workflow rule's command imports is installed by the install step of the environment the rule runs in.

For each shipped config, Snakemake parses the workflow and lists its rules. A rule's command (``graft fetch dataset``,
``torchrun ... -m graft.cli train``) names a handler of graft's command line; every graft module that handler (or a
helper of the command line it calls) imports, and every module those import (at module level or inside a function), is
read with ``ast``, and each third-party import name is mapped to its distribution
(``importlib.metadata.packages_distributions``). The environment a rule runs in is ``workflow.environment``'s install
script where the config names one (every job's commands run from its ``bin/``), else the README's venv and the rule's
conda file. Each is an install step of this repository, read as written: pip's arguments, the project's extras, and the
requirements those pull in (from the installed distributions' metadata). The walk covers every function of a reached
module, more than a run executes: imports of the ``gpu`` and ``tracking`` extras (vLLM, DeepSpeed, TensorBoard, W&B) are
made only when the config selects them, which refuses with one line where they are absent, so an environment without
those extras is not asked for them.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata as md
import json
import re
import shlex
import sys
import tempfile
import tomllib
from functools import cache
from pathlib import Path

import pytest
import yaml
from helpers.workflow_dir import run_in
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import graft.cli

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted((ROOT / "config").glob("*.yaml"))
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# Selected by the config and refused with one line when missing (graft.engine.vllm, graft.engine.deepspeed_engine,
# graft.services.tracking): an environment without the extra never runs the import.
CONFIG_SELECTED_EXTRAS = ("gpu", "tracking")

RULES = """
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings, StorageSettings
def launcher(rule):
    # the training rule's launcher (a function of the job's resources), as a one-node job without Slurm gets it
    make = rule.params.get("launcher") if hasattr(rule.params, "get") else None
    return {"launcher": make(None, {}, 1)} if callable(make) else {}
out = {}
for configfile in sys.argv[1:]:
    with SnakemakeApi(OutputSettings()) as api:
        workflow = api.workflow(
            resource_settings=ResourceSettings(),
            config_settings=ConfigSettings(configfiles=[Path(configfile)]),
            storage_settings=StorageSettings(),
            snakefile=Path("Snakefile"),
            workdir=Path("."),
        )._workflow
        out[configfile] = {
            rule.name: {
                "shell": rule.shellcmd,
                "conda": str(rule.conda_env) if rule.conda_env else None,
                "params": {k: v for k, v in rule.params.items() if isinstance(v, str)} | launcher(rule),
            }
            for rule in workflow.rules
        }
print(json.dumps(out))
"""


@cache
def workflow_rules() -> dict[str, dict]:
    """Each shipped config's rules: shell command, conda file and the params that are plain strings (the training
    rule's launcher computed for a one-node job). Snakemake parses the workflow in a directory of its own."""
    with tempfile.TemporaryDirectory() as where:
        proc = run_in(Path(where), sys.executable, "-c", RULES, *CONFIGS, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --- what an install step installs


def project_requirements(extras: set[str]) -> list[str]:
    unknown = extras - set(PYPROJECT["optional-dependencies"])
    assert not unknown, f"an install step asks for extras that pyproject.toml lacks: {sorted(unknown)}"
    return [*PYPROJECT["dependencies"], *(r for e in sorted(extras) for r in PYPROJECT["optional-dependencies"][e])]


def pip_arguments(words: list[str], project: str) -> tuple[bool, set[str], list[str]]:
    """(whether it installs the project, the project's extras, the other requirements) of one pip install's
    arguments. ``project``: how the step names the repository (``.`` from its root, ``..`` from envs/)."""
    installs_project, extras, others, skip = False, set(), [], False
    for word in words:
        if skip:
            skip = False
        elif word in ("-c", "-r", "--extra-index-url", "--index-url"):
            skip = True
        elif match := re.fullmatch(re.escape(project) + r"(?:\[([a-z0-9_,-]+)\])?", word):
            installs_project = True
            extras |= set(filter(None, (match.group(1) or "").split(",")))
        elif not word.startswith("-"):
            others.append(word)
    return installs_project, extras, others


def install_requirements(commands: list[list[str]], project: str, what: str) -> list[str]:
    """What a list of pip installs' arguments installs, the project's requirements with its extras included."""
    requirements, found = [], False
    for words in commands:
        installs_project, extras, others = pip_arguments(words, project)
        found |= installs_project
        requirements += (project_requirements(extras) if installs_project else []) + others
    assert found, f"{what} installs no graft package"
    return requirements


def shell_install(text: str, what: str) -> list[str]:
    """What the ``pip install`` commands of a shell text install (one a line; comments left out)."""
    commands = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    found = re.findall(r"pip\"?\s+install\s+([^\n&|;]+)", commands)
    return install_requirements([shlex.split(c) for c in found], ".", what)


def conda_install(path: Path) -> list[str]:
    """What a conda environment file's pip section installs (pip runs from envs/: the repository is ``..``)."""
    pip = next(d["pip"] for d in yaml.safe_load(path.read_text())["dependencies"] if isinstance(d, dict))
    return install_requirements([[w for line in pip for w in shlex.split(line)]], "..", path.name)


def readme_install() -> list[str]:
    """The README's venv, in which Snakemake runs (and every job, without workflow.environment or conda)."""
    line = next(line for line in (ROOT / "README.md").read_text().splitlines() if "snakemake --cores" in line)
    return shell_install(line, "the README's command that runs Snakemake")


def environment_of(name: str) -> tuple[str, list[str]]:
    """The script that builds ``workflow.environment: name`` (its default folder), and what it installs."""
    for script in sorted((ROOT / "requirements").glob("*.sh")):
        text = script.read_text()
        if re.search(r"\$\{1:-" + re.escape(name) + r"\}", text):
            return f"requirements/{script.name}", shell_install(text, script.name)
    pytest.fail(f"workflow.environment {name!r}: no script under requirements/ builds it by default")


@cache
def installed_requires(name: str) -> tuple[str, ...]:
    try:
        return tuple(md.requires(name) or ())
    except md.PackageNotFoundError:
        return ()


def reachable(requirements: list[str]) -> set[str]:
    """Every distribution the requirements pull in, through the requirements of those installed here (one that is
    not, such as vLLM, counts only itself)."""
    seen, todo = set(), [(Requirement(r), frozenset()) for r in requirements]
    while todo:
        req, extras = todo.pop()
        if req.marker is not None and not any(
            req.marker.evaluate({**default_environment(), "extra": e}) for e in (extras or {""})
        ):
            continue
        name = canonicalize_name(req.name)
        key = (name, frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        todo += [(Requirement(r), frozenset(req.extras)) for r in installed_requires(name)]
    return {name for name, _ in seen}


def exempt(requirements: list[str]) -> set[str]:
    """The distributions of the config-selected extras that these requirements leave out."""
    names = reachable(requirements)
    return {
        canonicalize_name(Requirement(r).name)
        for extra in CONFIG_SELECTED_EXTRAS
        for r in PYPROJECT["optional-dependencies"][extra]
        if canonicalize_name(Requirement(r).name) not in names
    }


# --- what a command imports


def handler(words: list[str]):
    """The function graft's command line calls for ``words`` (``["fetch", "dataset"]``)."""
    parser = graft.cli.build_parser()
    for word in words:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return parser.get_default("func")


def imported_names(tree: ast.AST, module: str, package: bool) -> set[str]:
    """Absolute names of every import in ``tree``, wherever it stands (function-local ones too)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")[: len(module.split(".")) - node.level + package]
                base = ".".join(parts + ([node.module] if node.module else []))
            names |= {base, *(f"{base}.{alias.name}" for alias in node.names)}
    return names


def module_file(name: str) -> tuple[Path, bool] | None:
    path = ROOT / Path(*name.split("."))
    if (path / "__init__.py").is_file():
        return path / "__init__.py", True
    return (path.with_suffix(".py"), False) if path.with_suffix(".py").is_file() else None


def third_party_imports(start: set[str]) -> set[str]:
    """Top-level names of the non-graft, non-standard-library modules that the graft modules in ``start`` import,
    directly or through other graft modules (their packages' ``__init__`` included)."""
    seen, found, todo = set(), set(), list(start)
    while todo:
        name = todo.pop()
        top = name.split(".")[0]
        if top != "graft":
            if top not in sys.stdlib_module_names and top != "__future__":
                found.add(top)
            continue
        located = module_file(name)
        if located is None or name in seen:
            continue
        seen.add(name)
        todo += [".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)]
        todo += imported_names(ast.parse(located[0].read_text()), name, located[1])
    return found


def command_imports(shell: str, params: dict[str, str]) -> set[str] | None:
    """The third-party modules a rule's shell command reaches through graft, or None when it runs no graft."""
    for key, value in params.items():
        shell = shell.replace(f"{{params.{key}}}", value)
    words = shell.split()
    starts = [
        i
        for i, w in enumerate(words)
        if w in ("graft", "graft.cli") or (w == "--" and "graft.planning.launch" in words)
    ]
    if not starts:
        return None
    command = []
    for word in words[starts[0] + 1 :]:
        if word.startswith(("-", "{")):
            break
        command.append(word)
    cli = ast.parse((ROOT / "graft/cli.py").read_text())
    at_import = {
        n
        for stmt in cli.body
        if isinstance(stmt, ast.Import | ast.ImportFrom)
        for n in imported_names(stmt, "graft.cli", False)
    }
    # the handler and the command line's helpers it calls, with their function-local imports
    functions = {stmt.name: stmt for stmt in cli.body if isinstance(stmt, ast.FunctionDef)}
    reached, todo = set(), [handler(command).__name__]
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        todo += [n.id for n in ast.walk(functions[name]) if isinstance(n, ast.Name) and n.id in functions]
    local = {n for name in reached for n in imported_names(functions[name], "graft.cli", False)}
    # the modules a command runs with python -m: the launcher, the record of a failed training job
    run = {module for module in ("graft.planning.launch", "graft.workflow.failures") if module in words}
    return third_party_imports(at_import | local | run)


@cache
def distributions() -> dict[str, list[str]]:
    return md.packages_distributions()


def missing(imports: set[str], requirements: list[str]) -> dict[str, str]:
    """Import name -> distribution, for each import that the requirements do not install."""
    names, allowed = reachable(requirements), exempt(requirements)
    out = {}
    for module in sorted(imports):
        # not installed here (vLLM in the CPU venv): its distribution takes its name
        dists = {canonicalize_name(d) for d in distributions().get(module, [module])}
        if not dists & (names | allowed):
            out[module] = ", ".join(sorted(dists))
    return out


def rule_environments(config: Path) -> list[tuple[str, str, list[str], set[str]]]:
    """(rule, environment, its requirements, the rule's imports) for every rule of ``config`` that runs graft."""
    settings = yaml.safe_load(config.read_text()) or {}
    named = (settings.get("workflow") or {}).get("environment")
    cases = []
    for rule, info in workflow_rules()[str(config)].items():
        imports = command_imports(info["shell"], info["params"]) if info["shell"] else None
        if imports is None:
            continue
        if named:
            cases.append((rule, *environment_of(named), imports))
            continue
        cases.append((rule, "the README's venv", readme_install(), imports))
        if info["conda"]:
            path = (ROOT / "rules" / info["conda"]).resolve()
            cases.append((rule, str(path.relative_to(ROOT)), conda_install(path), imports))
    return cases


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_every_rule_imports_only_what_its_environment_installs(config):
    cases = rule_environments(config)
    assert cases, f"{config.name}: no rule runs graft"
    problems = [
        f"rule {rule} in {env}: imports {module} ({dist}), which it does not install"
        for rule, env, requirements, imports in cases
        for module, dist in missing(imports, requirements).items()
    ]
    assert not problems, "\n".join(problems)


def test_the_walk_reaches_the_download_rules_imports():
    """The check looks where the downloads' packages are imported: the functions the fetch handler calls, and the
    functions of the modules those live in."""
    rules = workflow_rules()[str(ROOT / "config/paper.yaml")]
    fetch = {
        name: command_imports(rules[name]["shell"], rules[name]["params"]) for name in ("fetch_dataset", "fetch_model")
    }
    assert {"datasets", "huggingface_hub", "transformers", "torch"} <= fetch["fetch_dataset"] == fetch["fetch_model"]
    train = command_imports(rules["train"]["shell"], rules["train"]["params"])
    assert {"vllm", "deepspeed", "wandb"} <= train


def test_an_import_its_environment_lacks_is_named():
    """An environment's requirements are followed through installed metadata (transformers brings
    huggingface_hub); a package nothing pulls in is reported with its distribution, and an import of a
    config-selected extra is not asked of an environment without that extra."""
    base = ["transformers>=4.56"]
    assert missing({"huggingface_hub", "transformers"}, base) == {}
    assert missing({"matplotlib", "vllm"}, base) == {"matplotlib": "matplotlib"}
