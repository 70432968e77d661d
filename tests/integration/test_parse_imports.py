"""What the workflow imports while Snakemake plans it: not torch, nor transformers. Every Snakemake invocation and
every Slurm job parses the workflow (the paper's dry run: 56 cells, 500 jobs); importing torch and transformers
there took 15 of the paper dry run's 25 seconds. The compute (training, evaluation) imports them in its jobs."""

from __future__ import annotations

import json
import sys

import pytest
from helpers.workflow_dir import run_in

# Snakemake run inside Python, with the modules loaded at its exit written to a file
PROBE = """
import atexit, json, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
from snakemake.cli import main
sys.argv[0] = "snakemake"
main()
"""


@pytest.mark.parametrize("config", ["config/paper.yaml", "config/config.yaml"])
def test_planning_the_workflow_imports_neither_torch_nor_transformers(tmp_path, config):
    loaded = tmp_path / "modules.json"
    dry_run = ["-n", "--quiet", "all", "--configfile", config, "--config", f"results={tmp_path / 'results'}"]
    proc = run_in(tmp_path, sys.executable, "-c", PROBE, loaded, *dry_run, "slurm={site_check: false}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    modules = set(json.loads(loaded.read_text()))
    assert "graft.planning.plan" in modules  # the probe saw the workflow parsed
    assert not {m for m in modules if m.split(".")[0] in ("torch", "transformers")}
