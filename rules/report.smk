import json
from pathlib import Path


rule report:
    """Table 1, Table 2, the stored-trajectory, selection and clipping tables, Figures 1, 3a and 3b."""
    input:
        config=ancient(RUN_CONFIG),
        evals=all_eval_outputs(),
        runs=[str(c.run_dir(TREE).done) for c in CELLS.values()],
    output:
        summary=report(
            str(REPORT.summary),
            caption="../workflow/report/summary.rst",
            category="Tables",
        ),
        tables=report(
            list(map(str, REPORT.tables)),
            caption="../workflow/report/tables.rst",
            category="Tables",
        ),
        figures=report(
            list(map(str, REPORT.figures)),
            caption="../workflow/report/figures.rst",
            category="Figures",
        ),
    log:
        f"{R}/logs/report.log",
    conda:
        "../envs/graft.yaml"
    params:
        out=lambda wc, output: Path(output.summary).parent,
        results=lambda wc, input: Path(input.config).parent,
        settings=lambda wc: json.dumps(config.get("report", {}), sort_keys=True),
    shell:
        "graft report --config {input.config} --results {params.results} --out {params.out} 2> {log}"
