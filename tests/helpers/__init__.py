"""Shared test code: the forced two-model world and the distributed test cases."""
