"""Compile caches on node-local storage, one directory per job.

vLLM (``VLLM_CACHE_ROOT``: torch.compile artifacts and CUDA graphs), Triton (``TRITON_CACHE_DIR``) and inductor
(``TORCHINDUCTOR_CACHE_DIR``) default to the home directory, which on most clusters is NFS shared by every node:
up to eight engines of a job, and every job of a workflow, then compile into one directory over the network, and
a file one writes while another reads can break a compile. Each ``graft`` command that may compile puts them under
the node's scratch (``$TMPDIR``, else /tmp), in a directory of its Slurm job (or of its process outside Slurm), unless
the environment already names them.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_VARIABLES = {
    "VLLM_CACHE_ROOT": "vllm",
    "TRITON_CACHE_DIR": "triton",
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
}
"""Each compile cache's variable, and its directory under the job's."""


def job_cache_root(environ: dict[str, str]) -> Path:
    """The job's cache directory: under ``$TMPDIR`` (else /tmp), named by the user and the Slurm job (and its
    restart, which may land on the same node) or by the process."""
    scratch = Path(environ.get("TMPDIR") or "/tmp")
    user = environ.get("USER") or str(os.getuid())
    job = environ.get("SLURM_JOB_ID")
    who = f"job{job}.{environ.get('SLURM_RESTART_COUNT', '0')}" if job else f"pid{os.getpid()}"
    return scratch / f"graft-caches-{user}" / who


def node_local_caches(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Set each compile cache variable the environment leaves unset to the job's node-local directory; returns
    the ones set."""
    environ = os.environ if environ is None else environ
    root = job_cache_root(environ)
    chosen = {name: str(root / sub) for name, sub in CACHE_VARIABLES.items() if not environ.get(name)}
    environ.update(chosen)
    return chosen
