"""The one rule for the names a config gives and the command line takes: models, pairs, groups, method presets and
the cells made of them.

A name becomes a directory of the results tree (``runs/<method>/<cell>/seed<S>``, ``toy/models/<model>``), a
Snakemake wildcard and a YAML key, so it is refused where it enters unless all three read it back unchanged: no
path separator or dot that could leave its directory, nothing outside the wildcard's pattern, and text, not what
YAML makes of an unquoted ``no`` (false) or ``0123`` (83).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any

from graft.errors import ConfigError

NAME_PATTERN = "[A-Za-z][A-Za-z0-9_]*"
"""A name: an ASCII letter, then ASCII letters, digits and ``_``. The Snakefile's ``wildcard_constraints`` use it for
method, cell and model, so that every name a config accepts is one that Snakemake matches (an archive replay's
cell ``<receiver>_from_<peer>`` matches it too)."""

MAX_NAME_LENGTH = 64
"""Characters a name may have: a replay cell joins two, and a path component stays far below the file systems'
255 bytes."""

RULE = f"an ASCII letter, then letters, digits or _, at most {MAX_NAME_LENGTH} characters"
"""What a name may be, as the one-line refusals say it."""


@dataclass(frozen=True)
class Named:
    """``Annotated[str, Named("model")]``: a config string that follows the name rule; ``kind`` names it in the
    refusal (graft.typed_config checks it, graft.planning.config_schema writes it as a pattern)."""

    kind: str


ModelName = Annotated[str, Named("model")]
"""A key of ``models:`` and ``toy.models:``, a member of a pair or group."""
PairName = Annotated[str, Named("pair")]
"""A key of ``pairs:``."""
GroupName = Annotated[str, Named("group")]
"""A key of ``groups:``."""
MethodName = Annotated[str, Named("method")]
"""A user preset's key of ``methods:``, and a key of ``workflow.method_seeds``."""
CellName = Annotated[str, Named("cell")]
"""A model, pair or group: what a method trains (a key of ``workflow.cell_seeds``)."""


def not_text(value: Any) -> str:
    """Why a value YAML read as something other than text (an unquoted ``no`` is false, ``0123`` is 83, an empty
    key is null) is not the text it was meant to be: half a refusal's line."""
    if isinstance(value, bool):
        read = "a boolean"
    elif isinstance(value, int | float):
        read = "a number"
    else:
        read = "null" if value is None else f"a {type(value).__name__}"
    return f"YAML read {read} there, not text; quote it"


def check_name(kind: str, value: Any, where: str | None = None) -> str:
    """``value`` where it is a ``kind`` name (a model, a pair, a method...), else ConfigError in one line naming
    ``where`` it came from, the kind, the value and what is allowed."""
    prefix = f"{where}: " if where else ""
    if not isinstance(value, str):
        raise ConfigError(f"{prefix}{value!r} is not a {kind} name: {not_text(value)}, and make it {RULE}")
    if len(value) > MAX_NAME_LENGTH or not re.fullmatch(NAME_PATTERN, value):
        raise ConfigError(f"{prefix}{value!r} is not allowed as a {kind} name; expected {RULE}")
    return value


def check_distinct(names: Iterable[tuple[str, str]], rule: str) -> None:
    """Refuse a name that repeats one before it: ``names`` is (where it is given, name) in order. Letter case does
    not tell names apart, since a case-insensitive file system (macOS's, Windows') would give both one directory;
    ``rule`` ends the line, saying which names must differ."""
    seen: dict[str, tuple[str, str]] = {}
    for where, name in names:
        first, spelt = seen.setdefault(name.casefold(), (where, name))
        if first != where:
            case = "" if spelt == name else " but for letter case"
            raise ConfigError(f"{where}: the same name as {first}{case}; {rule}")
