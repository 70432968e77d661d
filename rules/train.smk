rule train:
    """One training cell: GRPO, co-training of a pair, or archive replay; resumes a killed run."""
    input:
        unpack(train_inputs),
    output:
        f"{R}/runs/{{method}}/{{cell}}/seed{{seed}}/done.json",
    log:
        f"{R}/logs/train/{{method}}/{{cell}}/seed{{seed}}.log",
    conda:
        COMPUTE_ENV
    threads: CFG.workflow.threads
    params:
        out=lambda wc: f"{R}/{cell_of(wc).run_dir}",
        models=lambda wc: ",".join(cell_of(wc).models),
        archive=lambda wc: (
            f"--peer-archive {R}/{cell_of(wc).archive}" if cell_of(wc).peer else ""
        ),
        settings=lambda wc: train_settings(),
    shell:
        "graft train --config {input.config} --method {wildcards.method} --models {params.models}"
        " --seed {wildcards.seed} --out {params.out} --resume --threads {threads} {params.archive}"
        " 2> {log}"
