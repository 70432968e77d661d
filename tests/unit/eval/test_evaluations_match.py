"""``graft prune`` and ``graft reevaluate`` read a run's evaluations to know which checkpoints its selection picks:
evaluations of another run (another seed's, or an older run of the same directory) are refused in one line naming
both, before anything is removed or evaluated."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from helpers.run_dirs import tree_digest

from graft.cli import main
from graft.eval.matching import checkpoint_sha256
from graft.results import RunDir, eval_file
from graft.train.checkpoint import write_manifest

ROOT = Path(__file__).resolve().parents[3]
STEPS = (1, 2, 3)


def make_run(root: Path, seed: int) -> RunDir:
    """A finished run of model ``m`` with three checkpoints whose weights differ by seed, and their manifests."""
    run = RunDir(root)
    run.run_json.parent.mkdir(parents=True)
    run.run_json.write_text(json.dumps({"models": ["m"], "seed": seed}))
    run.done.write_text("{}")
    for step in STEPS:
        model = run.checkpoint(step) / "m"
        model.mkdir(parents=True)
        (model / "config.json").write_text("{}")
        (model / "model.safetensors").write_bytes(bytes([seed, step]) * 64)
        (model / "optimizer.pt").write_bytes(b"resume state")
        write_manifest(run.checkpoint(step))
    return run


def evaluate_run(run: RunDir, out: Path, best: int, recorded: bool = True) -> Path:
    """The run's evaluations as ``graft evaluate --run`` writes them, checkpoint ``best`` scoring highest; without
    ``recorded``, as written before evaluations recorded their checkpoint's sha256."""
    for step in STEPS:
        checkpoint = run.checkpoint(step) / "m"
        score = 0.9 if step == best else 0.1 * step
        result = {
            "k": 1,
            "benchmarks": {"b": {"pass@1": score, "per_problem": {"p": [1]}}},
            "validation": {"pass@1": score, "per_problem": {"v": [1]}},
            "average": score,
            "model": "m",
            "checkpoint": str(checkpoint),
            "step": step,
        }
        if recorded:
            result["checkpoint_sha256"] = checkpoint_sha256(checkpoint)
        eval_file(out, "m", step).parent.mkdir(parents=True, exist_ok=True)
        eval_file(out, "m", step).write_text(json.dumps(result) + "\n")
    return out


def refused(argv: list[str], capsys, root: Path) -> str:
    before = tree_digest(root)
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("graft: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert tree_digest(root) == before  # nothing removed, renamed or written
    return err


def test_prune_keeps_the_checkpoint_its_own_evaluations_select(tmp_path):
    run = make_run(tmp_path / "run0", 0)
    evals = evaluate_run(run, tmp_path / "ev0", best=1)
    assert main(["prune", "--run", str(run.root), "--evals", str(evals)]) == 0
    assert json.loads(run.pruned.read_text())["kept"] == {"m": [1, 3]}
    assert (run.checkpoint(1) / "m").is_dir() and not (run.checkpoint(2) / "m").exists()
    # a pruned checkpoint keeps its manifest: its evaluations still match the run
    assert main(["prune", "--run", str(run.root), "--evals", str(evals)]) == 0


def test_prune_refuses_another_seeds_evaluations_naming_both(tmp_path, capsys):
    run0, run1 = make_run(tmp_path / "run0", 0), make_run(tmp_path / "run1", 1)
    evaluate_run(run0, tmp_path / "ev0", best=1)
    ev1 = evaluate_run(run1, tmp_path / "ev1", best=2)  # would select run0's step 2 and remove its step 1
    err = refused(["prune", "--run", str(run0.root), "--evals", str(ev1)], capsys, tmp_path)
    named = f"--evals: '{eval_file(ev1, 'm', 1)}' evaluated '{run1.checkpoint(1) / 'm'}', not checkpoint step_00001/m"
    assert f"{named} of --run '{run0.root}'" in err
    assert "(their model files differ)" in err and err.rstrip().endswith("nothing pruned")


def test_a_run_moved_with_its_evaluations_still_matches_them(tmp_path):
    run = make_run(tmp_path / "a" / "run0", 0)
    evaluate_run(run, tmp_path / "a" / "ev0", best=2)
    shutil.move(tmp_path / "a", tmp_path / "b")
    moved = RunDir(tmp_path / "b" / "run0")
    assert main(["prune", "--run", str(moved.root), "--evals", str(tmp_path / "b" / "ev0")]) == 0
    assert json.loads(moved.pruned.read_text())["kept"] == {"m": [2, 3]}


def test_evaluations_without_a_checkpoint_sha256_are_matched_by_path(tmp_path, capsys):
    run0, run1 = make_run(tmp_path / "run0", 0), make_run(tmp_path / "run1", 1)
    ev1 = evaluate_run(run1, tmp_path / "ev1", best=2, recorded=False)
    err = refused(["prune", "--run", str(run0.root), "--evals", str(ev1)], capsys, tmp_path)
    assert f"not checkpoint step_00001/m of --run '{run0.root}' (another path)" in err
    ev0 = evaluate_run(run0, tmp_path / "ev0", best=2, recorded=False)
    assert main(["prune", "--run", str(run0.root), "--evals", str(ev0)]) == 0


def test_an_older_run_of_the_same_directory_does_not_match_its_evaluations(tmp_path, capsys):
    run = make_run(tmp_path / "run0", 0)
    evals = evaluate_run(run, tmp_path / "ev0", best=1)
    shutil.rmtree(run.root)
    make_run(tmp_path / "run0", 7)  # retrained with --overwrite: the same paths, other weights
    err = refused(["prune", "--run", str(run.root), "--evals", str(evals)], capsys, tmp_path)
    assert "(their model files differ)" in err


def test_an_evaluation_of_a_step_the_run_lacks_is_refused(tmp_path, capsys):
    run = make_run(tmp_path / "run0", 0)
    evals = evaluate_run(run, tmp_path / "ev0", best=1)
    stray = json.loads(eval_file(evals, "m", 3).read_text()) | {"step": 9, "average": 1.0}
    eval_file(evals, "m", 9).write_text(json.dumps(stray))
    err = refused(["prune", "--run", str(run.root), "--evals", str(evals)], capsys, tmp_path)
    assert f"'{eval_file(evals, 'm', 9)}' evaluated" in err and "(the run has no such checkpoint)" in err


def test_an_evaluation_file_that_is_not_one_is_refused(tmp_path, capsys):
    run = make_run(tmp_path / "run0", 0)
    evals = evaluate_run(run, tmp_path / "ev0", best=1)
    eval_file(evals, "m", 2).write_text("[1, 2]\n")
    err = refused(["prune", "--run", str(run.root), "--evals", str(evals)], capsys, tmp_path)
    assert f"--evals: '{eval_file(evals, 'm', 2)}' is not an evaluation" in err


def test_reevaluate_refuses_another_seeds_evaluations_before_loading_anything(tmp_path, capsys):
    config = tmp_path / "config.yaml"
    config.write_text((ROOT / "config" / "smoke.yaml").read_text())  # its models are never loaded
    run0, run1 = make_run(tmp_path / "run0", 0), make_run(tmp_path / "run1", 1)
    ev1 = evaluate_run(run1, tmp_path / "ev1", best=2)
    argv = ["reevaluate", "--config", str(config), "--run", str(run0.root), "--evals", str(ev1)]
    err = refused([*argv, "--out-dir", str(tmp_path / "out")], capsys, tmp_path)
    assert "(their model files differ)" in err and err.rstrip().endswith("nothing re-evaluated")
