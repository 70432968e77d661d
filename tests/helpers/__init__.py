"""Shared test code: the forced two-model world, the distributed test cases, the tiny Qwen3 model, and
compare_results.py, the check that two results trees agree, which the workflow tests and CI's Slurm check both run."""
