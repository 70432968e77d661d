localrules:
    prune_checkpoints,


rule prune_checkpoints:
    """After a training cell's last evaluation (every checkpoint evaluated, the selected ones re-evaluated), remove
    the model directories of the checkpoints that nothing reads any more: each model keeps the checkpoints that the
    selection rules pick and the last. Only rule all asks for it (not with workflow.keep_checkpoints); its output
    is a record of what was removed, no file that another rule reads, so nothing downstream reruns.
    """
    input:
        done=str(RUN.done),
        evals=EVAL_DIR,
        selected=SELECTED_DIR if SELECTION_RUNS else [],
    output:
        str(RUN.pruned),
    log:
        f"{R}/logs/prune/{{method}}/{{cell}}/seed{{seed}}.log",
    priority: FINISHING
    conda:
        "../envs/graft.yaml"
    params:
        run=lambda wc, input: Path(input.done).parent,
    shell:
        "graft prune --run {params.run:q} --evals {input.evals:q} 2> {log:q}"
