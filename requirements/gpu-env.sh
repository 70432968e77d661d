#!/usr/bin/env bash
# The environment every job of the paper runs in: a venv with the graft package, its gpu extra (vLLM 0.33.0 and the
# CUDA torch it pins, DeepSpeed 0.19.8) and the tracking extra. Snakemake itself runs in the project's venv (the
# README's install, with the workflow extra). Run this once on the cluster's login node, from the repository root,
# on a file system the compute nodes share:
#     bash requirements/gpu-env.sh [DIR]          (DIR: .venv-gpu, the workflow.environment of config/paper.yaml)
# The Slurm profile then runs every job's commands from DIR/bin, whatever environment submitted them.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.venv-gpu}
python=${PYTHON:-python3.11}
command -v "$python" >/dev/null || { echo "gpu-env.sh: no $python on PATH (set PYTHON=/path/to/python3.11)"; exit 2; }
"$python" -m venv "$dir"
"$dir/bin/pip" install --upgrade pip
"$dir/bin/pip" install -e '.[gpu,tracking]'
# What every job imports, on the login node too (no GPU needed; DeepSpeed then says it picked its CPU accelerator,
# and on a GPU node picks CUDA): a package missing or broken stops here and not in the first job.
"$dir/bin/python" - <<'PY'
import datasets, deepspeed, torch, vllm
import graft.cli, graft.data.fetch, graft.engine.vllm
print(f"GPU environment ready: vLLM {vllm.__version__}, torch {torch.__version__} (CUDA {torch.version.cuda}), "
      f"DeepSpeed {deepspeed.__version__}; compute nodes need an NVIDIA driver for CUDA {torch.version.cuda} or newer")
PY
echo "workflow.environment: $dir"
