"""Every ``graft`` command except ``fetch`` runs with the Hugging Face hub offline.

Models and data are local files by the time anything trains, evaluates or reports (``graft fetch`` and the
workflow's download rules put them there), so a lookup on the hub can only mean a missing file; offline, it fails
at once naming what is missing, instead of waiting on a compute node without internet. ``HF_HUB_OFFLINE=0`` in
the environment keeps the hub reachable.
"""

from __future__ import annotations

import os

ONLINE_COMMANDS = frozenset({"fetch"})


def go_offline(command: str, environ: dict[str, str] | None = None) -> bool:
    """Set ``HF_HUB_OFFLINE=1`` (unless the environment says otherwise) for a command that does not download,
    before transformers or huggingface_hub is imported (they read it once). Returns whether the hub is off."""
    environ = os.environ if environ is None else environ
    if command in ONLINE_COMMANDS:
        return False
    environ.setdefault("HF_HUB_OFFLINE", "1")
    return environ["HF_HUB_OFFLINE"] not in ("0", "false", "False")
