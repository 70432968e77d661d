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
        **setting_params({None: (methods_params(CFG), (), (), "methods")}),
        config=snapshot_param,
    shell:
        "graft methods --config {params.config:q} --out {output:q} 2> {log:q}"
