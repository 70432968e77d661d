from pathlib import Path


rule evaluate_base:
    """The model before any RL (step 0), once per model and main seed (the seed samples the responses)."""
    input:
        config=ancient(RUN_CONFIG),
        model=lambda wc: model_dir(wc.model),
        benchmarks=list(CFG.eval.benchmarks.values()) if CFG.eval else [],
    output:
        str(TREE.base_eval("{model}", "{seed}")),
    log:
        f"{R}/logs/eval/base/{{model}}/seed{{seed}}.log",
    conda:
        COMPUTE_ENV
    threads: CFG.workflow.threads
    params:
        settings=lambda wc: eval_settings(),
    shell:
        "graft evaluate --config {input.config} --model {wildcards.model} --checkpoint {input.model}"
        " --seed {wildcards.seed} --out {output} --threads {threads} 2> {log}"


if not EVAL_IN_TRAIN:

    rule evaluate_run:
        """pass@1 of every checkpoint of every model of one training cell: <model>/step_NNNNN.json inside."""
        input:
            config=ancient(RUN_CONFIG),
            done=str(RUN.done),
            benchmarks=list(CFG.eval.benchmarks.values()) if CFG.eval else [],
        output:
            directory(EVAL_DIR),
        log:
            f"{R}/logs/eval/{{method}}/{{cell}}/seed{{seed}}.log",
        conda:
            COMPUTE_ENV
        threads: CFG.workflow.threads
        params:
            run=lambda wc, input: Path(input.done).parent,
            settings=lambda wc: eval_settings(),
        shell:
            "graft evaluate --config {input.config} --run {params.run} --out-dir {output}"
            " --threads {threads} 2> {log}"
