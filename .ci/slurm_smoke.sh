#!/usr/bin/env bash
# Run the smoke config through a real single-node Slurm cluster (Debian's slurm-wlm and munge) with the
# project's Slurm executor profile machinery, and check that the outputs equal a local run's (REFERENCE, a finished
# local results tree of config/smoke.yaml, when given, as .ci/run gives the test suite's; else one run here first).
# Usage: bash .ci/slurm_smoke.sh [REFERENCE]. Needs root and Debian packages (.ci/slurm_cluster.sh); stops
# the daemons it started.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v snakemake >/dev/null || { echo "snakemake is not on PATH: activate the project's environment"; exit 2; }
source .ci/slurm_cluster.sh

local_results=${1:-}
if [ -z "$local_results" ]; then
    local_results="$scratch/local"
    timeout -s KILL 900 snakemake all --cores 2 --configfile config/smoke.yaml --config results="$local_results" \
        >"$scratch/local.log" 2>&1
fi
[ -f "$local_results/report/tables/table1.csv" ] || { echo "no finished smoke results in $local_results"; exit 1; }
slurm_results="$scratch/slurm"
echo "[slurm smoke] $SECONDS s: the smoke config through Slurm"
timeout -s KILL 1500 snakemake all --profile workflow/profiles/slurm-ci --config results="$slurm_results" >"$scratch/slurm.log" 2>&1 || {
    tail -50 "$scratch/slurm.log"; exit 1; }
submitted=$(grep -c "Job .* has been submitted with SLURM jobid" "$scratch/slurm.log" || true)
echo "jobs submitted with sbatch: $submitted"
python3 tests/helpers/compare_results.py "$local_results" "$slurm_results"

# The id of the first running Slurm job of rule $1, waiting up to 10 minutes; empty if none ran.
running_job() {
    local job=""
    for _ in $(seq 1200); do
        job=$(squeue -h -t R -o "%i %k" 2>/dev/null | awk -v rule="^rule_$1" '$2 ~ rule {print $1; exit}')
        [ -n "$job" ] && break
        sleep 0.5
    done
    echo "$job"
}

# Wait until Slurm answers that job $1 is neither running nor completing. Only an answer ends the wait: a query
# that fails (a controller busy for a moment) says nothing about the job.
wait_job_end() {
    local running
    while true; do
        if running=$(squeue -h -j "$1" -t R,CG -o %i 2>/dev/null); then
            [ -n "$running" ] || return 0
        fi
        sleep 0.1
    done
}

# Kill the background Snakemake $1 and every job it left, unlock results tree $2 and rerun it to the end (log $3).
rerun_after_kill() {
    kill -KILL "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    scancel --user root 2>/dev/null || true
    snakemake --unlock --profile workflow/profiles/slurm-ci --config results="$2" >/dev/null 2>&1
    timeout -s KILL 1500 snakemake all --profile workflow/profiles/slurm-ci --config results="$2" \
        --rerun-incomplete >"$3" 2>&1 || { tail -50 "$3"; exit 1; }
}

# A killed job, then a killed workflow, on a copy of the Slurm run's tree with one GRAFT cell and
# everything downstream of it removed (so only that part is rerun, not the whole workflow a third time): SIGKILL
# its training job while it runs (as a node failure or an OOM kill leaves it: no save, the run lock left behind), rewrite
# the lock as another host's holding that Slurm job (the retry of a failed node's job runs elsewhere), let
# Snakemake stop on the failure, unlock and rerun: the retry takes the lock over (Slurm says the job is over) and
# resumes, and the outputs must equal the local run's all the same. cp -a keeps the mtimes Snakemake compares.
killed_results="$scratch/slurm_killed"
echo "[slurm smoke] $SECONDS s: a killed job and a killed workflow"
cp -a "$slurm_results" "$killed_results"
rm -rf "$killed_results"/{runs,eval,eval_parts,eval_selected}/graft/P1/seed0 "$killed_results/report"
snakemake all --profile workflow/profiles/slurm-ci --config results="$killed_results" >"$scratch/killed.log" 2>&1 &
workflow=$!
job=$(running_job train)
[ -n "$job" ] || { echo "no running training job to cancel"; tail -30 "$scratch/killed.log"; exit 1; }
run_dir="$killed_results/runs/graft/P1/seed0"
for _ in $(seq 1200); do [ -s "$run_dir/.lock" ] && break; sleep 0.1; done
# the smoke cell trains in seconds: the trainer is frozen the moment it holds its lock, so that the kill finds it
# running whatever the machine's speed
trainer=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["pid"])' "$run_dir/.lock")
kill -STOP "$trainer"
# SIGKILL to the trainer itself first: the job's end sends its processes SIGCONT and SIGTERM, on which a trainer that
# reached its steps (on a loaded machine it may, before it is frozen) would save and release its lock
kill -KILL "$trainer"
scancel --signal=KILL --full "$job"
echo "killed Slurm job $job mid-run (SIGKILL)"
wait_job_end "$job"
[ -f "$run_dir/.lock" ] || { echo "the killed trainer left no run lock"; exit 1; }
printf '{"host": "node-gone", "pid": 4242, "slurm_job": "%s", "started": "2026-01-01T00:00:00+00:00"}\n' "$job" \
    >"$run_dir/.lock"
rerun_after_kill "$workflow" "$killed_results" "$scratch/rerun.log"
grep -q "taking over the run lock of node-gone" "$killed_results/logs/train/graft/P1/seed0.log" || {
    echo "the retry did not take over the dead job's lock"; tail -20 "$killed_results/logs/train/graft/P1/seed0.log"
    exit 1; }
python3 tests/helpers/compare_results.py "$local_results" "$killed_results"

# A killed evaluation job: on a copy of the Slurm run's tree with one co-training cell's evaluations removed (and
# those kept beside its run), scancel the cell's evaluation job once it has finished its first of 4 checkpoint
# evaluations, stop Snakemake, unlock and rerun: the retried job evaluates only the rest, and every output equals
# the local run's.
killed_eval="$scratch/slurm_killed_eval"
cell=graft/P1/seed0
echo "[slurm smoke] $SECONDS s: a killed evaluation job"
cp -a "$slurm_results" "$killed_eval"
rm -rf "$killed_eval"/{eval,eval_parts,eval_selected}/$cell "$killed_eval/runs/$cell/evaluated" "$killed_eval/report"
snakemake all --profile workflow/profiles/slurm-ci --config results="$killed_eval" >"$scratch/killed_eval.log" 2>&1 &
workflow=$!
job=$(running_job evaluate_checkpoints)
[ -n "$job" ] || { echo "no running evaluation job to cancel"; tail -30 "$scratch/killed_eval.log"; exit 1; }
for _ in $(seq 30000); do
    compgen -G "$killed_eval/runs/$cell/evaluated/*/*.key" >/dev/null && break
    sleep 0.01
done
scancel "$job"
wait_job_end "$job"
kept=$( (compgen -G "$killed_eval/runs/$cell/evaluated/*/*.key" || true) | wc -l)
echo "cancelled evaluation job $job after $kept of 4 checkpoint evaluations"
[ "$kept" -ge 1 ] && [ "$kept" -lt 4 ] || { echo "the job was not cancelled mid-evaluation"; exit 1; }
rerun_after_kill "$workflow" "$killed_eval" "$scratch/rerun_eval.log"
events="$killed_eval/logs/eval/$cell/part0.log"
echo "the retried job: $(grep -c '"event": "evaluate_kept"' "$events") kept," \
    "$(grep -c '"event": "evaluate"' "$events") evaluated"
[ "$(grep -c '"event": "evaluate_kept"' "$events")" -eq "$kept" ] || { echo "kept evaluations were redone"; exit 1; }
python3 tests/helpers/compare_results.py "$local_results" "$killed_eval"

# Several nodes: a training job of two Slurm tasks on this one node, each task a "node" of torchrun's c10d
# rendezvous (scale.nodes: 2 of one process each; the rule's srun starts graft.planning.launch in each task), with the
# split placement, so each task trains one model of the pair. On a copy of the Slurm run's tree with one GRAFT
# cell removed, that cell is retrained this way; its metrics and every checkpoint's weights (byte for byte) equal
# the local one-process run's.
two_tasks="$scratch/slurm_two_tasks"
cell=graft/P1/seed0
echo "[slurm smoke] $SECONDS s: a training job of two tasks, each a torchrun node"
cp -a "$slurm_results" "$two_tasks"
rm -rf "$two_tasks/runs/$cell"
python3 - "$scratch/two_tasks.yaml" <<'PY'
import sys

import yaml

config = yaml.safe_load(open("config/smoke.yaml"))
config["scale"] = {**config.get("scale", {}), "nodes": 2, "placement": "split"}
open(sys.argv[1], "w").write(yaml.safe_dump(config, sort_keys=False))
PY
timeout -s KILL 900 snakemake "$two_tasks/runs/$cell/done.json" --profile workflow/profiles/slurm-ci \
    --configfile "$scratch/two_tasks.yaml" --config results="$two_tasks" --set-resources train:nodes=1 \
    >"$scratch/two_tasks.log" 2>&1 || { tail -50 "$scratch/two_tasks.log"; cat "$two_tasks/logs/train/$cell.log"; exit 1; }
grep -h "rendezvous\|graft.planning.launch\|srun --ntasks" "$two_tasks/logs/train/$cell.log" "$scratch/two_tasks.log" | head -3 || true
python3 tests/helpers/compare_results.py "$local_results" "$two_tasks"
weights=0
for file in "$local_results/runs/$cell"/checkpoints/step_*/*/model.safetensors; do
    cmp "$file" "$two_tasks/runs/$cell/${file#"$local_results/runs/$cell/"}"
    weights=$((weights + 1))
done
echo "the two-task job's checkpoints: $weights weight files identical to the one-process run's"

# Training jobs that Slurm stops: its sbatch asks for SIGURG 300 s before the time limit (the executor plugin's
# slurm_extra, as the Slurm profiles set it), and preemption sends SIGTERM to the job's steps (as `scancel
# --signal=TERM` does); either way the trainer finishes or drops its step, saves and exits, and Snakemake's retry
# resumes the run. On a copy of the Slurm run's tree without one GRAFT cell, that cell trains 20 steps
# (checkpoint_every 20, so that a stop's checkpoint is an interim one). Its first job is warned: once it trains, its
# trainer is paused and the job's limit cut to 5 minutes, within the warning; Slurm sends the warning at its next
# check of the limits (every 30 s), with a SIGCONT before it, so that it lands mid-run on a machine of any speed. The
# retry is sent SIGTERM once it has trained a step; the third job is requeued by Slurm (`scontrol requeue`, as
# preemption with PreemptMode=REQUEUE does: SIGTERM, then the same job id runs again with SLURM_RESTART_COUNT 1) once
# it has trained a step, and its second run ends the run, which must have the metrics, trajectories and weights of
# the same cell trained here without a stop. About 200 s on a busy 2-core machine.
stopped="$scratch/slurm_stopped"
unstopped="$scratch/unstopped"
cell=graft/P1/seed0
echo "[slurm smoke] $SECONDS s: training jobs stopped by Slurm's warning before the time limit and by SIGTERM"
cp -a "$slurm_results" "$stopped"
rm -rf "$stopped/runs/$cell"
cp -a "$stopped" "$unstopped"
python3 - "$scratch/twenty_steps.yaml" <<'PY'
import sys

import yaml

config = yaml.safe_load(open("config/smoke.yaml"))
config["train"].update(steps=20, checkpoint_every=20)
# the tree's other cells finished 2 steps without their resume state: kept as they are, not trained to 20
config["workflow"]["changed_runs"] = "keep"
open(sys.argv[1], "w").write(yaml.safe_dump(config, sort_keys=False))
PY
timeout -s KILL 900 snakemake "$unstopped/runs/$cell/done.json" --cores 2 --configfile "$scratch/twenty_steps.yaml" \
    --config results="$unstopped" >"$scratch/unstopped.log" 2>&1 &
reference=$!
timeout -s KILL 900 snakemake "$stopped/runs/$cell/done.json" --profile workflow/profiles/slurm-ci --retries 2 \
    --configfile "$scratch/twenty_steps.yaml" --config results="$stopped" \
    --set-resources "train:slurm_extra='--signal=URG@300'" >"$scratch/stopped.log" 2>&1 &
workflow=$!

# The pid of the trainer of running Slurm job $1, paused (SIGSTOP) once the run has more than $2 metric rows.
paused_trainer() {
    for _ in $(seq 3000); do
        [ "$(cat "$stopped/runs/$cell/metrics.jsonl" 2>/dev/null | wc -l)" -gt "$2" ] && break
        sleep 0.1
    done
    # the oldest match: a child the trainer forks shares its command line until it execs
    local pid
    pid=$(pgrep -o -f "^[^ ]*python[^ ]* [^ ]*graft train .* --out $stopped/runs/$cell " || true)
    [ -n "$pid" ] || { echo "no trainer of job $1 found" >&2; tail -30 "$scratch/stopped.log" >&2; return 1; }
    kill -STOP "$pid"
    echo "$pid"
}

# Wait for Slurm job $1 to end, then keep its training log as $2 (before a retry writes its own) and show its stop.
stopped_log() {
    wait_job_end "$1"
    cp "$stopped/logs/train/$cell.log" "$2"
    grep '"event": "stopped"' "$2" || { echo "job $1 did not stop"; tail "$2"; return 1; }
}

job=$(running_job train)
[ -n "$job" ] || { echo "no running training job to warn"; tail -30 "$scratch/stopped.log"; exit 1; }
trainer=$(paused_trainer "$job" 0)
scontrol update JobId="$job" TimeLimit=5
stopped_log "$job" "$scratch/warned.log"
job=$(running_job train)
[ -n "$job" ] || { echo "no retry of the warned job"; tail -30 "$scratch/stopped.log"; exit 1; }
trainer=$(paused_trainer "$job" "$(wc -l <"$stopped/runs/$cell/metrics.jsonl")")
scancel --signal=TERM "$job"
kill -CONT "$trainer"
stopped_log "$job" "$scratch/terminated.log"
job=$(running_job train)
[ -n "$job" ] || { echo "no third job to requeue"; tail -30 "$scratch/stopped.log"; exit 1; }
trainer=$(paused_trainer "$job" "$(wc -l <"$stopped/runs/$cell/metrics.jsonl")")
scontrol requeue "$job"
kill -CONT "$trainer"
stopped_log "$job" "$scratch/requeued.log"
wait "$workflow" || { tail -50 "$scratch/stopped.log"; exit 1; }
wait "$reference" || { tail -50 "$scratch/unstopped.log"; exit 1; }
grep -q "stopped by SIGURG" "$scratch/warned.log" && grep -q "stopped by SIGTERM" "$scratch/terminated.log" &&
    grep -q "stopped by SIGTERM" "$scratch/requeued.log" || {
    echo "the jobs stopped on other signals than Slurm's warning, SIGTERM and the requeue's SIGTERM"; exit 1; }
# Slurm keeps a finished job in memory for MinJobAge (300 s) and counts its requeues (CI keeps no accounting)
scontrol show job "$job" | grep -q "Restarts=1" || { echo "job $job was not requeued"; exit 1; }
trained=$(grep -c "Job .* has been submitted with SLURM jobid" "$scratch/stopped.log" || true)
[ "$trained" -eq 3 ] || {
    echo "expected the warned job, the terminated retry and a third, requeued job, got $trained"; exit 1; }
python3 tests/helpers/compare_results.py --everything "$unstopped" "$stopped"
