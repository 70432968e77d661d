import json


rule resolve_methods:
    """Resolve and validate every method preset (built-in and from the config) before any compute."""
    input:
        ancient(RUN_CONFIG),
    output:
        str(TREE.methods),
    log:
        f"{R}/logs/resolve_methods.log",
    conda:
        "../envs/graft.yaml"
    resources:
        **site_resources("resolve_methods"),
    params:
        methods=lambda wc: json.dumps(config.get("methods", {}), sort_keys=True),
    shell:
        "graft methods --config {input} --out {output} 2> {log}"
