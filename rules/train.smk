rule train:
    """One training cell: GRPO, co-training of a pair, or archive replay. Snakemake runs the job only when done.json
    is missing or stale: a killed or stopped run resumes, a finished one with the same settings is kept (a retry
    evaluates what it lacks), a longer train.steps continues it; one of other settings stops the workflow before
    any job unless workflow.changed_runs says to keep or retrain it (graft/workflow/reruns.py).
    """
    input:
        unpack(train_inputs),
    output:
        **({"evals": directory(EVAL_DIR)} if EVAL_IN_TRAIN else {}),
        done=str(RUN.done),
    log:
        f"{R}/logs/train/{{method}}/{{cell}}/seed{{seed}}.log",
    priority: lambda wc: TRAIN_WORK[cell_key(wc)]
    conda:
        COMPUTE_ENV
    threads: CFG.workflow.threads
    resources:
        **train_nodes(),
        **site_resources("train"),
        **stop_signal(),
        # the shell's, for the record of a failure on the last attempt (graft.workflow.failures); no Slurm resource
        attempt=lambda wc, attempt: attempt,
    params:
        **setting_params(
            {k: (train_settings(c), c.models) for k, c in CELLS.items()}, cell_key
        ),
        config=snapshot_param,
        out=lambda wc: cell_of(wc).run_dir(TREE).root,
        models=lambda wc: ",".join(cell_of(wc).models),
        archive=lambda wc: (
            f"--peer-archive {shlex.quote(str(cell_of(wc).archive(TREE)))}"
            if cell_of(wc).peer
            else ""
        ),
        evaluate=lambda wc, output: (
            f"--eval-dir {shlex.quote(output.evals)}" if EVAL_IN_TRAIN else ""
        ),
        # several nodes: srun asks for the CPUs each task has (Snakemake's default: the rule's threads)
        launcher=lambda wc, resources, threads: train_launcher(
            CFG.scale,
            resources.get("cpus_per_task") or threads,
            resources.get("nodes"),
        ),
        threads_each=lambda wc, threads: max(1, threads // CFG.scale.processes),
    shell:
        # On SIGTERM (preemption) the trainer saves before it exits: the shell waits for it instead of ending first,
        # which would end the Slurm job step and kill the trainer mid-save. --resume alone: a retry continues, a
        # finished run is kept (graft.train.run_state); a run of other settings is retrained only by choice, its
        # records moved aside before the jobs are planned (graft.workflow.reruns.retrain_changed). A failure on the
        # last attempt is recorded beside the run (graft.workflow.failures), which moves the cells waiting for it to
        # another lane of the disk budget's (graft.planning.turns).
        "trap : TERM; {params.launcher} train --config {params.config:q} --method {wildcards.method} --models {params.models}"
        " --seed {wildcards.seed} --out {params.out:q} --resume --threads {params.threads_each}"
        " {params.archive} {params.evaluate} 2> {log:q} || {{ code=$?; python -m graft.workflow.failures"
        " --run {params.out:q} --attempt {resources.attempt} --exit $code 2>> {log:q}; exit $code; }}"
