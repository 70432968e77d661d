"""Run directories as a kill leaves them, and their files compared byte for byte."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def unfinish(out: Path) -> None:
    """A finished run as if killed after its last checkpoint, before it was recorded as finished: no done.json
    and no copy of it in run.json."""
    (out / "done.json").unlink()
    record = json.loads((out / "run.json").read_text())
    record.pop("finished")
    (out / "run.json").write_text(json.dumps(record))


def tree_digest(root: Path) -> dict[str, str]:
    """Every file under ``root`` (the run lock aside) with its sha256."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name != ".lock"
    }
