import json

import yaml


rule snapshot_config:
    """The merged configuration (config file plus --config overrides) that every graft command reads.

    Downstream rules take it as an ancient input and depend on the settings they use through params, so that
    editing, say, the report section does not rerun training.
    """
    output:
        RUN_CONFIG,
    log:
        f"{R}/logs/snapshot_config.log",
    params:
        merged=config,
    run:
        with open(output[0], "w") as handle:
            yaml.safe_dump(params.merged, handle, sort_keys=False)


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
    params:
        methods=lambda wc: json.dumps(config.get("methods", {}), sort_keys=True),
    shell:
        "graft methods --config {input} --out {output} 2> {log}"
