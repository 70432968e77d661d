"""The toy problem files that ``graft toy data`` writes, read back; a damaged one is one line naming its line."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graft.errors import ConfigError
from graft.toy.data import read_problems
from graft.toy.task import ToyProblem

PROBLEM = ToyProblem(id="add-1-2", family="add", level=1, problem="1+2", answer="3", solution="1+2=3")


def test_problems_read_back_as_written(tmp_path):
    path = tmp_path / "warmup.jsonl"
    path.write_text(json.dumps(PROBLEM.to_json()) + "\n\n" + json.dumps(PROBLEM.to_json()) + "\n")
    assert read_problems(path) == [PROBLEM, PROBLEM]


@settings(max_examples=40, deadline=None)
@given(
    st.one_of(
        st.text(min_size=1).filter(lambda t: t.strip() and "\n" not in t),
        st.dictionaries(st.text(max_size=5), st.integers(), min_size=1).map(json.dumps),
        st.just(json.dumps([1, 2])),
        st.just(json.dumps({**PROBLEM.to_json(), "extra": 1})),
    )
)
def test_a_damaged_line_is_refused_in_one_line_naming_it(tmp_path_factory, line):
    path = tmp_path_factory.mktemp("toy") / "warmup.jsonl"
    path.write_text(json.dumps(PROBLEM.to_json()) + "\n" + line + "\n")
    with pytest.raises(ConfigError) as refusal:
        read_problems(path)
    assert "\n" not in str(refusal.value) and "line 2 is not a toy problem" in str(refusal.value)
