"""The workflow's JSON schema (``workflow/schemas/config.schema.yaml``), generated from the config's dataclasses.

Snakemake validates the config against the schema before it parses the rules; the dataclasses (graft.config) then
check every value. Generating the one from the other keeps them from disagreeing: every field of every section,
its type, its allowed values and range (graft.typed_config's ``Bounds``, non-empty strings and collections) and its
docstring as the description. ``python -m graft.planning.config_schema`` prints it;
a test compares it with the committed file.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import textwrap
import types
import typing
from typing import Annotated, Any, Literal

import yaml

from graft.config import RunConfig
from graft.names import MAX_NAME_LENGTH, NAME_PATTERN, Named
from graft.typed_config import NON_EMPTY, Bounds, field_types

SCHEMA_PATH = "workflow/schemas/config.schema.yaml"


def field_docs(cls: type) -> dict[str, str]:
    """Each field's docstring (the string literal under it in the class body), whole, on one line."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body
    docs = {}
    for node, after in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def _json_type(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string"}[type(value)]


def name_schema() -> dict:
    """A name's schema (graft.names): its pattern, anchored, since a JSON schema's pattern may match anywhere."""
    return {"pattern": f"^{NAME_PATTERN}$", "maxLength": MAX_NAME_LENGTH}


def type_schema(tp: Any) -> dict:
    """The JSON schema of one annotated type (the kinds graft.typed_config reads)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Annotated:
        schema = type_schema(args[0])
        for meta in args[1:]:
            if isinstance(meta, Bounds):
                schema.update(meta.schema())
            elif meta == NON_EMPTY:
                schema["minItems" if schema["type"] == "array" else "minProperties"] = 1
            elif isinstance(meta, Named):
                schema.update(name_schema())
        return schema
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        schema = type_schema(inner[0])
        if type(None) in args:
            kind = schema.get("type", "object")
            schema["type"] = [*(kind if isinstance(kind, list) else [kind]), "null"]
            if "enum" in schema:
                schema["enum"] = [*schema["enum"], None]
        return schema
    if origin is Literal:
        return {"type": _json_type(args[0]), "enum": list(args)}
    if origin is list:
        return {"type": "array", "items": type_schema(args[0])}
    if origin is dict:
        schema = {"type": "object", "additionalProperties": type_schema(args[1])}
        if typing.get_origin(args[0]) is Annotated and any(isinstance(m, Named) for m in typing.get_args(args[0])):
            schema["propertyNames"] = name_schema()
        return schema
    if dataclasses.is_dataclass(tp):
        return section_schema(tp)
    if tp is Any:
        return {}
    if tp is str:
        return {"type": "string", "minLength": 1}
    return {"type": {bool: "boolean", int: "integer", float: "number", str: "string"}[tp]}


def section_schema(cls: type) -> dict:
    hints = field_types(cls)
    docs = field_docs(cls)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    properties = {}
    for f in fields:
        schema = type_schema(hints[f.name])
        if f.name in docs:
            schema["description"] = docs[f.name]
        properties[f.name] = schema
    schema: dict = {"type": "object"}
    if cls.__doc__ and cls is not RunConfig:
        schema["description"] = " ".join(cls.__doc__.split())
    schema["properties"] = properties
    required = [f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def config_schema() -> dict:
    schema = section_schema(RunConfig)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "description": "GRAFT workflow configuration, generated from graft.config's dataclasses by "
        "graft/planning/config_schema.py (python -m graft.planning.config_schema); graft.config checks every value's "
        "range.",
        **schema,
    }


def render() -> str:
    return yaml.safe_dump(config_schema(), sort_keys=False, width=120, allow_unicode=True)


if __name__ == "__main__":
    print(render(), end="")
