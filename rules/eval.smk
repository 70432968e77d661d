from pathlib import Path


rule evaluate_base:
    """The model before any RL (step 0), once per model and main seed (the seed samples the responses)."""
    input:
        model=lambda wc: model_dir(wc.model),
        benchmarks=list(CFG.eval.benchmarks.values()) if CFG.eval else [],
    output:
        str(TREE.base_eval("{model}", "{seed}")),
    log:
        f"{R}/logs/eval/base/{{model}}/seed{{seed}}.log",
    conda:
        COMPUTE_ENV
    threads: CFG.workflow.threads
    resources:
        **site_resources("evaluate_base"),
    params:
        **setting_params({m: eval_settings([m]) for m in CFG.models}, model_key),
        config=snapshot_param,
    shell:
        "graft evaluate --config {params.config:q} --model {wildcards.model} --checkpoint {input.model:q}"
        " --seed {wildcards.seed} --out {output:q} --threads {threads} 2> {log:q}"


if not EVAL_IN_TRAIN:

    rule evaluate_checkpoints:
        """pass@1 of one group of a training cell's checkpoints (workflow.eval_checkpoints_per_job; all of them by
        default), every model of the cell: <model>/step_NNNNN.json inside. Each finished evaluation is kept
        beside the run, so a killed and retried job evaluates only what is missing.
        """
        input:
            done=str(RUN.done),
            benchmarks=list(CFG.eval.benchmarks.values()) if CFG.eval else [],
        output:
            directory(EVAL_PART_DIR),
        log:
            f"{R}/logs/eval/{{method}}/{{cell}}/seed{{seed}}/part{{part}}.log",
        priority: FINISHING
        conda:
            COMPUTE_ENV
        threads: CFG.workflow.threads
        resources:
            **site_resources("evaluate_checkpoints"),
        params:
            **setting_params(
                {k: eval_settings(c.models) for k, c in CELLS.items()}, cell_key
            ),
            config=snapshot_param,
            run=lambda wc, input: Path(input.done).parent,
            steps=lambda wc: ",".join(map(str, EVAL_PARTS[int(wc.part)])),
        shell:
            "graft evaluate --config {params.config:q} --run {params.run:q} --steps {params.steps}"
            " --out-dir {output:q} --threads {threads} 2> {log:q}"

    localrules:
        collect_evaluations,

    rule collect_evaluations:
        """A training cell's checkpoint evaluations in one directory: its evaluation jobs' results side by side."""
        input:
            parts=lambda wc: [
                EVAL_PART_DIR.format(**wc, part=part)
                for part in range(len(EVAL_PARTS))
            ],
        output:
            directory(EVAL_DIR),
        log:
            f"{R}/logs/eval/{{method}}/{{cell}}/seed{{seed}}/collect.log",
        priority: FINISHING
        conda:
            "../envs/graft.yaml"
        shell:
            '(mkdir -p {output:q} && for part in {input.parts:q}; do cp -R "$part"/. {output:q}/; done) 2> {log:q}'


if SELECTION_RUNS:

    rule reevaluate_selected:
        """The paper's protocol: each model's selected checkpoint (report.selection) evaluated
        eval.selection_runs more times with fresh seeds; the report scores it by their mean.
        """
        input:
            done=str(RUN.done),
            evals=EVAL_DIR,
        output:
            directory(SELECTED_DIR),
        log:
            f"{R}/logs/eval_selected/{{method}}/{{cell}}/seed{{seed}}.log",
        priority: FINISHING
        conda:
            COMPUTE_ENV
        threads: CFG.workflow.threads
        resources:
            **site_resources("reevaluate_selected"),
        params:
            **setting_params(
                {
                    k: (reevaluate_params(CFG, c.models), c.models)
                    for k, c in CELLS.items()
                },
                cell_key,
            ),
            config=snapshot_param,
            run=lambda wc, input: Path(input.done).parent,
        shell:
            "graft reevaluate --config {params.config:q} --run {params.run:q} --evals {input.evals:q}"
            " --out-dir {output:q} --threads {threads} 2> {log:q}"
