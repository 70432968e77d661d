#!/usr/bin/env bash
# Sourced by the Slurm scripts of CI: start a single-node Slurm cluster (Debian's slurm-wlm and munge, installed
# by .ci/slurm_packages.sh; needs root) with its state under a new $scratch directory, and stop its daemons when
# the sourcing script exits.
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

bash .ci/slurm_packages.sh
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
