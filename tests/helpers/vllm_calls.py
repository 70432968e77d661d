"""graft's calls into vLLM against the installed build's own definitions, read from source (nothing of vLLM is
imported, so the GPU build's worker is read on a machine without a GPU or CUDA libraries).

Both sides are parsed: the calls graft/engine/vllm.py makes (``LLM(...)``, ``self.llm.<method>(...)``, the
engine core client's ``shutdown``, ``SamplingParams(...)``, the worker extension's ``self.reload_weights(...)``)
and the classes of the installed build that receive them; a keyword the receiver does not take, or more
positional arguments than it has, is a mismatch.
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import graft.engine.vllm as graft_vllm

WHERE = {
    "LLM": ("entrypoints/llm.py", "LLM"),
    "Worker": ("v1/worker/gpu_worker.py", "Worker"),
    "CPUWorker": ("v1/worker/cpu_worker.py", "CPUWorker"),
    "GPUModelRunner": ("v1/worker/gpu_model_runner.py", "GPUModelRunner"),
    "EngineArgs": ("engine/arg_utils.py", "EngineArgs"),
    "SamplingParams": ("sampling_params.py", "SamplingParams"),
    "EngineCoreClient": ("v1/engine/core_client.py", "EngineCoreClient"),
}
"""Where each receiving class is defined in the vLLM package."""
FORWARDS = {("Worker", "reload_weights"): ("GPUModelRunner", "reload_weights"), ("LLM", "__init__"): ("EngineArgs", "")}
"""Methods that take ``*args, **kwargs`` and hand them on: to another method, or ("") to a dataclass's fields."""


@dataclass(frozen=True)
class Call:
    receiver: str
    method: str
    """"" for a constructor of a dataclass-like class (its fields)."""
    positional: int
    keywords: tuple[str, ...]
    line: int


def _splatted(tree: ast.Module, keyword: ast.keyword) -> tuple[str, ...]:
    """The keys a ``**name`` argument can carry: the string keys of the dict literals assigned to ``name``."""
    if not isinstance(keyword.value, ast.Name):
        return ()  # e.g. ``**(engine_args or {})``: the caller's own arguments
    keys = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == keyword.value.id for t in node.targets):
            for d in ast.walk(node.value):
                if isinstance(d, ast.Dict):
                    keys += [k.value for k in d.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return tuple(keys)


def graft_calls(source: Path = Path(graft_vllm.__file__)) -> list[Call]:
    """Every call ``source`` (graft/engine/vllm.py) makes into vLLM's engine, worker and sampling parameters."""
    tree = ast.parse(source.read_text())
    calls = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        target = None
        f = node.func
        if isinstance(f, ast.Name) and f.id == "LLM":
            target = ("LLM", "__init__")
        elif isinstance(f, ast.Name) and f.id == "SamplingParams":
            target = ("SamplingParams", "")
        elif isinstance(f, ast.Attribute) and ast.unparse(f.value) == "self.llm":
            target = ("LLM", f.attr)
        elif isinstance(f, ast.Attribute) and ast.unparse(f.value) == "self.llm.llm_engine.engine_core":
            target = ("EngineCoreClient", f.attr)
        elif isinstance(f, ast.Attribute) and ast.unparse(f.value) == "self" and f.attr == "reload_weights":
            target = ("Worker", "reload_weights")
        if target is not None:
            keywords = tuple(k.arg for k in node.keywords if k.arg is not None)
            keywords += tuple(key for k in node.keywords if k.arg is None for key in _splatted(tree, k))
            calls.append(Call(*target, len(node.args), keywords, node.lineno))
    return calls


def vllm_root() -> Path:
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("vllm")
    return Path(next(iter(spec.submodule_search_locations)))


def _class(root: Path, receiver: str) -> ast.ClassDef | None:
    file, name = WHERE[receiver]
    path = root / file
    if not path.is_file():
        return None
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    return None


def accepted(root: Path, receiver: str, method: str) -> tuple[set[str], int, bool] | None:
    """The keyword names, the positional capacity (-1: unbounded) and whether any keyword goes, of ``method`` of
    ``receiver`` in the installed build (fields of a dataclass-like class for ``method`` ""); None where the class
    or method is not defined there."""
    cls = _class(root, receiver)
    if cls is None:
        return None
    if method == "":
        fields = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
        return fields, 0, False
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == method:
            a = node.args
            positional = [p.arg for p in a.posonlyargs + a.args][1:]  # without self
            if (a.vararg or a.kwarg) and (receiver, method) in FORWARDS:
                names, capacity, anything = accepted(root, *FORWARDS[receiver, method])
                return names | {p.arg for p in a.kwonlyargs} | set(positional), capacity, anything
            names = set(positional) | {p.arg for p in a.kwonlyargs}
            return names, -1 if a.vararg else len(positional), a.kwarg is not None
    return None


def mismatches(root: Path, source: Path = Path(graft_vllm.__file__)) -> list[str]:
    """One line per call of ``source`` that the vLLM package at ``root`` would refuse."""
    out = []
    for call in graft_calls(source):
        got = accepted(root, call.receiver, call.method)
        where = f"graft/engine/vllm.py:{call.line} {call.receiver}.{call.method or '<fields>'}"
        if got is None:
            out.append(f"{where}: not defined in the installed vLLM")
            continue
        names, capacity, anything = got
        unknown = [k for k in call.keywords if k not in names and not anything]
        if unknown:
            out.append(f"{where}: takes no {', '.join(unknown)}")
        if capacity >= 0 and call.positional > capacity:
            out.append(f"{where}: {call.positional} positional arguments, it takes {capacity}")
    return out
