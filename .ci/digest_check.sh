#!/usr/bin/env bash
# The main job's first jobs on this fresh clone (the toy data, the three warm-ups, and one GRPO n=8 cell with its
# evaluations), then their fingerprint against the checked-in record: the same commit gives the same digits on every
# x86-64 machine with AVX2 (graft/numerics.py). A difference prints the file, what differs and the setting to look
# at. About 10 minutes on 2 cores (the main job's run of these rules: data 14 s, warm-ups 332 + 291 s side by side
# and then octo's 258 s beside the cell's 49 s). Run from the repository root inside the project's venv.
set -euo pipefail
results=results/default
snakemake --cores 2 "$results/toy/models/smol" "$results/toy/models/qwen" "$results/toy/models/octo" \
    "$results/runs/grpo_n8/smol/seed0/done.json"
# The record of this machine's CPU vendor where one is checked in: under the same pin AMD EPYC and Intel Xeon give
# different digits (docs/reproducibility.md); default.json is the AMD EPYC one.
record=config/digests/default.json
vendor=$(python -c "from graft.numerics import cpu_vendor; print(cpu_vendor())")
if [ -f "config/digests/default.$vendor.json" ]; then record="config/digests/default.$vendor.json"; fi
graft digest --results "$results" --cell grpo_n8/smol/seed0 --check "$record"
