#!/usr/bin/env bash
# The main job's first jobs on this fresh clone (the toy data, the smol and qwen warm-ups side by side, and one
# GRPO n=8 cell with its evaluations), then their fingerprint against the checked-in record: the same commit gives
# the same digits on every x86-64 machine with AVX2 (graft/numerics.py). A difference prints the file, what
# differs and the setting to look at. The octo warm-up (recorded too; a user checks it with a plain
# `graft digest --check`) is left out because on 2 cores it would run after the other two and about double this
# step's time, which CI's 90 minutes do not allow. About 17 minutes on 2 cores (1,050 s measured). Run from the
# repository root inside the project's venv.
set -euo pipefail
results=results/default
snakemake --cores 2 "$results/toy/models/smol" "$results/toy/models/qwen" "$results/runs/grpo_n8/smol/seed0/done.json"
graft digest --results "$results" --cell grpo_n8/smol/seed0 --models smol,qwen --check config/digests/default.json
