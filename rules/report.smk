from pathlib import Path


rule report:
    """Table 1, Table 2, the stored-trajectory, selection and clipping tables, Figures 1, 3a and 3b, of the cells
    rule all runs (workflow.main_cells)."""
    input:
        evals=all_eval_outputs(MAIN.values()),
        runs=[str(c.run_dir(TREE).done) for c in MAIN.values()],
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
    resources:
        **site_resources("report"),
    params:
        **setting_params({None: (report_params(CFG), (), (), "report")}),
        config=snapshot_param,
        out=lambda wc, output: Path(output.summary).parent,
        results=lambda wc, output: R,
        cells="main",
    shell:
        "graft report --config {params.config:q} --results {params.results:q} --out {params.out:q}"
        " --cells {params.cells} 2> {log:q}"


if REPORT_FULL is not REPORT:

    use rule report as report_full with:
        input:
            evals=all_eval_outputs(CELLS.values()),
            runs=[str(c.run_dir(TREE).done) for c in CELLS.values()],
        output:
            summary=str(REPORT_FULL.summary),
            tables=list(map(str, REPORT_FULL.tables)),
            figures=list(map(str, REPORT_FULL.figures)),
        log:
            f"{R}/logs/report_full.log",
        params:
            **setting_params({None: (report_params(CFG), (), (), "report")}),
            config=snapshot_param,
            out=lambda wc, output: Path(output.summary).parent,
            results=lambda wc, output: R,
            cells="every",
