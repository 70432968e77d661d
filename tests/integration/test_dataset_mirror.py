"""``graft fetch dataset`` through ``datasets.load_dataset`` on a local copy of the hub's repositories
(``GRAFT_DATASETS_MIRROR``): Parquet under data/ and JSON Lines at the top, with the hub's split names and each
source's own field names, as the workflow's fetch_dataset rule runs it. The hub is off (``HF_HUB_OFFLINE=1``), so
a fetch that looked past the mirror would fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from graft.data.benchmarks import HUB, MIRROR_VARIABLE
from graft.data.fetch import MATH_TEST, MATH_TRAIN

ROOT = Path(__file__).resolve().parents[2]

MATH500 = [
    {"problem": "What is $1+1$?", "solution": "It is $\\boxed{2}$.", "answer": "2", "unique_id": "test/a/1.json"},
    {"problem": "What is $2+2$?", "solution": "It is $\\boxed{4}$.", "answer": "4", "unique_id": "test/a/2.json"},
]
# MATH's test split: the two MATH500 problems and three others, gold only inside the solution's last box
MATH_TEST_ROWS = [
    *({"problem": r["problem"], "solution": r["solution"], "level": "Level 1", "type": "Algebra"} for r in MATH500),
    *(
        {
            "problem": f"Compute ${k}^2$.",
            "solution": f"${k}^2 = \\boxed{{{k * k}}}$",
            "level": "Level 2",
            "type": "Algebra",
        }
        for k in (3, 5, 7)
    ),
]


def write_parquet(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


@pytest.fixture(scope="module")
def mirror(tmp_path_factory) -> Path:
    """Four repositories as the hub lays them out, each under <owner>/<name>."""
    root = tmp_path_factory.mktemp("mirror")
    math500 = root / HUB["math500"].repo / "test.jsonl"
    math500.parent.mkdir(parents=True)
    math500.write_text("".join(json.dumps(r) + "\n" for r in MATH500))
    write_parquet(
        root / HUB["aime24"].repo / "data" / "train-00000-of-00001.parquet",
        [{"id": 60, "problem": "Find $x$ if $x+1=3$.", "solution": "so $x=2$", "answer": "2", "year": 2024}],
    )
    # AMC23 names its problem field "question" and its answer is a number
    write_parquet(
        root / HUB["amc23"].repo / "data" / "test-00000-of-00001.parquet",
        [{"id": 0, "question": "How many sides has a hexagon?", "answer": 6.0}],
    )
    math = root / MATH_TEST.repo / "data"
    write_parquet(math / "test-00000-of-00001.parquet", MATH_TEST_ROWS)
    write_parquet(math / "train-00000-of-00001.parquet", MATH_TEST_ROWS[2:])
    return root


def fetch(name: str, out: Path, mirror: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, MIRROR_VARIABLE: str(mirror), "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "graft.cli", "fetch", "dataset", "--name", name, "--out", str(out)]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "math500",
            [
                {"id": "test/a/1.json", "problem": "What is $1+1$?", "answer": "2"},
                {"id": "test/a/2.json", "problem": "What is $2+2$?", "answer": "4"},
            ],
        ),
        ("aime24", [{"id": "60", "problem": "Find $x$ if $x+1=3$.", "answer": "2"}]),
        ("amc23", [{"id": "0", "problem": "How many sides has a hexagon?", "answer": "6.0"}]),
        (
            "math_train",
            [{"id": str(i), "problem": f"Compute ${k}^2$.", "answer": str(k * k)} for i, k in enumerate((3, 5, 7), 1)],
        ),
    ],
)
def test_a_dataset_is_fetched_from_the_mirror_as_normalised_json_lines(mirror, tmp_path, name, expected):
    out = tmp_path / f"{name}.jsonl"
    done = fetch(name, out, mirror, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert rows(out) == expected


def test_the_validation_set_is_math_test_outside_math500_from_the_mirror(mirror, tmp_path):
    out = tmp_path / "math_validation.jsonl"
    done = fetch("math_validation", out, mirror, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    got = rows(out)
    assert sorted(r["problem"] for r in got) == [f"Compute ${k}^2$." for k in (3, 5, 7)]
    assert all(r["answer"] == str(int(r["problem"][9]) ** 2) for r in got)


def test_a_mirror_without_the_repository_or_its_split_is_refused_in_one_line(mirror, tmp_path):
    empty = tmp_path / "empty-mirror"
    empty.mkdir()
    missing = fetch("math500", tmp_path / "a.jsonl", empty, tmp_path)
    assert missing.returncode == 2
    assert missing.stderr.strip() == (
        f"graft: error: {MIRROR_VARIABLE}={empty}: no folder {str(empty / HUB['math500'].repo)!r}; expected a copy "
        f"of the hub's {HUB['math500'].repo!r} in the hub's layout"
    )
    # the hub's split of MATH train is "train"; a copy holding only "test" says so
    only_test = tmp_path / "only-test"
    write_parquet(only_test / MATH_TRAIN.repo / "data" / "test-00000-of-00001.parquet", MATH_TEST_ROWS)
    split = fetch("math_train", tmp_path / "b.jsonl", only_test, tmp_path)
    assert split.returncode == 2
    assert split.stderr.strip().endswith("has no split 'train'; its splits: test"), split.stderr[-2000:]
    # the repository's folder is there but holds nothing datasets reads
    (empty / HUB["aime24"].repo).mkdir(parents=True)
    no_files = fetch("aime24", tmp_path / "c.jsonl", empty, tmp_path)
    assert no_files.returncode == 2
    assert no_files.stderr.strip() == (
        f"graft: error: {MIRROR_VARIABLE}: {str(empty / HUB['aime24'].repo)!r} holds no data files that datasets reads "
        "(Parquet, JSON Lines, CSV, ... at its top or under data/, named by split)"
    )
    assert not any((tmp_path / f"{x}.jsonl").exists() for x in "abc")
