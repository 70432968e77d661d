"""The real benchmark files, which this repository does not hold: ``GRAFT_BENCHMARKS`` names a directory with the
test sets as JSON Lines (math500.jsonl, aime24.jsonl, aime25.jsonl, amc23.jsonl, minerva_math.jsonl). The tests
that read them skip without it, saying so, except in CI (the ``CI`` variable set, as .ci/run sets it), which has
the files: there a missing directory fails them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REAL_BENCHMARKS = Path(os.environ.get("GRAFT_BENCHMARKS") or "/GRAFT_BENCHMARKS-is-not-set")
IN_CI = bool(os.environ.get("CI"))

needs_real_benchmarks = pytest.mark.skipif(
    not REAL_BENCHMARKS.is_dir() and not IN_CI,
    reason="needs the real test sets: set GRAFT_BENCHMARKS to a directory holding math500.jsonl, aime24.jsonl, "
    "aime25.jsonl, amc23.jsonl and minerva_math.jsonl (JSON Lines with problem, answer or solution)",
)
