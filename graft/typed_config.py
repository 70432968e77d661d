"""Build frozen dataclasses from plain dicts (parsed YAML), validating every field once.

Supported field types: bool, int, float, str, ``Literal[...]``, nested dataclasses, ``list[X]``,
``dict[str, X]`` and ``X | None`` of these. Unknown keys, wrong types and values outside a Literal are refused
with one ConfigError line that names the field and what it accepts.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal, TypeVar, get_args, get_origin

from graft.errors import ConfigError

T = TypeVar("T")


class FieldError(ValueError):
    """A section's own check of one of its fields failed (raised in its ``__post_init__``): ``from_dict`` turns it
    into one ConfigError line that names the field's full path."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


def _describe(tp: Any) -> str:
    if get_origin(tp) is Literal:
        return "one of " + ", ".join(repr(v) for v in get_args(tp))
    if _is_optional(tp):
        inner = next(a for a in get_args(tp) if a is not type(None))
        return f"{_describe(inner)} or null"
    return getattr(tp, "__name__", str(tp))


def _is_optional(tp: Any) -> bool:
    return get_origin(tp) in (typing.Union, types.UnionType) and type(None) in get_args(tp)


def coerce(value: Any, tp: Any, where: str) -> Any:
    """Return ``value`` checked against ``tp``; ints are accepted where floats are expected."""
    if tp is Any:
        return value
    if _is_optional(tp):
        if value is None:
            return None
        inner = next(a for a in get_args(tp) if a is not type(None))
        return coerce(value, inner, where)
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, where)
    if get_origin(tp) is list:
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__}")
        (item,) = get_args(tp)
        return [coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    if get_origin(tp) is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
        _, item = get_args(tp)
        return {str(k): coerce(v, item, f"{where}.{k}") for k, v in value.items()}
    if get_origin(tp) is Literal:
        if value in get_args(tp) and type(value) in {type(a) for a in get_args(tp)}:
            return value
        raise ConfigError(f"{where}: {value!r} is not allowed; expected {_describe(tp)}")
    # bool is a subclass of int: refuse True where a number is expected and 1 where a bool is.
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
    else:
        raise TypeError(f"unsupported field type {tp!r} at {where}")
    raise ConfigError(f"{where}: {value!r} is not allowed; expected {_describe(tp)}")


def from_dict(cls: type[T], data: Any, where: str) -> T:
    """Construct dataclass ``cls`` from mapping ``data``; ``where`` prefixes error messages."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"{where}: unknown field {unknown[0]!r}; allowed fields: {', '.join(fields)}")
    kwargs = {key: coerce(value, hints[key], f"{where}.{key}") for key, value in data.items()}
    missing = [
        name
        for name, f in fields.items()
        if name not in kwargs and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ConfigError(f"{where}: missing required field {missing[0]!r}")
    try:
        return cls(**kwargs)
    except FieldError as err:
        section = where.removeprefix("config").lstrip(".")
        raise ConfigError(f"{section + '.' if section else ''}{err.field}: {err.message}") from None
