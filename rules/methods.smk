rule resolve_methods:
    """Resolve and validate every method preset (built-in and from the config) before any compute."""
    input:
        RUN_CONFIG,
    output:
        f"{RESULTS}/methods.yaml",
    log:
        f"{RESULTS}/logs/resolve_methods.log",
    conda:
        "../envs/graft.yaml"
    shell:
        "graft methods --config {input} --out {output} 2> {log}"
