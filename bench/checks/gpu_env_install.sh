#!/usr/bin/env bash
# requirements/gpu-env.sh run whole, as a user runs it on a login node, on a machine without a GPU: the install of
# the jobs' environment (vLLM 0.33.0 with its CUDA torch, DeepSpeed, the graft package with its tracking extra) and
# its import check, timed with a cold pip cache, then what pip resolved and an import of vLLM, DeepSpeed and the
# graft modules the jobs load. CI has no time for a multi-GB download; this records one real run instead, in
# bench/results/gpu_env_install.log (or LOG). pip's line per package (collecting, downloading, the index it came
# from) is left out of the log; its summary and the resolved versions are in. Without DIR the venv goes to a fresh
# folder under /tmp, which the script removes afterwards with pip's download cache (KEEP=1 keeps both).
# Usage: bash bench/checks/gpu_env_install.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
scratch=$(mktemp -d /tmp/graft-gpu-env.XXXXXX)
dir=${1:-$scratch/venv}
log=${LOG:-bench/results/gpu_env_install.log}
# a cold cache: the download is part of what a user waits for
export PIP_CACHE_DIR=$scratch/pip-cache
trap '[ "${KEEP:-0}" = 1 ] || rm -rf "$scratch"' EXIT
per_package='^(Looking in|WARNING: Location|Collecting|Downloading|  Downloading|Processing|Requirement already|Obtaining)|━'
{
    gpu=$(nvidia-smi -L 2>/dev/null | head -1 || true)
    echo "# bash bench/checks/gpu_env_install.sh at commit $(git rev-parse --short HEAD) on $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "# machine: $(uname -sm), $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)," \
        "GPU: ${gpu:-none}"
    echo "# python3.11: $(command -v python3.11 || echo none)"
    echo "# --- bash requirements/gpu-env.sh $dir"
    start=$SECONDS
    set +e
    bash requirements/gpu-env.sh "$dir" 2>&1 | grep --line-buffered -vE "$per_package"
    status=${PIPESTATUS[0]}
    set -e
    echo "# --- gpu-env.sh: exit status $status after $((SECONDS - start)) s (download and install, cold pip cache)"
    [ "$status" = 0 ] || exit "$status"
    echo "# --- the environment: $(du -sh "$dir" | cut -f1); resolved versions (pip list --format=freeze)"
    "$dir/bin/pip" list --format=freeze
    echo "# --- imports without a GPU"
    start=$SECONDS
    "$dir/bin/python" - <<'PY'
import importlib.metadata as md

import deepspeed
import torch
import vllm

import graft.cli
import graft.data.fetch
import graft.engine.vllm as engine

print(f"vllm {vllm.__version__} (requires {', '.join(r for r in md.requires('vllm') if r.startswith('torch=='))})")
print(f"torch {torch.__version__}: CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
      f"kernels for {' '.join(torch.cuda.get_arch_list())}")
print(f"deepspeed {deepspeed.__version__}; datasets {md.version('datasets')}; graft {md.version('graft')}, "
      f"vLLM build {engine.installed_build()!r}")
print(f"torch.cuda.is_available() = {torch.cuda.is_available()}")
try:
    engine.check_available()
except Exception as err:  # the one line a job without a usable GPU stops with
    print(f"a vLLM job here stops with: {err}")
PY
    echo "# --- imports took $((SECONDS - start)) s"
} 2>&1 | tee "$log"
