from snakemake.utils import min_version, validate

min_version("8.0")


configfile: "config/config.yaml"


validate(config, "workflow/schemas/config.schema.yaml")


include: "rules/common.smk"
include: "rules/config.smk"
include: "rules/methods.smk"


rule all:
    default_target: True
    input:
        all_targets(),
