#!/usr/bin/env bash
# The prepared GPU check: bench/checks/gpu_check.py under torchrun with one process per visible GPU, once per training
# engine (cut off at 330 and 150 seconds; the phases the engine does not change run in the first only). In order:
# memory at the paper's shapes beside the plan, one-GPU training, packing, two engines waking after a training
# peak, the weight sync, the engine's log-probs against the trainer's, the evaluation's engine. Results go to $OUT
# when set (the device tool's folder), else bench/results/. Exits non-zero when either run fails a check.
# Usage: bash bench/checks/gpu_check.sh [--tiny]
set -uo pipefail
cd "$(dirname "$0")/../.."
gpus=$(python3 -c "import torch; print(max(torch.cuda.device_count(), 1))")
out=${OUT:-bench/results}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
status=0
# both training engines: FSDP2 (the default) and DeepSpeed ZeRO-3, each with the same rollout and weight sync
timeout 330 python3 -m torch.distributed.run --standalone --nproc-per-node "$gpus" bench/checks/gpu_check.py --out "$out" \
    "$@" || status=$?
timeout 150 python3 -m torch.distributed.run --standalone --nproc-per-node "$gpus" bench/checks/gpu_check.py --out "$out" \
    --engine deepspeed --engine-only "$@" || status=$?
exit "$status"
