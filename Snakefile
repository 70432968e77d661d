from snakemake.utils import min_version, validate

min_version("8.0")


# The embedded default, unless config files are given with --configfile: Snakemake would otherwise merge them
# into the default key by key, and a smaller config would inherit the default's extra models and pairs.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


validate(config, "workflow/schemas/config.schema.yaml")


report: "workflow/report/workflow.rst"


include: "rules/common.smk"
include: "rules/config.smk"
include: "rules/data.smk"
include: "rules/models.smk"
include: "rules/train.smk"
include: "rules/eval.smk"
include: "rules/report.smk"


rule all:
    default_target: True
    input:
        all_targets(),
