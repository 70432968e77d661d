"""Grade the benchmarks' reference solutions with the training grader, and the same solutions with another
problem's answer swapped into the box. Prints a table, writes bench/results/grade_references.json.

Usage: python bench/checks/grade_references.py [--benchmarks DIR]   (default: $GRAFT_BENCHMARKS)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/, for needs.py
from needs import require

from graft.data.problems import load_problems
from graft.engine.reward import Grader, last_boxed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = Path(__file__).resolve().parents[2]
    parser.add_argument(
        "--benchmarks",
        type=Path,
        default=Path(os.environ.get("GRAFT_BENCHMARKS", "")),
        help="directory of the real test sets as JSON Lines (math500.jsonl, aime24.jsonl, minerva_math.jsonl)",
    )
    parser.add_argument("--out", type=Path, default=root / "bench" / "results" / "grade_references.json")
    args = parser.parse_args()
    require(args.benchmarks / "math500.jsonl", "the real test sets", "--benchmarks DIR or GRAFT_BENCHMARKS=DIR")
    results = {}
    print(f"{'benchmark':<14} {'graded':>6} {'no box':>6} {'right':>7} {'swapped wrong':>14}")
    with Grader("math", timeout=5, workers=2) as grader:
        for name in ("math500", "aime24", "minerva_math"):
            path = args.benchmarks / f"{name}.jsonl"
            records = [json.loads(line) for line in path.read_text().splitlines() if line]
            problems = load_problems(path)
            boxes = [last_boxed(r.get("solution") or "") for r in records]
            keep = [i for i, b in enumerate(boxes) if b is not None]
            golds = [problems[i].answer for i in keep]
            responses = [records[i]["solution"] for i in keep]
            rng = random.Random(0)
            swapped = [
                responses[j].replace(
                    f"\\boxed{{{boxes[i]}}}", f"\\boxed{{{golds[(j + rng.randrange(1, len(golds))) % len(golds)]}}}"
                )
                for j, i in enumerate(keep)
            ]
            right = grader.grade(responses, golds).rewards
            wrong = grader.grade(swapped, golds).rewards
            results[name] = {
                "graded": len(keep),
                "without_boxed_answer": [problems[i].id for i in range(len(records)) if boxes[i] is None],
                "right_rate": sum(right) / len(keep),
                "failures": [
                    {"id": problems[i].id, "gold": problems[i].answer, "boxed": boxes[i]}
                    for j, i in enumerate(keep)
                    if right[j] != 1.0
                ],
                "swapped_wrong_rate": 1 - sum(wrong) / len(keep),
                "swapped_graded_right": [problems[i].id for j, i in enumerate(keep) if wrong[j] != 0.0],
            }
            r = results[name]
            print(
                f"{name:<14} {r['graded']:>6} {len(r['without_boxed_answer']):>6} {r['right_rate']:>7.2%} "
                f"{r['swapped_wrong_rate']:>14.2%}"
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
