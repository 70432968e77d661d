"""The Slurm profile's pre-flight check: one line naming what is missing and how to run without Slurm."""

from graft.planning.preflight import slurm_problem


def test_a_machine_without_slurm_gets_one_line_naming_the_missing_tools():
    problem = slurm_problem(lambda tool: None)
    assert problem.count("\n") == 0 and "no sbatch or sacct" in problem and "snakemake --cores N all" in problem
    assert "no sacct on" in slurm_problem(lambda tool: "/usr/bin/sbatch" if tool == "sbatch" else None)


def test_a_slurm_machine_passes():
    assert slurm_problem(lambda tool: f"/usr/bin/{tool}") is None
