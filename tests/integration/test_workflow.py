"""The Snakemake workflow end to end on the smoke config, its rerun behaviour, and the static checks."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from helpers.run_dirs import unfinish
from helpers.workflow_dir import job_counts, run_in, start_in, tool

from graft.config import load_config

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def run(where: Path, *cmd, check: bool = False, timeout: float = 1800, env: dict[str, str] | None = None):
    """``cmd`` in the working directory of its own under ``where`` (helpers.workflow_dir), never the checkout."""
    return run_in(where, *cmd, check=check, timeout=timeout, env=env)


def smk_cmd(results: Path, *args, cores: int = 2) -> list[str]:
    """Snakemake on the smoke config with its results under ``results``."""
    return [
        tool("snakemake"),
        *map(str, args),
        "--cores",
        str(cores),
        "--configfile",
        "config/smoke.yaml",
        "--config",
        f"results={results}",
    ]


def smk(results: Path, *args, check: bool = True):
    """Snakemake on the smoke config, in the working directory beside ``results``, which keeps Snakemake's records
    of that tree."""
    return run(results.parent, *smk_cmd(results, *args), check=check)


def start_smk(results: Path, *args, log: Path | None = None, cores: int = 2) -> subprocess.Popen:
    """Snakemake on the smoke config in the background (helpers.workflow_dir.start_in)."""
    return start_in(results.parent, *smk_cmd(results, *args, cores=cores), log=log)


def wait_for(event, proc: subprocess.Popen, what: str, timeout: float = 300) -> None:
    """Poll ``event`` until it holds; fail if ``proc`` ends first or ``timeout`` seconds pass. The timeout is far
    above the wait on a slow machine: it only keeps a broken run from hanging the suite."""
    deadline = time.monotonic() + timeout
    while not event():
        if proc.poll() is not None:  # it may have ended just after the event
            assert event(), f"Snakemake ended before {what}"
            return
        assert time.monotonic() < deadline, f"no {what} within {timeout:.0f} s"
        time.sleep(0.01)


def jobs_finished(log: str, rule: str) -> set[Path]:
    """The outputs of the jobs of ``rule`` that a Snakemake log reports finished. Snakemake reports a job finished
    only after recording it complete, so a rerun after a kill does not redo these; a job whose output exists
    without the report may be redone."""
    outputs = {}
    for block in re.finditer(rf"^(?:local)?rule {rule}:\n((?:    .*\n)+)", log, re.M):
        fields = dict(re.findall(r"^    (\w+): (.*)$", block.group(1), re.M))
        outputs[fields["jobid"]] = [Path(p) for p in fields["output"].split(", ")]
    done = re.findall(rf"^Finished jobid: (\d+) \(Rule: {rule}\)$", log, re.M)
    return {path for jobid in done for path in outputs[jobid]}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """The smoke tree: ``snakemake all`` on config/smoke.yaml, in smoke0/results (.ci/run compares the Slurm smoke
    with it, so it stays as that run left it) with Snakemake's records of it in smoke0/workdir. Every test reads it
    only: one that changes a tree works on its own copy (``own_copy``, which Snakemake holds no record of); the
    tests that need Snakemake's records of it run dry runs (or build the HTML report) on it."""
    results = tmp_path_factory.mktemp("smoke") / "results"
    smk(results, "all")
    before = tree_digest(results)
    yield results
    assert tree_digest(results) == before, "a test changed the smoke tree: it changes its own copy (own_copy)"


def own_copy(smoke: Path, tmp_path: Path) -> Path:
    """A copy of the smoke tree under ``tmp_path`` (files keep their modification times), for a test to change."""
    results = tmp_path / "results"
    shutil.copytree(smoke, results, symlinks=True)
    return results


def test_smoke_workflow_writes_every_table_and_figure(smoke):
    names = ("table1", "table4", "table2_ablations", "table_stored", "table_selection", "table_clipping", "table_passk")
    names += ("table_cost",)
    for name in names:
        for ext in ("md", "csv", "tex"):
            assert (smoke / "report" / "tables" / f"{name}.{ext}").stat().st_size > 0
    for fig in ("fig1_complementarity", "fig3a_score_vs_cost", "fig3b_stored_vs_online"):
        assert (smoke / "report" / "figures" / f"{fig}.png").read_bytes()[:4] == b"\x89PNG"
    done = json.loads((smoke / "runs" / "graft" / "P1" / "seed0" / "done.json").read_text())
    assert done["models"] == ["smol", "qwen"] and done["checkpoints"] == ["step_00001", "step_00002"]
    evals = sorted((smoke / "eval" / "replay" / "smol_from_qwen" / "seed0" / "smol").iterdir())
    assert [p.name for p in evals] == ["step_00001.json", "step_00002.json"]


def test_every_finished_cell_is_pruned_and_holds_no_resume_state(smoke):
    """Rule all asks for each cell's pruned.json; with two checkpoints a model's selection rules and the last keep
    both, and no checkpoint keeps optimizer state once its run is done (train.keep_resume_state: false)."""
    done = sorted(smoke.glob("runs/*/*/seed*/done.json"))
    assert len(done) == 8 and all((d.parent / "pruned.json").is_file() for d in done)
    assert not list(smoke.glob("runs/*/*/seed*/checkpoints/**/optimizer.pt"))
    assert len(list(smoke.glob("runs/*/*/seed*/checkpoints/step_*/*/model.safetensors"))) == 2 * 10


def test_smoke_workflow_reevaluates_each_selected_checkpoint_with_fresh_seeds(smoke):
    selected = smoke / "eval_selected" / "graft" / "P1" / "seed0" / "smol"
    record = json.loads((selected / "selected.json").read_text())
    assert record["rule"] == "test_best" and record["runs"] == 2 and record["step"] in (1, 2)
    runs = [json.loads((selected / f"run_{r:02d}.json").read_text()) for r in range(2)]
    selecting = json.loads(Path(record["selecting_file"]).read_text())
    seeds = {selecting["seed"], *(r["seed"] for r in runs)}
    assert len(seeds) == 3 and all(r["step"] == record["step"] for r in runs)
    assert all(set(b["pass@k"]) == {"1", "2"} for r in runs for b in r["benchmarks"].values())
    table1 = (smoke / "report" / "tables" / "table1.md").read_text()
    assert "mean of 2 re-evaluations" in table1 and "first training run" in table1
    assert "Table 4" in (smoke / "report" / "tables" / "table4.md").read_text()
    cost = (smoke / "report" / "tables" / "table_cost.csv").read_text()
    assert "GRPO (n=8) + DS" in cost and "50.8" in cost


def test_html_report_holds_every_table_and_figure_with_its_caption(smoke, tmp_path):
    html = tmp_path / "report.html"
    smk(smoke, "--report", html)
    text = html.read_text()
    outputs = [*(smoke / "report" / "tables").iterdir(), *(smoke / "report" / "figures").iterdir()]
    assert len(outputs) > 10
    for path in outputs:
        assert path.name in text, path.name
    for caption in sorted((ROOT / "workflow" / "report").glob("*.rst")):
        first_words = " ".join(caption.read_text().split()[:6])
        assert first_words in text, caption.name


def test_second_run_does_nothing(smoke):
    """A dry run on the smoke tree, with Snakemake's records of it."""
    out = smk(smoke, "all", "--dry-run")
    assert "Nothing to be done" in out.stdout + out.stderr


def test_the_report_of_the_main_cells_names_them_and_draws_only_their_figures(smoke, tmp_path):
    """graft report --cells main (rule all's report where workflow.main_cells names fewer cells than the config
    runs): the summary's head says which cells, and the training-dynamics figures are of those cells only."""
    config = yaml.safe_load((smoke / "config.yaml").read_text())
    config["workflow"].update(pair_methods=["graft", "hacpo"], main_cells=["grpo_n8/smol", "graft/P1"])
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    out = tmp_path / "report"
    run(
        tmp_path,
        tool("graft"),
        "report",
        "--config",
        path,
        "--results",
        smoke,
        "--out",
        out,
        "--cells",
        "main",
        check=True,
    )
    assert (
        (out / "summary.md")
        .read_text()
        .startswith("The main job's cells only (rule all; workflow.main_cells: grpo_n8/smol, graft/P1)")
    )
    assert sorted(p.name for p in (out / "figures").glob("dynamics_*")) == ["dynamics_graft_P1.png"]
    # the smoke tree holds more runs (grpo_n8 of qwen, graft_no_gate, grpo_n8_ds): the tables leave them out
    selection = pd.read_csv(out / "tables" / "table_selection.csv")
    assert set(zip(selection.method, selection.cell, strict=True)) == {
        ("base", "smol"),
        ("base", "qwen"),
        ("grpo_n8", "smol"),
        ("graft", "P1"),
    }


def test_forcing_a_finished_cells_training_keeps_its_run_and_redoes_only_what_reads_it(smoke, tmp_path):
    """--forcerun on a finished cell's done.json runs its job again: the job finds the run finished and keeps it
    (no rule passes --overwrite); the jobs that read it rerun, no other cell's."""
    results = own_copy(smoke, tmp_path)
    target = results / "runs" / "graft_no_gate" / "P1" / "seed0" / "done.json"
    run_dir = target.parent
    before = tree_digest(run_dir, skip=("done.json",))
    out = smk(results, str(target), "--forcerun", str(target), "--dry-run")
    assert job_counts(out) == {"train": 1}
    smk(results, str(target), "--forcerun", str(target))
    log = results / "logs" / "train" / "graft_no_gate" / "P1" / "seed0.log"
    assert "holds this run, finished at 2 steps" in log.read_text()
    assert tree_digest(run_dir, skip=("done.json",)) == before
    downstream = {"evaluate_checkpoints": 1, "collect_evaluations": 1, "reevaluate_selected": 1, "prune_checkpoints": 1}
    assert job_counts(smk(results, "all", "--dry-run")) == {**downstream, "report": 1, "all": 1}


def tree_digest(root: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Every file under ``root`` (but those named in ``skip``) by its relative path, with its content's digest."""
    import hashlib

    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in skip
    }


def test_the_reason_a_job_reruns_names_the_settings_that_changed_and_no_other(smoke):
    """Snakemake prints the params that differ from the last run as the reason for a rerun: one param per setting,
    so an evaluation setting's change is named with its old and new value, and nothing else is. A dry run on the
    tree Snakemake recorded (a copy has no record to compare with)."""
    # the last --config's second value; in the working directory that holds Snakemake's records of the smoke tree
    proc = run(smoke.parent, *smk_cmd(smoke, "all", "--dry-run"), "eval={temperature: 0.5}")
    reasons = re.findall(r"reason: Params have changed since last execution: (.*)", proc.stdout + proc.stderr)
    assert reasons and "evaluate_base" in job_counts(proc)
    old = load_config(ROOT / "config" / "smoke.yaml").eval.temperature
    for reason in reasons:
        before, now = reason.split(" before: ", 1)[1].split(" now: ")
        assert before.strip() == f"'eval.temperature={old}'" and now.strip() == "'eval.temperature=0.5'", reason


def test_a_config_edit_stops_before_any_job_and_changes_nothing_until_the_user_chooses(smoke, tmp_path):
    """An edited training setting: the workflow, a dry run too, stops in a few lines naming each changed cell and
    field, and no file of the tree changes; keep plans no training; retrain moves every changed run's records and
    evaluations under replaced/ and trains the cells asked for anew. The tree is a copy, which Snakemake holds no
    record of: the choice must not rest on Snakemake's params."""
    results = own_copy(smoke, tmp_path)
    before = tree_digest(results)

    def smk_with(*args, config=(), check=True):  # one --config: a second one would replace the first
        cmd = [tool("snakemake"), *args, "--cores", "2", "--configfile", "config/smoke.yaml"]
        return run(tmp_path, *cmd, "--config", f"results={results}", *edit, *config, check=check)

    edit = ["train={lr: 4.0e-4}"]
    for dry in (["--dry-run"], []):
        proc = smk_with("all", *dry, check=False)
        assert proc.returncode != 0
        err = proc.stderr
        assert "training run(s) in" in err and "nothing was submitted" in err
        assert "grpo_n8/smol/seed0: settings.train.lr: 0.0002 -> 0.0004" in err
        assert "Traceback" not in err
        assert tree_digest(results) == before
    # commands that run no job act on nothing and stop for nothing: an unlock after a crash, a summary
    for jobless, config in (
        (["--unlock"], ()),
        (["--unlock"], ["workflow={changed_runs: retrain}"]),
        (["--summary"], ["workflow={changed_runs: retrain}"]),
    ):
        smk_with(*jobless, config=config)
        assert tree_digest(results) == before, jobless
    keep = smk_with("all", "--dry-run", config=["workflow={changed_runs: keep}"])
    assert "train" not in job_counts(keep)
    cell = results / "runs" / "grpo_n8" / "smol" / "seed0"
    evals = results / "eval" / "grpo_n8" / "smol" / "seed0"
    old_metrics = (cell / "metrics.jsonl").read_text()
    old_evals = tree_digest(evals)
    target = results / "eval_selected" / "grpo_n8" / "smol" / "seed0"
    smk_with(target, config=["workflow={changed_runs: retrain}"])
    kept = next((cell / "replaced").iterdir())
    assert (kept / "metrics.jsonl").read_text() == old_metrics
    assert tree_digest(kept / "evaluations") == old_evals
    assert json.loads((cell / "run.json").read_text())["settings"]["train"]["lr"] == 4e-4
    assert (cell / "metrics.jsonl").read_text() != old_metrics
    # the choice is the config's: every changed run was moved aside, and trains when a target asks for it
    other = results / "runs" / "grpo_n8" / "qwen" / "seed0"
    assert not (other / "run.json").exists() and (next((other / "replaced").iterdir()) / "metrics.jsonl").is_file()
    proc = smk_with("all", "--dry-run")
    assert "nothing was submitted" not in proc.stderr and job_counts(proc)["train"] >= 1


def test_after_a_killed_training_job_only_the_incomplete_cell_is_redone(smoke, tmp_path):
    """A cell whose job did not finish (in a copy of the smoke tree): no done.json, its newest checkpoint gone, none
    of the outputs downstream of it. Checkpoint 1 has no optimizer state (a finished run keeps none), so the job
    starts over."""
    results = own_copy(smoke, tmp_path)
    run_dir = results / "runs" / "graft" / "P1" / "seed0"
    unfinish(run_dir)
    shutil.rmtree(run_dir / "checkpoints" / "step_00002")
    shutil.rmtree(results / "eval" / "graft" / "P1" / "seed0")
    shutil.rmtree(results / "report")
    counts = job_counts(smk(results, "all", "--dry-run"))
    expected = {"train": 1, "evaluate_checkpoints": 1, "collect_evaluations": 1, "reevaluate_selected": 1}
    assert counts == {**expected, "prune_checkpoints": 1, "report": 1, "all": 1}
    smk(results, "all")
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [(m["step"], m["model"]) for m in metrics] == [(s, m) for s in range(2) for m in ("smol", "qwen")]
    assert (run_dir / "checkpoints" / "step_00002").is_dir()


def test_a_killed_job_and_a_killed_snakemake_rerun_to_the_uninterrupted_results(smoke, tmp_path):
    """Once one training job has finished (Snakemake's log reports it), kill the other mid-run (SIGKILL, from its
    run lock's pid), then Snakemake itself with all it still runs; unlock and rerun: the finished cell is not
    redone, and every evaluation equals the uninterrupted run's. It starts from the smoke tree with its two
    co-training cells and what follows from them removed (copies keep their mtimes), so two training jobs and their
    evaluations run, not the whole workflow again; on one core, so that the second training job starts after the
    first has finished."""
    results = own_copy(smoke, tmp_path)
    for method in ("graft", "graft_no_gate"):
        for stage in ("runs", "eval", "eval_parts", "eval_selected"):
            shutil.rmtree(results / stage / method / "P1" / "seed0")
    shutil.rmtree(results / "report")
    cells = job_counts(smk(results, "all", "--dry-run"))["train"]
    assert cells == 2
    kept = {done: done.stat().st_mtime for done in results.glob("runs/*/*/seed*/done.json")}
    log = tmp_path / "snakemake.log"
    proc = start_smk(results, "all", log=log, cores=1)
    try:
        victim = None

        def a_second_training_job_runs() -> bool:
            nonlocal victim
            finished = jobs_finished(log.read_text(), "train")
            if not finished:
                return False
            for lock in results.glob("runs/*/*/seed*/.lock"):
                if lock.parent / "done.json" in finished:
                    continue
                with contextlib.suppress(OSError, ValueError):
                    victim = (lock.parent, json.loads(lock.read_text())["pid"])
                    return True
            return False

        wait_for(a_second_training_job_runs, proc, "a training job finished and the other one running")
        run_dir, pid = victim
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        # Snakemake itself is killed once it has seen the job fail, as after a job lost on a real machine
        wait_for(lambda: "Error in rule train:" in log.read_text(), proc, "failed training job in Snakemake's log")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    # the state the kill meant to reach: one cell finished and recorded complete, the other killed before its end
    assert not (run_dir / "done.json").exists()
    finished = {p.parent: p.stat().st_mtime for p in results.glob("runs/*/*/seed*/done.json") if p not in kept}
    recorded = jobs_finished(log.read_text(), "train")
    settled = {run: mtime for run, mtime in finished.items() if run / "done.json" in recorded}
    assert recorded <= {run / "done.json" for run in finished}
    assert len(settled) == 1 and run_dir not in settled, (sorted(settled), run_dir)
    smk(results, "--unlock")
    counts = job_counts(smk(results, "all", "--rerun-incomplete", "--dry-run"))
    assert cells - len(finished) <= counts["train"] <= cells - len(settled)  # only the cells that had not finished
    smk(results, "all", "--rerun-incomplete")
    assert all(done.stat().st_mtime == mtime for done, mtime in ((d / "done.json", m) for d, m in settled.items()))
    assert all(done.stat().st_mtime == mtime for done, mtime in kept.items())
    compare = run(tmp_path, sys.executable, ROOT / "tests" / "helpers" / "compare_results.py", smoke, results)
    assert compare.returncode == 0, compare.stdout + compare.stderr


def test_a_killed_evaluation_job_evaluates_only_the_rest_when_rerun(smoke, tmp_path):
    """SIGKILL an evaluation job once it has finished its first checkpoint: Snakemake's rerun, which first deletes
    the job's directory output, evaluates only the checkpoints not yet done (the finished ones are kept beside the
    run), and every result file equals the uninterrupted run's, byte for byte."""
    results = own_copy(smoke, tmp_path)
    run_dir = results / "runs" / "grpo_n8" / "smol" / "seed0"
    eval_dir = results / "eval" / "grpo_n8" / "smol" / "seed0"
    shutil.rmtree(eval_dir)
    shutil.rmtree(results / "eval_parts" / "grpo_n8" / "smol" / "seed0")
    shutil.rmtree(run_dir / "evaluated")
    expected = {
        p.relative_to(smoke / "eval"): p.read_bytes() for p in (smoke / "eval" / "grpo_n8" / "smol").rglob("*.json")
    }
    steps = len(expected)
    assert steps >= 2
    jobs = {"evaluate_checkpoints": 1, "collect_evaluations": 1}
    assert job_counts(smk(results, eval_dir, "--dry-run")) == jobs
    proc = start_smk(results, eval_dir)
    try:
        wait_for(lambda: any(run_dir.glob("evaluated/*/*.key")), proc, "checkpoint evaluated")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    kept = len(list(run_dir.glob("evaluated/*/*.key")))
    assert 1 <= kept < steps, f"{kept} of {steps} checkpoints were done when the job was killed"
    smk(results, "--unlock")
    assert job_counts(smk(results, eval_dir, "--rerun-incomplete", "--dry-run")) == jobs
    smk(results, eval_dir, "--rerun-incomplete")
    log = results / "logs" / "eval" / "grpo_n8" / "smol" / "seed0" / "part0.log"
    events = [json.loads(line)["event"] for line in log.read_text().splitlines() if line.startswith("{")]
    assert events.count("evaluate_kept") == kept and events.count("evaluate") == steps - kept
    # the same bytes, once the checkpoint's path (a copied tree's own) is the original's
    got = {p.relative_to(results / "eval"): p.read_bytes() for p in eval_dir.rglob("*.json")}
    assert {k: v.replace(bytes(results), bytes(smoke)) for k, v in got.items()} == expected


def test_a_cells_checkpoints_evaluated_in_several_jobs_equal_one_jobs(smoke, tmp_path):
    """workflow.eval_checkpoints_per_job: 1 evaluates the cell's two checkpoints in two jobs; collected, the results
    are the one job's, byte for byte."""
    results = own_copy(smoke, tmp_path)
    cell = Path("grpo_n8") / "smol" / "seed0"
    for stage in ("eval", "eval_parts"):
        shutil.rmtree(results / stage / cell)
    shutil.rmtree(results / "runs" / cell / "evaluated")
    config = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())
    config["workflow"]["eval_checkpoints_per_job"] = 1
    (tmp_path / "split.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    cmd = [tool("snakemake"), results / "eval" / cell, "--cores", "2", "--configfile", tmp_path / "split.yaml"]
    cmd += ["--config", f"results={results}"]
    assert job_counts(run(tmp_path, *cmd, "--dry-run", check=True)) == {
        "evaluate_checkpoints": 2,
        "collect_evaluations": 1,
    }
    run(tmp_path, *cmd, check=True)
    assert sorted(p.name for p in (results / "eval_parts" / cell).iterdir()) == ["part0", "part1"]
    expected = {p.relative_to(smoke / "eval"): p.read_bytes() for p in (smoke / "eval" / cell).rglob("*.json")}
    got = {p.relative_to(results / "eval"): p.read_bytes() for p in (results / "eval" / cell).rglob("*.json")}
    assert len(got) == 2 and {k: v.replace(bytes(results), bytes(smoke)) for k, v in got.items()} == expected


def test_pruning_keeps_what_a_retried_evaluation_and_the_report_read(smoke, tmp_path):
    """GRPO n=8 on smol alone for 4 steps with a checkpoint at each (the smoke's toy world, copied): once the cell
    is evaluated, rule prune_checkpoints removes the model directories that no selection rule picks, keeping their
    manifests. Then nothing reruns; the report, forced, reads only what is left and writes the same tables; a
    retried evaluation job (its outputs deleted, as Snakemake deletes a failed job's) copies every kept result,
    computes none and writes the same bytes, and the re-evaluation still finds its checkpoint; evaluating a pruned
    checkpoint with other settings is refused with one line."""
    results = tmp_path / "results"
    shutil.copytree(smoke / "toy", results / "toy", symlinks=True)
    config = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())
    for section in (config["models"], config["toy"]["models"], config["report"]["paper_models"]):
        del section["qwen"]
    config["pairs"] = {}
    config["train"]["steps"] = 4
    config["workflow"].update(grpo=["grpo_n8"], pair_methods=[], ablations=[])
    path = tmp_path / "alone.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    cmd = [tool("snakemake"), "all", "--cores", "2", "--configfile", path, "--config", f"results={results}"]
    run(tmp_path, *cmd, check=True)
    cell = Path("grpo_n8") / "smol" / "seed0"
    run_dir = results / "runs" / cell
    record = json.loads((run_dir / "pruned.json").read_text())
    kept, removed = record["kept"]["smol"], record["removed"]["smol"]
    assert removed and 4 in kept and sorted(kept + removed) == [1, 2, 3, 4] and record["freed_bytes"] > 0
    selected = json.loads((results / "eval_selected" / cell / "smol" / "selected.json").read_text())["step"]
    assert selected in kept
    for step in removed:
        ckpt = run_dir / "checkpoints" / f"step_{step:05d}"
        assert not (ckpt / "smol").exists() and (ckpt / "manifest.json").is_file()
    assert not list(run_dir.glob("checkpoints/**/optimizer.pt"))
    tables = {p.name: p.read_bytes() for p in (results / "report" / "tables").iterdir()}
    evals = {p.relative_to(results): p.read_bytes() for p in (results / "eval" / cell).rglob("*.json")}
    assert job_counts(run(tmp_path, *cmd, "--dry-run", check=True)) == {}
    summary = results / "report" / "summary.md"
    forced = [tool("snakemake"), summary, "--forcerun", "report", *cmd[2:]]
    assert job_counts(run(tmp_path, *forced, "--dry-run", check=True)) == {"report": 1}
    run(tmp_path, *forced, check=True)
    assert {p.name: p.read_bytes() for p in (results / "report" / "tables").iterdir()} == tables

    shutil.rmtree(results / "eval_parts" / cell)
    shutil.rmtree(results / "eval" / cell)
    retried = [tool("snakemake"), results / "eval" / cell, *cmd[2:]]
    assert job_counts(run(tmp_path, *retried, "--dry-run", check=True)) == {
        "evaluate_checkpoints": 1,
        "collect_evaluations": 1,
    }
    run(tmp_path, *retried, check=True)
    log = results / "logs" / "eval" / cell / "part0.log"
    events = [json.loads(line)["event"] for line in log.read_text().splitlines() if line.startswith("{")]
    assert events.count("evaluate_kept") == 4 and "evaluate" not in events
    assert {p.relative_to(results): p.read_bytes() for p in (results / "eval" / cell).rglob("*.json")} == evals
    # what follows the evaluations reruns from what is left, and nothing is retrained
    after = {"reevaluate_selected": 1, "prune_checkpoints": 1, "report": 1, "all": 1}
    assert job_counts(run(tmp_path, *cmd, "--dry-run", check=True)) == after
    run(tmp_path, *cmd, check=True)
    assert {p.name: p.read_bytes() for p in (results / "report" / "tables").iterdir()} == tables

    snapshot = yaml.safe_load((results / "config.yaml").read_text())  # the merged config every job reads
    snapshot["eval"]["k"] = 3
    path.write_text(yaml.safe_dump(snapshot, sort_keys=False))
    refused = run(
        tmp_path,
        tool("graft"),
        "evaluate",
        "--config",
        path,
        "--run",
        run_dir,
        "--steps",
        removed[0],
        "--out-dir",
        tmp_path / "k3",
    )
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 2 and len(lines) == 1 and "was pruned after the cell's evaluations" in lines[0]
    assert not (tmp_path / "k3").exists()


def test_a_group_of_three_trains_and_is_evaluated_through_the_workflow(smoke, tmp_path):
    """groups: the smoke config with a third toy model and the group G1 of all three: Snakemake builds the new
    model, trains the group's GRAFT cell (one peer's group per all-fail prompt; the metrics name each peer) and
    evaluates every model of it, leaving the smoke's other cells alone; the report's group table has a line per
    model."""
    results = own_copy(smoke, tmp_path)
    config = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())
    config["models"]["octo"] = {**config["models"]["smol"], "path": "{results}/toy/models/octo"}
    octo = {**config["toy"]["models"]["smol"], "arch": "gpt2", "pre_tokenizer": "space_words"}
    config["toy"]["models"]["octo"] = {**octo, "mix": {"add": 0.5, "mul": 0.5}}
    config["groups"] = {"G1": ["smol", "qwen", "octo"]}
    config["workflow"]["baseline_models"] = ["smol", "qwen"]  # octo's GRPO n=8 only, for the report's table
    (tmp_path / "group.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    cell = Path("graft") / "G1" / "seed0"
    cmd = [tool("snakemake"), results / "eval" / cell, "--cores", "2", "--configfile", tmp_path / "group.yaml"]
    cmd += ["--config", f"results={results}"]
    expected = {"toy_model": 1, "train": 1, "evaluate_checkpoints": 1, "collect_evaluations": 1}
    assert job_counts(run(tmp_path, *cmd, "--dry-run", check=True)) == expected
    run(tmp_path, *cmd, check=True)
    run(tmp_path, *cmd[:1], results / "report" / "tables" / "table_groups.csv", *cmd[2:], check=True)
    table = (results / "report" / "tables" / "table_groups.csv").read_text().splitlines()
    assert [line.split(",")[2] for line in table[1:]] == ["smol", "qwen", "octo"]
    rows = [json.loads(line) for line in (results / "runs" / cell / "metrics.jsonl").read_text().splitlines()]
    assert [r["model"] for r in rows] == ["smol", "qwen", "octo"] * 2
    assert {k for k in rows[0] if k.startswith("received_from_")} == {"received_from_qwen", "received_from_octo"}
    assert sorted(p.name for p in (results / "eval" / cell).iterdir() if p.is_dir()) == ["octo", "qwen", "smol"]
