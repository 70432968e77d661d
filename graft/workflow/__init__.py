"""What the Snakemake workflow computes from graft: each job's params and the runs a config edit would change. It
sits beside the command line, above training and planning, whose decisions it repeats before any job is submitted."""
