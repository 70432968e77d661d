#!/usr/bin/env bash
# The README's main job on a fresh clone, install included: clones this checkout's commit into DIR (default
# /tmp/graft-main-job; it must not exist), runs the README's command there exactly, with a time stamp before it,
# after the install and at the end, and records the install's and snakemake's seconds, each job's seconds (from
# Snakemake's log) and the machine in OUT (default bench/results/workflow_time.json) through workflow_time.py --log.
# The report stays in DIR/results/default/report/. Usage: bash bench/benchmarks/main_job_clone.sh [DIR [OUT]]
set -euo pipefail
repo=$(git rev-parse --show-toplevel)
head=$(git rev-parse HEAD)
dir=${1:-/tmp/graft-main-job}
out=$(realpath -m "${2:-$repo/bench/results/workflow_time.json}")
[ ! -e "$dir" ] || { echo "main_job_clone: $dir exists; name a new directory" >&2; exit 2; }
git clone -q "$repo" "$dir"
cd "$dir"
git checkout -q "$head"
commit=$(git rev-parse --short HEAD)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(date +%s.%N)
# the README's main-job command, split after its install only to stamp the time there
python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && pip install -e '.[workflow]' -c requirements/cpu-digits.txt
t1=$(date +%s.%N)
snakemake --cores 2 all
t2=$(date +%s.%N)
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
install=$(python -c "print(round($t1 - $t0, 1))")
minutes=$(python -c "print(($t2 - $t1) / 60)")
log=$(ls -t .snakemake/log/*.snakemake.log | head -1)
python bench/benchmarks/workflow_time.py --log "$log" --minutes "$minutes" --install-seconds "$install" \
    --out "$out" --note "a fresh clone of $commit; load average (1, 5, 15 min) $load_before before, $load_after after"
echo "install $install s, snakemake $(python -c "print(round($t2 - $t1, 1))") s"
