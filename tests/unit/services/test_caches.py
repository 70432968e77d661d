"""Compile caches go to node-local storage per job (graft.services.caches)."""

from __future__ import annotations

import os

from graft.services.caches import CACHE_VARIABLES, node_local_caches


def test_each_unset_cache_goes_under_the_jobs_scratch_directory():
    env = {"TMPDIR": "/local/scratch", "USER": "ana", "SLURM_JOB_ID": "4242", "SLURM_RESTART_COUNT": "1"}
    chosen = node_local_caches(env)
    assert chosen == {
        "VLLM_CACHE_ROOT": "/local/scratch/graft-caches-ana/job4242.1/vllm",
        "TRITON_CACHE_DIR": "/local/scratch/graft-caches-ana/job4242.1/triton",
        "TORCHINDUCTOR_CACHE_DIR": "/local/scratch/graft-caches-ana/job4242.1/inductor",
    }
    assert all(env[name] == path for name, path in chosen.items())


def test_two_jobs_get_two_directories_and_a_users_setting_is_kept():
    first = node_local_caches({"USER": "ana", "SLURM_JOB_ID": "1"})
    second = node_local_caches({"USER": "ana", "SLURM_JOB_ID": "2"})
    assert set(first.values()).isdisjoint(second.values())
    assert all(path.startswith("/tmp/") for path in first.values())  # no TMPDIR: /tmp, never the home directory
    env = {"VLLM_CACHE_ROOT": "/shared/vllm-cache"}
    chosen = node_local_caches(env)
    assert env["VLLM_CACHE_ROOT"] == "/shared/vllm-cache" and set(chosen) == set(CACHE_VARIABLES) - {"VLLM_CACHE_ROOT"}


def test_outside_slurm_the_directory_is_the_processs():
    chosen = node_local_caches({"USER": "ana"})
    assert f"/pid{os.getpid()}/" in chosen["TRITON_CACHE_DIR"]
