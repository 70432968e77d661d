"""GRAFT: gated replacement of answer-failed groups with peer trajectories (arXiv 2609.37868)."""

__version__ = "0.1.0"
