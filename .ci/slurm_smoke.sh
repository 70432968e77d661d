#!/usr/bin/env bash
# Run the smoke config through a real single-node Slurm cluster (Debian's slurm-wlm and munge) with the
# project's Slurm executor profile machinery, and check that the outputs equal a local run's.
# Needs root and Debian packages; stops the daemons it started. Recipe: ../shared/notes/local-slurm.md.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v snakemake >/dev/null || { echo "snakemake is not on PATH: activate the project's environment"; exit 2; }
scratch=$(mktemp -d /tmp/graft-slurm.XXXXXX)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    sleep 2
    pkill -x slurmctld 2>/dev/null || true
    pkill -x slurmd 2>/dev/null || true
    pkill -x munged 2>/dev/null || true
}
trap cleanup EXIT

if ! command -v slurmctld >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
fi
mkdir -p /run/munge && chown munge:munge /run/munge
runuser -u munge -- /usr/sbin/munged
node=$(slurmd -C | head -1 | sed 's/NodeName=[^ ]*/NodeName=localhost NodeAddr=127.0.0.1/')
mkdir -p /etc/slurm "$scratch/state" "$scratch/spool"
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=graftci
SlurmctldHost=localhost
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$scratch/state
SlurmdSpoolDir=$scratch/spool
SlurmctldPidFile=$scratch/slurmctld.pid
SlurmdPidFile=$scratch/slurmd.pid
SlurmctldLogFile=$scratch/slurmctld.log
SlurmdLogFile=$scratch/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/linux
MinJobAge=300
ReturnToService=2
MpiDefault=none
$node
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
slurmctld -D > "$scratch/ctld.out" 2>&1 & pids+=($!)
slurmd -D -N localhost > "$scratch/d.out" 2>&1 & pids+=($!)
for _ in $(seq 60); do
    [ "$(sinfo -h -o %t 2>/dev/null | head -1)" = "idle" ] && break
    sleep 1
done
sinfo
srun -t 1 hostname

local_results="$scratch/local"
slurm_results="$scratch/slurm"
timeout -s KILL 900 snakemake all --cores 2 --configfile config/smoke.yaml --config results="$local_results" >"$scratch/local.log" 2>&1
timeout -s KILL 1500 snakemake all --profile workflow/profiles/slurm-ci --config results="$slurm_results" >"$scratch/slurm.log" 2>&1 || {
    tail -50 "$scratch/slurm.log"; exit 1; }
submitted=$(grep -c "Job .* has been submitted with SLURM jobid" "$scratch/slurm.log" || true)
echo "jobs submitted with sbatch: $submitted"
python3 .ci/compare_results.py "$local_results" "$slurm_results"
