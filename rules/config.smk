import yaml


rule snapshot_config:
    """The merged configuration (config file plus --config overrides) that every graft command reads."""
    output:
        RUN_CONFIG,
    log:
        f"{RESULTS}/logs/snapshot_config.log",
    params:
        merged=config,
    run:
        with open(output[0], "w") as handle:
            yaml.safe_dump(params.merged, handle, sort_keys=False)
