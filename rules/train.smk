rule train:
    """One training cell: GRPO, co-training of a pair, or archive replay. Snakemake runs the job only when done.json
    is missing or stale: a killed or stopped run resumes (--resume), a finished one is retrained (--overwrite), as
    --forcerun or a changed training setting asks (graft/train/run_state.py)."""
    input:
        unpack(train_inputs),
    output:
        **({"evals": directory(EVAL_DIR)} if EVAL_IN_TRAIN else {}),
        done=str(RUN.done),
    log:
        f"{R}/logs/train/{{method}}/{{cell}}/seed{{seed}}.log",
    conda:
        COMPUTE_ENV
    threads: CFG.workflow.threads
    resources:
        **train_nodes(),
        **site_resources("train"),
        **stop_signal(),
    params:
        out=lambda wc: cell_of(wc).run_dir(TREE).root,
        models=lambda wc: ",".join(cell_of(wc).models),
        archive=lambda wc: (
            f"--peer-archive {cell_of(wc).archive(TREE)}" if cell_of(wc).peer else ""
        ),
        evaluate=lambda wc, output: (
            f"--eval-dir {output.evals}" if EVAL_IN_TRAIN else ""
        ),
        # several nodes: srun asks for the CPUs each task has (Snakemake's default: the rule's threads)
        launcher=lambda wc, resources, threads: train_launcher(
            CFG.scale,
            resources.get("cpus_per_task") or threads,
            resources.get("nodes"),
        ),
        threads_each=lambda wc, threads: max(1, threads // CFG.scale.processes),
        settings=lambda wc: train_settings()
        + (eval_settings() if EVAL_IN_TRAIN else ""),
    shell:
        # On SIGTERM (preemption) the trainer saves before it exits: the shell waits for it instead of ending first,
        # which would end the Slurm job step and kill the trainer mid-save.
        "trap : TERM; {params.launcher} train --config {input.config} --method {wildcards.method} --models {params.models}"
        " --seed {wildcards.seed} --out {params.out} --resume --overwrite --threads {params.threads_each} {params.archive} {params.evaluate}"
        " 2> {log}"
