#!/usr/bin/env bash
# The main job's first jobs on this fresh clone (the toy data, the three warm-ups built from scratch, and one GRPO
# n=8 cell with its evaluations), then their fingerprint against the checked-in record: the same commit gives the
# same digits on every x86-64 machine of one CPU vendor (graft/numerics.py, docs/reproducibility.md). A difference
# prints the file, what differs and the setting to look at. Then the rebuilt models against the shipped ones
# (toy-models/), byte for byte, where this machine's CPU vendor is the one that built them. About 10 minutes on 2
# cores (the main job's run of these rules: data 14 s, warm-ups 332 + 291 s side by side and then octo's 258 s
# beside the cell's 49 s). Run from the repository root inside the project's venv.
set -euo pipefail
results=results/default
# toy.shipped_models: false: the warm-ups run, so the record and the shipped files are checked against a build
snakemake --cores 2 "$results/toy/models/smol" "$results/toy/models/qwen" "$results/toy/models/octo" \
    "$results/runs/grpo_n8/smol/seed0/done.json" --config 'toy={shipped_models: false}'
# The record of this machine's CPU vendor where one is checked in: under the same pin AMD EPYC and Intel Xeon give
# different digits (docs/reproducibility.md); default.json is the AMD EPYC one.
record=config/digests/default.json
vendor=$(python -c "from graft.numerics import cpu_vendor; print(cpu_vendor())")
if [ -f "config/digests/default.$vendor.json" ]; then record="config/digests/default.$vendor.json"; fi
graft digest --results "$results" --cell grpo_n8/smol/seed0 --check "$record"
# The shipped models are one vendor's build: a machine of that vendor must rebuild them byte for byte; another
# vendor's rebuild gives its own digits, which the record above has just checked.
shipped_on=$(python -c "import json; print(json.load(open('toy-models/manifest.json'))['built_on']['vendor'])")
shipped_cpu=$(python -c "import json; print(json.load(open('toy-models/manifest.json'))['built_on']['cpu'])")
if [ "$vendor" = "$shipped_on" ]; then
    for model in $(python -c "import json; print(*json.load(open('toy-models/manifest.json'))['models'])"); do
        diff -r -x '.*' "toy-models/$model" "$results/toy/models/$model" # Snakemake's hidden timestamp aside
    done
    echo "digest: the rebuilt toy models equal the shipped ones (toy-models/, built on $shipped_cpu) byte for byte"
else
    echo "digest: the shipped toy models (toy-models/) are the $shipped_cpu build; this machine's CPU vendor is" \
        "$vendor, so its rebuild was compared with the digits recorded for $vendor ($record) instead"
fi
