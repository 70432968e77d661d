"""The paths a command is given: read literally, checked before any work, and an OS error on one told in one line.

graft expands nothing in a path: not ``~``, not ``$VAR`` (the shell does that for a word of its own, not for
``--out=~/x`` nor in a config file), and a relative path is relative to the working directory. A command checks
each path it writes to before it reads its inputs (``check_output``) and each directory or file it reads whose
kind it relies on (``check_input``), so that a wrong one costs no compute; what still fails while it works is
told by ``describe`` in the command line's one line.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from graft.errors import ConfigError

Kind = Literal["file", "directory"]


def describe(err: OSError) -> str:
    """An OS error as half a line: the path (both, for a rename) and the cause in the system's words, e.g.
    ``'out/x.json': Read-only file system``."""
    paths = [repr(str(p)) for p in (err.filename, err.filename2) if p is not None]
    cause = err.strerror or str(err)
    return f"{' -> '.join(paths)}: {cause}" if paths else cause


_EXPANDED = re.compile(r"\$(\{|[A-Za-z_])")
"""A shell variable in a path (``$HOME``, ``${SCRATCH}``), which a shell would expand and graft does not."""


def check_path_text(where: str, text: str) -> str:
    """``text`` where it can be a path as written, else ConfigError in one line naming ``where``: a ``~``, a
    ``$VAR`` or ``${VAR}`` (expanded by a shell, not in a config nor after ``--out=``) and control characters (a
    newline, a NUL) are refused. Spaces are fine: every rule quotes its paths."""
    if text.startswith("~"):
        raise ConfigError(
            f"{where}: {text!r}: graft does not expand ~ (a shell does, but not in a config nor after --out=); write "
            "the path out, e.g. /home/you/..."
        )
    if _EXPANDED.search(text):
        raise ConfigError(
            f"{where}: {text!r}: graft does not expand shell variables (a shell does, but not in a config nor after "
            "--out=); write the path out"
        )
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise ConfigError(f"{where}: {text!r} holds a control character; a path is printable text")
    return text


def check_input(option: str, path: Path, kind: Kind) -> Path:
    """``path`` where it is an existing ``kind``, else ConfigError in one line naming ``option``."""
    check_path_text(option, str(path))
    where = f"{option}: {str(path)!r}"
    try:
        if not path.exists():
            raise ConfigError(f"{where}: no such {kind}")
        if kind == "directory" and not path.is_dir():
            raise ConfigError(f"{where} is a file; expected a directory")
        if kind == "file" and path.is_dir():
            raise ConfigError(f"{where} is a directory; expected a file")
    except OSError as err:
        raise ConfigError(f"{option}: {describe(err)}") from None
    return path


def check_output(option: str, path: Path, kind: Kind, inputs: Mapping[str, Path | None] | None = None) -> Path:
    """``path`` where a command can write its output ``kind`` there, else ConfigError in one line naming
    ``option``: an existing path of the other kind, a path under a file, an input of the same command (``inputs``:
    option -> path), a ``~`` taken literally, or a directory that does not take a new file (read-only, no
    permission) are refused. Writability is tried, not inferred from permission bits (root passes those, a
    read-only mount does not): a file is created and removed in the directory the output goes to, or in the
    nearest one that exists."""
    where = f"{option}: {str(path)!r}"
    check_path_text(option, str(path))
    try:
        if path.exists() and kind == "directory" and not path.is_dir():
            raise ConfigError(f"{where} exists and is a file; expected a directory")
        if kind == "file" and path.is_dir():
            raise ConfigError(f"{where} is a directory; expected a file")
        for name, given in (inputs or {}).items():
            if given is not None and path.exists() and given.exists() and path.samefile(given):
                raise ConfigError(f"{where} is also {name}, an input of this command; give another path")
        home = _nearest(path if kind == "directory" else path.parent)
        if not home.is_dir():
            raise ConfigError(f"{where}: {str(home)!r} is a file, not a directory")
    except OSError as err:
        raise ConfigError(f"{option}: {describe(err)}") from None
    try:
        handle, probe = tempfile.mkstemp(prefix=".graft-probe-", dir=home)
        os.close(handle)
        os.unlink(probe)
    except OSError as err:
        raise ConfigError(f"{where}: cannot create a file in {str(home)!r}: {err.strerror or err}") from None
    return path


class WriteFailed(OSError):
    """A write that failed with an error other than an OSError, its temporary removed: torch.save raises a
    RuntimeError when the disk is full, and safetensors its own error. The command line reports it as one line,
    as it does every OSError."""

    def __init__(self, path: Path, cause: BaseException):
        free = shutil.disk_usage(_nearest(path)).free / 1e9
        # torch's message is the first line of a C++ report ("unexpected pos 576 vs 534"): the free space tells more
        first = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
        super().__init__(errno.EIO, f"write failed ({first}); {free:.2f} GB free on its file system", str(path))


def _nearest(path: Path) -> Path:
    """``path``, or its nearest ancestor that exists (the working directory or the root at last)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path
