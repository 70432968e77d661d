import json
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


if SELECTION_RUNS:

    rule reevaluate_selected:
        """The paper's protocol: each model's selected checkpoint (report.selection) evaluated
        eval.selection_runs more times with fresh seeds; the report scores it by their mean.
        """
        input:
            config=ancient(RUN_CONFIG),
            done=str(RUN.done),
            evals=EVAL_DIR,
        output:
            directory(SELECTED_DIR),
        log:
            f"{R}/logs/eval_selected/{{method}}/{{cell}}/seed{{seed}}.log",
        conda:
            COMPUTE_ENV
        threads: CFG.workflow.threads
        params:
            run=lambda wc, input: Path(input.done).parent,
            settings=lambda wc: eval_settings()
            + json.dumps(config.get("report", {}).get("selection", "test_best")),
        shell:
            "graft reevaluate --config {input.config} --run {params.run} --evals {input.evals}"
            " --out-dir {output} --threads {threads} 2> {log}"
