"""The real benchmark files, which this repository does not hold: ``GRAFT_BENCHMARKS`` names a directory with the
test sets as JSON Lines (math500.jsonl, aime24.jsonl, aime25.jsonl, amc23.jsonl, minerva_math.jsonl). The tests
that read them skip without it, saying so; CI sets it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REAL_BENCHMARKS = Path(os.environ.get("GRAFT_BENCHMARKS") or "/nonexistent")

needs_real_benchmarks = pytest.mark.skipif(
    not REAL_BENCHMARKS.is_dir(),
    reason="needs the real test sets: set GRAFT_BENCHMARKS to a directory holding math500.jsonl, aime24.jsonl, "
    "aime25.jsonl, amc23.jsonl and minerva_math.jsonl (JSON Lines with problem, answer or solution)",
)
