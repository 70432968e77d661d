"""Build frozen dataclasses from plain dicts (parsed YAML), validating every field once.

Supported field types: bool, int, float, str, ``Literal[...]``, nested dataclasses, ``list[X]``,
``dict[str, X]``, ``X | None`` of these, and ``Annotated[X, Bounds(...)]`` / ``Annotated[X, NON_EMPTY]`` /
``Annotated[str, Named(kind)]`` (a name, graft.names, as a value or a mapping's key) and ``PathText`` (a path,
graft.paths.check_path_text): a field's allowed range is
written in its annotation, beside its definition, and read from there by the check below and by the workflow's
schema (graft.planning.config_schema). Every float must be finite, every integer a 64-bit one, every string and
mapping key non-empty text. Unknown keys, wrong types and values out of range are refused with one ConfigError line
that names the field and what it accepts.

Values typed as text (Snakemake's ``--config``, ``graft train --set``, a quoted YAML number) are read as the
field's type first, in one place: ``parse_strings``.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import types
import typing
from typing import Annotated, Any, Literal, TypeVar, get_args, get_origin

import yaml

from graft.errors import ConfigError
from graft.names import Named, check_name, not_text
from graft.paths import check_path_text

T = TypeVar("T")


class FieldError(ValueError):
    """A section's own check of one of its fields failed (raised in its ``__post_init__``): ``from_dict`` turns it
    into one ConfigError line that names the field's full path."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


@dataclasses.dataclass(frozen=True)
class Bounds:
    """A number's allowed range: ``ge``/``gt`` below, ``le``/``lt`` above (None: unbounded on that side)."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None

    def holds(self, value: float) -> bool:
        return (
            (self.ge is None or value >= self.ge)
            and (self.gt is None or value > self.gt)
            and (self.le is None or value <= self.le)
            and (self.lt is None or value < self.lt)
        )

    def describe(self) -> str:
        """``>= 1``, ``> 0``, or an interval such as ``[0, 1)``."""
        low = ("[", self.ge) if self.ge is not None else ("(", self.gt) if self.gt is not None else None
        high = ("]", self.le) if self.le is not None else (")", self.lt) if self.lt is not None else None
        if low and high:
            return f"in {low[0]}{_number(low[1])}, {_number(high[1])}{high[0]}"
        op, edge = {"[": ">=", "(": ">", "]": "<=", ")": "<"}[(low or high)[0]], (low or high)[1]
        return f"{op} {_number(edge)}"

    def schema(self) -> dict[str, float]:
        keys = {"ge": "minimum", "gt": "exclusiveMinimum", "le": "maximum", "lt": "exclusiveMaximum"}
        return {keys[k]: v for k, v in dataclasses.asdict(self).items() if v is not None}


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


INT64 = 2**63
"""Every integer field lies in [-INT64, INT64): a 64-bit integer, as torch and Slurm take them."""


def shown(value: Any) -> str:
    """``repr(value)`` for an error line, a very long one cut (an integer of 400 digits is named by its length)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return f"an integer of {math.floor(math.log10(abs(value))) + 1} digits"
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


NON_EMPTY = "non-empty"
"""``Annotated[list[X], NON_EMPTY]`` / ``Annotated[dict[str, X], NON_EMPTY]``: at least one entry."""

PATH = "path"
"""``Annotated[str, PATH]``: a file or directory as written, with nothing expanded (graft.paths.check_path_text)."""
PathText = Annotated[str, PATH]
"""A file or directory: read literally, relative to the working directory; no ``~``, no ``$VAR``."""

Count = Annotated[int, Bounds(ge=1)]
"""A size, a count of steps or items, a limit: an integer >= 1."""
NonNegativeInt = Annotated[int, Bounds(ge=0)]
"""A count that may be zero."""
Seed = Annotated[int, Bounds(ge=0, le=INT64 - 1)]
"""A run's, an evaluation's or the toy world's seed, every seed of the run derived from it (graft.seeding): the
config's seeds and every command's ``--seed``, one range for them all."""
Positive = Annotated[float, Bounds(gt=0)]
"""A rate, a scale or a duration: a number > 0."""
NonNegative = Annotated[float, Bounds(ge=0)]
"""A coefficient or weight that may be zero."""
Probability = Annotated[float, Bounds(ge=0, le=1)]
"""A probability or a share, 0 and 1 included."""
Share = Annotated[float, Bounds(gt=0, le=1)]
"""A share that cannot be zero (nucleus mass, utilization)."""
OpenShare = Annotated[float, Bounds(gt=0, lt=1)]
"""A share strictly between 0 and 1 (a GPU memory share that leaves room for something else)."""
Decay = Annotated[float, Bounds(ge=0, lt=1)]
"""A running average's decay, or a floor below 1: 0 <= x < 1."""


def _split_annotated(tp: Any) -> tuple[Any, tuple]:
    """The type inside ``Annotated`` and its metadata (none for a plain type)."""
    if get_origin(tp) is Annotated:
        inner, *meta = get_args(tp)
        return inner, tuple(meta)
    return tp, ()


def _describe(tp: Any) -> str:
    tp, meta = _split_annotated(tp)
    if get_origin(tp) is Literal:
        return "one of " + ", ".join(repr(v) for v in get_args(tp))
    if _is_optional(tp):
        inner = next(a for a in get_args(tp) if a is not type(None))
        return f"{_describe(inner)}, or null"
    kind = {int: "an integer", float: "a number", str: "a non-empty string", bool: "true or false"}.get(tp)
    if kind is None:
        return getattr(tp, "__name__", str(tp))
    bounds = [m for m in meta if isinstance(m, Bounds)]
    return " ".join([kind, *(b.describe() for b in bounds)]) + (", finite" if tp is float and not bounds else "")


def _is_optional(tp: Any) -> bool:
    return get_origin(tp) in (typing.Union, types.UnionType) and type(None) in get_args(tp)


def coerce(value: Any, tp: Any, where: str, described: Any = None) -> Any:
    """Return ``value`` checked against ``tp``; ints are accepted where floats are expected. ``described``: the
    type an error names (``X | None`` for the X inside it)."""
    if tp is Any:
        return value
    described = described or tp
    tp, meta = _split_annotated(tp)
    if _is_optional(tp):
        if value is None:
            return None
        inner = next(a for a in get_args(tp) if a is not type(None))
        return coerce(value, inner, where, described)
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, where)
    if get_origin(tp) in (list, dict):
        checked = _coerce_collection(value, tp, where)
        if NON_EMPTY in meta and not checked:
            raise ConfigError(f"{where}: empty; expected at least one entry")
        return checked
    if get_origin(tp) is Literal:
        if value in get_args(tp) and type(value) in {type(a) for a in get_args(tp)}:
            return value
        raise ConfigError(f"{where}: {shown(value)} is not allowed; expected {_describe(described)}")
    named = _named(meta)
    if named is not None:
        return check_name(named.kind, value, where)
    if tp is float and _beyond_floats(value):
        raise ConfigError(f"{where}: {shown(value)} is out of range; expected {_describe(described)}")
    checked = _coerce_scalar(value, tp, where)
    if checked is None or not all(b.holds(checked) for b in meta if isinstance(b, Bounds)):
        hint = f" ({not_text(value)})" if tp is str and not isinstance(value, str) else ""
        raise ConfigError(f"{where}: {shown(value)} is not allowed; expected {_describe(described)}{hint}")
    if PATH in meta:
        check_path_text(where, checked)
    if tp is int and not -INT64 <= checked < INT64:
        raise ConfigError(
            f"{where}: {shown(value)} is out of range; expected a 64-bit {_describe(described).removeprefix('an ')}"
        )
    return checked


def _beyond_floats(value: Any) -> bool:
    """Whether ``value`` is an integer too large for a float (10**400)."""
    if not isinstance(value, int) or isinstance(value, bool):
        return False
    try:
        float(value)
    except OverflowError:
        return True
    return False


def _coerce_collection(value: Any, tp: Any, where: str) -> Any:
    if get_origin(tp) is list:
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__}")
        (item,) = get_args(tp)
        return [coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
    key, item = get_args(tp)
    return {_coerce_key(k, key, where): coerce(v, item, f"{where}.{k}") for k, v in value.items()}


def _coerce_key(key: Any, tp: Any, where: str) -> str:
    """A mapping's key: text, as YAML hands it over only where it is quoted or spelled as text (an unquoted ``no``
    is false, ``0123`` is 83), and a name where ``tp`` is one (graft.names)."""
    named = _named(_split_annotated(tp)[1])
    if named is not None:
        return check_name(named.kind, key, where)
    if isinstance(key, str) and key:
        return key
    hint = "" if isinstance(key, str) else f" ({not_text(key)})"
    raise ConfigError(f"{where}: the key {key!r} is not allowed; expected a non-empty string{hint}")


def _named(meta: tuple) -> Named | None:
    return next((m for m in meta if isinstance(m, Named)), None)


def _coerce_scalar(value: Any, tp: Any, where: str) -> Any:
    """``value`` as a bool, int, finite float or non-empty string, or None where it is not one."""
    # bool is a subclass of int: refuse True where a number is expected and 1 where a bool is.
    if tp is bool:
        return value if isinstance(value, bool) else None
    if tp is int:
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if tp is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        return float(value) if ok else None
    if tp is str:
        return value if isinstance(value, str) and value else None
    raise TypeError(f"unsupported field type {tp!r} at {where}")


def field_types(cls: type) -> dict[str, Any]:
    """Each field's annotation, its ``Annotated`` bounds kept."""
    return typing.get_type_hints(cls, include_extras=True)


def _nested_fields(cls: type, prefix: str = "") -> list[str]:
    """Every field name of dataclass ``cls`` and of the dataclasses its fields hold, dotted."""
    names = []
    for name, hint in field_types(cls).items():
        names.append(prefix + name)
        # a section, or an optional one; not the entries of a mapping (models.<name>.lr is no fixed path)
        inner = (
            [t for t in typing.get_args(hint) if dataclasses.is_dataclass(t)] if get_origin(hint) is not dict else []
        )
        for t in [hint] if dataclasses.is_dataclass(hint) else inner:
            names += _nested_fields(t, f"{prefix}{name}.")
    return names


def nearest_field(cls: type, name: str) -> str:
    """``" (did you mean 'x.y'?)"`` for the field of ``cls``, or of a section inside it, closest to an unknown
    ``name`` (a field given at the wrong level, as ``lr`` for ``train.lr``, or misspelt); empty when none is close."""
    names = _nested_fields(cls)
    exact = [n for n in names if n.rsplit(".", 1)[-1] == name]
    if exact:
        return f" (did you mean {exact[0]!r}?)"
    close = difflib.get_close_matches(name, [n for n in names if "." not in n], n=1, cutoff=0.7)
    return f" (did you mean {close[0]!r}?)" if close else ""


def from_dict(cls: type[T], data: Any, where: str) -> T:
    """Construct dataclass ``cls`` from mapping ``data``; ``where`` prefixes error messages."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    hints = field_types(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    odd = [key for key in data if not isinstance(key, str)]
    if odd:  # a number, a bool or null: no field's name, and not sortable among the names
        raise ConfigError(
            f"{where}: the key {shown(odd[0])} is not allowed ({not_text(odd[0])}); allowed fields: {', '.join(fields)}"
        )
    unknown = sorted(set(data) - set(fields))
    if unknown:
        hint = nearest_field(cls, str(unknown[0]))
        raise ConfigError(f"{where}: unknown field {unknown[0]!r}{hint}; allowed fields: {', '.join(fields)}")
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


_NULL, _TRUE, _FALSE = {"null", "Null", "NULL", "~"}, {"true", "True", "TRUE"}, {"false", "False", "FALSE"}
_INTEGER = re.compile(r"[-+]?[0-9]+")


def parse_strings(value: Any, tp: Any) -> Any:
    """``value`` with every string read as the number, bool or null that ``tp`` expects where it spells one.

    Snakemake's ``--config`` hands every value over as text (``{"steps": 3}`` arrives as ``{"steps": "3"}``), and so
    do ``graft train --set`` and a quoted YAML number: this reads them once, before the schema and the dataclasses
    check them. A string that does not spell the expected type is left as it is, to be refused there by name.
    """
    tp, _ = _split_annotated(tp)
    if _is_optional(tp):
        if isinstance(value, str) and value in _NULL:
            return None
        tp, _ = _split_annotated(next(a for a in get_args(tp) if a is not type(None)))
    if dataclasses.is_dataclass(tp) and isinstance(value, dict):
        hints = field_types(tp)
        return {k: parse_strings(v, hints[k]) if k in hints else v for k, v in value.items()}
    if get_origin(tp) is list and isinstance(value, list):
        return [parse_strings(v, get_args(tp)[0]) for v in value]
    if get_origin(tp) is dict and isinstance(value, dict):
        return {k: parse_strings(v, get_args(tp)[1]) for k, v in value.items()}
    if not isinstance(value, str):
        return value
    if tp is bool:
        return True if value in _TRUE else False if value in _FALSE else value
    integers = tp is int or (get_origin(tp) is Literal and all(type(a) is int for a in get_args(tp)))
    if integers and _INTEGER.fullmatch(value):
        try:
            return int(value)
        except ValueError:  # more digits than Python reads (4300): left as text, refused by name
            return value
    if tp is float:
        try:
            return float(value)
        except ValueError:
            return value
    return value


def read_option(text: str, tp: Any) -> Any:
    """A command-line value read as ``tp`` and checked as a config field of that type would be; ValueError saying
    what is allowed."""
    try:
        return coerce(parse_strings(text, tp), tp, "")
    except ConfigError as err:
        raise ValueError(str(err).removeprefix(": ")) from None


class _Loader(yaml.SafeLoader):
    """``yaml.safe_load``'s loader with two fixes: a duplicate key is refused (YAML keeps the last one silently),
    and ``1e-6`` is a float as in YAML 1.2 (PyYAML follows YAML 1.1, whose floats need a dot and a signed
    exponent, so ``lr: 1e-6`` was read as the string '1e-6')."""

    source = "YAML"

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                hash(key)
            except TypeError:  # a list or a mapping, which no Python mapping holds as a key
                kind, line = "mapping" if isinstance(key, dict) else type(key).__name__, key_node.start_mark.line + 1
                raise ConfigError(f"{self.source}: a {kind} as a key at line {line}; a key is text") from None
            if key in seen:
                line = key_node.start_mark.line + 1
                raise ConfigError(f"{self.source}: duplicate key {key!r} at line {line}; each key may appear once")
            seen.add(key)
        return super().construct_mapping(node, deep)


_YAML_INT_LIMIT = 10**4300


def _construct_int(loader: _Loader, node) -> int:
    """YAML's integer; one of more digits than Python writes out (4300: it could name no setting, nor be named in
    an error) is refused as out of range."""
    try:
        value = yaml.SafeLoader.construct_yaml_int(loader, node)
    except ValueError:  # decimal digits past Python's limit
        value = None
    if value is None or abs(value) >= _YAML_INT_LIMIT:  # a hexadecimal one as long
        line = node.start_mark.line + 1
        raise ConfigError(f"{loader.source}: the integer at line {line} is out of range (more than 4300 digits)")
    return value


_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


def load_yaml(text: str, source: str) -> Any:
    """Parse YAML ``text`` as graft reads every YAML file; ``source`` names it in the one-line errors."""
    loader = _Loader(text)
    loader.source = source
    try:
        return loader.get_single_data()
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{source} is not valid YAML{where}") from None
    finally:
        loader.dispose()
