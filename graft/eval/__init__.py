"""pass@1 of checkpoints on the benchmarks, and the complementarity analysis of a model pair (Figure 1)."""
