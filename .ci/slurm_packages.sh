#!/usr/bin/env bash
# Debian's Slurm and munge for .ci/slurm_smoke.sh (needs root); nothing to do where slurmctld is installed.
set -euo pipefail
if ! command -v slurmctld >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
fi
