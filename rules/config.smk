rule resolve_methods:
    """Resolve and validate every method preset (built-in and from the config) before any compute."""
    output:
        str(TREE.methods),
    log:
        f"{R}/logs/resolve_methods.log",
    conda:
        "../envs/graft.yaml"
    resources:
        **site_resources("resolve_methods"),
    params:
        config=snapshot_param,
        methods=lambda wc: methods_params(CFG),
    shell:
        "graft methods --config {params.config:q} --out {output:q} 2> {log:q}"
