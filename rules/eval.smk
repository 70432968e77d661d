rule evaluate_base:
    """The model before any RL (step 0), once per model."""
    input:
        config=ancient(RUN_CONFIG),
        model=lambda wc: model_dir(wc.model),
        benchmarks=list(CFG.eval.benchmarks.values()) if CFG.eval else [],
    output:
        f"{R}/eval/base/{{model}}/seed0/{{model}}/step_00000.json",
    log:
        f"{R}/logs/eval/base/{{model}}.log",
    conda:
        "../envs/graft.yaml"
    threads: CFG.workflow.threads
    params:
        settings=lambda wc: eval_settings(),
    shell:
        "graft evaluate --config {input.config} --model {wildcards.model} --checkpoint {input.model}"
        " --out {output} --threads {threads} 2> {log}"


rule evaluate_run:
    """pass@1 of every checkpoint of one model in one training cell, one JSON per checkpoint."""
    input:
        config=ancient(RUN_CONFIG),
        done=f"{R}/runs/{{method}}/{{cell}}/seed{{seed}}/done.json",
        benchmarks=list(CFG.eval.benchmarks.values()) if CFG.eval else [],
    output:
        [
            f"{R}/eval/{{method}}/{{cell}}/seed{{seed}}/{{model}}/step_{s:05d}.json"
            for s in STEPS
        ],
    log:
        f"{R}/logs/eval/{{method}}/{{cell}}/seed{{seed}}/{{model}}.log",
    conda:
        "../envs/graft.yaml"
    threads: CFG.workflow.threads
    params:
        run=lambda wc: f"{R}/{cell_of(wc).run_dir}",
        out_dir=lambda wc: f"{R}/eval/{wc.method}/{wc.cell}/seed{wc.seed}/{wc.model}",
        settings=lambda wc: eval_settings(),
    shell:
        "graft evaluate --config {input.config} --model {wildcards.model} --run {params.run}"
        " --out-dir {params.out_dir} --threads {threads} 2> {log}"
