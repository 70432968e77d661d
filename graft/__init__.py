"""GRAFT: gated replacement of answer-failed groups with peer trajectories (arXiv 2609.37868)."""

__version__ = "0.1.0"

# Before torch runs its first op: the same CPU float bits on every x86-64 machine (graft.numerics).
from graft.numerics import pin_cpu_numerics

pin_cpu_numerics()
