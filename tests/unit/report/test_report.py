"""Report generation on a hand-made results tree: every table cell, missing cells, figure files; and the
evaluation of a tiny model end to end on three problems of each real benchmark."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from graft.cli import main
from graft.config import WorkflowSpec
from graft.report.stats import SeedAggregate, on_common_seeds, paired_bootstrap
from graft.report.tables import (
    ReportContext,
    table1,
    table2,
    table4,
    table_clipping,
    table_passk,
    table_selection,
)

BENCH = ("b1", "b2")


def write_eval(root: Path, method: str, cell: str, seed: int, model: str, step: int, per_problem: dict, val: float):
    """per_problem: benchmark -> list of per-problem correctness lists (k = 2)."""
    benchmarks = {}
    for name, problems in per_problem.items():
        flat = [c for p in problems for c in p]
        benchmarks[name] = {
            "pass@1": sum(flat) / len(flat),
            "per_problem": {f"{name}-{i}": p for i, p in enumerate(problems)},
        }
    average = sum(b["pass@1"] for b in benchmarks.values()) / len(benchmarks)
    data = {
        "step": step,
        "average": average,
        "benchmarks": benchmarks,
        "validation": {"pass@1": val},
        "checkpoint": "x",
    }
    path = root / "eval" / method / cell / f"seed{seed}" / model / f"step_{step:05d}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def write_metrics(root: Path, method: str, cell: str, seed: int, rows: list[dict]):
    path = root / "runs" / method / cell / f"seed{seed}" / "metrics.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "results"
    # GRPO n=8 for A over two seeds: best test checkpoints average 25 and 50 -> 37.5 +- 17.68
    write_eval(root, "grpo_n8", "A", 0, "A", 5, {"b1": [[1, 0], [0, 0]], "b2": [[0, 0], [0, 0]]}, 0.9)
    write_eval(root, "grpo_n8", "A", 0, "A", 10, {"b1": [[1, 1], [0, 0]], "b2": [[0, 0], [0, 0]]}, 0.1)
    write_eval(root, "grpo_n8", "A", 1, "A", 5, {"b1": [[1, 1], [1, 1]], "b2": [[0, 0], [0, 0]]}, 0.5)
    write_eval(root, "grpo_n8", "B", 0, "B", 5, {"b1": [[0, 0], [0, 0]], "b2": [[1, 0], [0, 0]]}, 0.5)
    # GRAFT on pair P, seed 0: A averages 75 at step 10, B 50 at step 5
    write_eval(root, "graft", "P", 0, "A", 5, {"b1": [[1, 1], [1, 0]], "b2": [[0, 0], [0, 0]]}, 0.2)
    write_eval(root, "graft", "P", 0, "A", 10, {"b1": [[1, 1], [1, 1]], "b2": [[1, 1], [0, 0]]}, 0.3)
    write_eval(root, "graft", "P", 0, "B", 5, {"b1": [[1, 1], [0, 0]], "b2": [[1, 1], [0, 0]]}, 0.4)
    rows = []
    for step in range(10):
        for model in ("A", "B"):
            rows.append(
                {
                    "step": step,
                    "model": model,
                    "all_fail": 4,
                    "peer_solved_all_fail": 1 + (model == "A"),
                    "clip_frac_own": 0.1,
                    "clip_frac_peer": 0.3 if model == "A" else None,
                    "step_time_s": 36.0,
                    "gpu_hours": 0.0,
                }
            )
    write_metrics(root, "graft", "P", 0, rows)
    return root


def plan(**seeds) -> WorkflowSpec:
    """The workflow section a test's report sees: GRAFT as the only co-training method, and ``seeds``."""
    return WorkflowSpec(pair_methods=["graft"], **seeds)


def context(root: Path, selection_runs: int = 0) -> ReportContext:
    return ReportContext.from_results(
        root,
        ["A", "B"],
        {"P": ["A", "B"]},
        {"A": "smollm3", "B": "qwen3"},
        list(BENCH),
        workflow=plan(main_seeds=[0, 1], other_seeds=[0]),
        selection_runs=selection_runs,
    )


def write_reeval(root: Path, method: str, cell: str, seed: int, model: str, step: int, run: int, per_problem: dict):
    """One re-evaluation run of a selected checkpoint, as graft reevaluate writes it."""
    scratch = root.parent / "scratch"
    write_eval(scratch, method, cell, seed, model, step, per_problem, 0.0)
    src = scratch / "eval" / method / cell / f"seed{seed}" / model / f"step_{step:05d}.json"
    data = json.loads(src.read_text())
    data["k"] = 2
    path = root / "eval_selected" / method / cell / f"seed{seed}" / model / f"run_{run:02d}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def markdown_rows(table) -> list[list[str]]:
    """The body rows of a table's Markdown rendering, cell by cell."""
    lines = [line for line in table.markdown().splitlines() if line.startswith("|")][2:]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def row(table, *prefix):
    return next(r for r in table.rows if tuple(r[: len(prefix)]) == prefix)


def test_table1_cells(tree):
    t = table1(context(tree))
    assert t.header[:5] == ["updated", "peer", "method", "b1", "b2"]
    grpo = row(t, "A", "", "GRPO (n=8)")
    # the first training run only, as the paper's Table 1: seed 0 picks step 10 (b1 50, b2 0, avg 25)
    assert grpo[3] == pytest.approx(50.0) and grpo[4] == pytest.approx(0.0)
    assert grpo[5] == "25.00"  # one evaluation run: no ±
    assert grpo[6] is None and grpo[8] == pytest.approx(32.60)
    graft = row(t, "A", "B", "GRAFT")
    assert graft[5] == "75.00"
    assert graft[6] == pytest.approx(75.0 - 25.0)
    low, high = graft[7]
    assert low <= 50.0 <= high
    assert "first training run" in t.caption and "biased upward" in t.caption
    assert graft[8] == pytest.approx(37.06) and graft[9] == pytest.approx(37.06 - 32.60)
    hacpo = row(t, "A", "B", "HACPO")
    assert hacpo[3:8] == [None, None, None, None, None]  # missing, not zero
    assert hacpo[8] == pytest.approx(31.51)
    assert ["A", "B", "HACPO", "—", "—", "—"] in [r[:6] for r in markdown_rows(t)]
    csv_rows = list(csv.reader(t.csv().splitlines()))
    assert csv_rows[0] == t.header and "" in csv_rows[[r[2] for r in csv_rows].index("HACPO")]
    assert r"\begin{tabular}" in t.latex() and r"$\pm$" in t.latex()


def test_selection_rules_and_table(tree):
    ctx = context(tree)
    for rule, step in (("test_best", 10), ("val_best", 5), ("final", 10)):
        sel = ctx.selected(rule)
        assert sel[(sel.method == "grpo_n8") & (sel.model == "A") & (sel.seed == 0)].step.tolist() == [step]
    t = table_selection(ctx)
    r = row(t, "grpo_n8", "A", "A")
    assert r[3] == pytest.approx(37.5) and r[4] == pytest.approx((12.5 + 50) / 2) and r[5] == pytest.approx(37.5)
    assert r[6] == pytest.approx(37.5 - 31.25)


def test_table2_and_clipping(tree):
    ctx = context(tree)
    t2 = table2(ctx)
    full = row(t2, "GRAFT")
    assert full[2] == "75.00" and full[4] == pytest.approx(37.06) and full[6] == "50.00"
    no_gate = row(t2, "w/o compat. gate")
    assert no_gate[2] is None and no_gate[3] is None and no_gate[4] == pytest.approx(28.70)
    assert no_gate[5] == pytest.approx(28.70 - 37.06)
    clip = table_clipping(ctx, [0])
    graft_a = row(clip, "GRAFT", "A")
    assert graft_a[2] == pytest.approx(10.0) and graft_a[3] == pytest.approx(30.0)
    assert row(clip, "GRAFT", "B")[3] is None
    assert not [r for r in clip.rows if r[0] == "peer first"]  # not run: no rows


def test_the_tables_of_the_ablations_read_the_pair_they_trained_on(tree):
    """workflow.ablation_pair set to the second pair: Table 2, the clipping and cost tables, the findings and
    Figure 3a read that pair, where the workflow trained the ablations, not the first."""
    from graft.report.figures import figure3a_points
    from graft.report.tables import table_cost, table_findings

    write_eval(tree, "graft", "Q", 0, "A", 5, {"b1": [[1, 0], [0, 0]], "b2": [[0, 0], [0, 0]]}, 0.2)
    write_eval(tree, "graft", "Q", 0, "B", 5, {"b1": [[1, 1], [1, 1]], "b2": [[0, 0], [0, 0]]}, 0.2)
    write_eval(tree, "graft_no_gate", "Q", 0, "A", 5, {"b1": [[1, 1], [0, 0]], "b2": [[0, 0], [0, 0]]}, 0.2)
    rows = [{"step": s, "model": m, "clip_frac_own": 0.5, "step_time_s": 3600.0} for s in range(6) for m in "AB"]
    write_metrics(tree, "graft", "Q", 0, rows)
    ctx = ReportContext.from_results(
        tree, ["A", "B"], {"P": ["A", "B"], "Q": ["A", "B"]}, {}, list(BENCH),
        workflow=plan(main_seeds=[0], ablation_pair="Q"),
    )  # fmt: skip
    t2 = table2(ctx)
    assert "on Q" in t2.caption
    assert row(t2, "GRAFT")[2] == "12.50" and row(t2, "w/o compat. gate")[2] == "25.00"
    clip = table_clipping(ctx, [0])
    assert "(Q," in clip.caption and row(clip, "GRAFT", "A")[2] == pytest.approx(50.0)
    cost = table_cost(ctx)
    assert "on Q" in cost.caption and row(cost, "GRAFT")[1:4] == [pytest.approx(12.5), 5.0, 6.0]
    assert "on Q" in table_findings(ctx).caption
    pair, points = figure3a_points(ctx)
    assert pair == "Q" and points["graft"] == (5.0, pytest.approx(31.25))


def test_paired_bootstrap_of_identical_runs_is_zero(tree):
    ctx = context(tree)
    cell = ctx.cell("graft", "P", "A")
    assert ctx.bootstrap(cell, cell) == (0.0, 0.0)


def test_a_difference_pairs_the_seeds_both_cells_ran():
    """GRAFT ran seed 0 (score 60); GRPO ran seeds 0, 1, 2 (50, 70, 90; mean 70). Against the three-seed mean GRAFT
    looks 10 points worse; against the same seed's run it is 10 points better."""
    runs = lambda method, scores: pd.DataFrame(  # noqa: E731
        [(method, "P", seed, "A", 5, score) for seed, score in scores.items()],
        columns=["method", "cell", "seed", "model", "step", "average"],
    )
    graft, grpo = SeedAggregate(runs("graft", {0: 60.0})), SeedAggregate(runs("grpo_n8", {2: 90.0, 0: 50.0, 1: 70.0}))
    assert graft.mean - grpo.mean == -10.0
    a, b = on_common_seeds(graft, grpo)
    assert a.values == [60.0] and b.values == [50.0] and a.mean - b.mean == 10.0
    a, b = on_common_seeds(graft, SeedAggregate(runs("grpo_n8", {1: 70.0})))  # no seed in common: nothing to compare
    assert a.mean is None and b.mean is None


def test_paired_bootstrap_by_hand():
    """Two cells on one benchmark of two problems: a solves problem p0 always, b never; p1 both half the time.
    The paired differences are {100, 0}: resamples give 0, 50 or 100 with probabilities 1/4, 1/2, 1/4."""
    rows = []
    for method, p0 in (("a", 1), ("b", 0)):
        rows += [(method, "P", 0, "A", 5, "b1", "p0", i, p0) for i in range(2)]
        rows += [(method, "P", 0, "A", 5, "b1", "p1", i, i % 2) for i in range(2)]
    samples = pd.DataFrame(
        rows, columns=["method", "cell", "seed", "model", "step", "benchmark", "problem", "sample", "correct"]
    )
    pick = lambda m: pd.DataFrame([(m, "P", 0, "A", 5)], columns=["method", "cell", "seed", "model", "step"])  # noqa: E731
    low, high = paired_bootstrap(samples, pick("a"), pick("b"), resamples=4000)
    assert (low, high) == (0.0, 100.0)
    assert paired_bootstrap(samples, pick("a"), pick("a")) == (0.0, 0.0)
    assert paired_bootstrap(samples, pick("a"), pick("a").iloc[0:0]) is None


def test_report_cli_writes_tables_and_figures(tree, tmp_path):
    config = yaml.safe_load(Path("config/smoke.yaml").read_text())
    config["models"] = {"A": config["models"]["smol"], "B": config["models"]["qwen"]}
    config["pairs"] = {"P": ["A", "B"]}
    config["eval"]["benchmarks"] = {"b1": "x.jsonl", "b2": "y.jsonl"}
    config["report"]["paper_models"] = {"A": "smollm3", "B": "qwen3"}
    config.pop("toy")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "report"
    assert main(["report", "--config", str(path), "--results", str(tree), "--out", str(out)]) == 0
    for name in ("table1", "table2_ablations", "table_stored", "table_selection", "table_clipping", "table_findings"):
        for ext in ("md", "csv", "tex"):
            assert (out / "tables" / f"{name}.{ext}").stat().st_size > 0
    for fig in ("fig1_complementarity", "fig3a_score_vs_cost", "fig3b_stored_vs_online"):
        assert (out / "figures" / f"{fig}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Table 1" in (out / "summary.md").read_text()


def test_report_on_an_empty_tree_shows_every_cell_missing(tmp_path):
    (tmp_path / "eval").mkdir()
    t = table1(context(tmp_path))
    assert all(v is None for r in t.rows for v in r[3:8])
    assert t.markdown().count("—") >= len(t.rows) * 5


def test_evaluate_a_tiny_model_on_three_problems_per_benchmark(forced_world, tmp_path):
    config = yaml.safe_load(forced_world["config"].read_text())
    data = Path(__file__).resolve().parents[2] / "data"
    config["eval"] = {
        "benchmarks": {n: str(data / f"{n}.jsonl") for n in ("math500", "aime24", "aime25", "amc23", "minerva_math")},
        "k": 2,
    }
    config["reward"] = {"kind": "math", "timeout": 2, "workers": 1}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "eval.json"
    assert (
        main(
            [
                "evaluate",
                "--config",
                str(path),
                "--model",
                "A",
                "--checkpoint",
                str(forced_world["A"]),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    result = json.loads(out.read_text())
    assert set(result["benchmarks"]) == {"math500", "aime24", "aime25", "amc23", "minerva_math"}
    for bench in result["benchmarks"].values():
        assert len(bench["per_problem"]) == 3 and all(len(v) == 2 for v in bench["per_problem"].values())
    assert result["average"] == pytest.approx(sum(b["pass@1"] for b in result["benchmarks"].values()) / 5)
    assert result["k"] == 2 and result["temperature"] == 0.6 and result["step"] == 0


def test_transfers_table_and_dynamics_figure(tmp_path):
    from graft.report.figures import figure_dynamics
    from graft.report.tables import table_transfers

    root = tmp_path / "results"
    write_eval(root, "graft", "P", 0, "A", 2, {"b1": [[1, 0]]}, 0.5)
    for seed in (0, 1):
        rows = []
        for step in range(2):
            rows += [
                {"step": step, "model": "A", "transferred": 8, "admitted": 4, "correct_transferred": 4,
                 "correct_admitted": 3, "gate_pass_rate_correct": 0.75, "gate_pass_rate_wrong": 0.25,
                 "reward_mean": 0.5, "all_fail_frac": 0.25, "candidates": 2, "selected": 1, "clip_frac_own": 0.1,
                 "clip_frac_peer": 0.2},
                {"step": step, "model": "B", "transferred": 0, "admitted": 0, "correct_transferred": 0,
                 "correct_admitted": 0, "reward_mean": 0.4},
            ]  # fmt: skip
            write_metrics(root, "graft", "P", seed, [r for r in rows if r["step"] <= step])
    ctx = context(root)
    t = table_transfers(ctx, ["graft", "hacpo"], [0, 1])
    assert {r[0] for r in t.rows} == {"GRAFT"}  # HACPO did not run: no rows
    a = row(t, "GRAFT", "P", "A")
    # two steps per seed: 16 transferred and 8 admitted per run, 6 of them correct
    assert a[3:] == [2, 16.0, 8.0, pytest.approx(75.0), pytest.approx(75.0), pytest.approx(25.0)]
    assert row(t, "GRAFT", "P", "B")[6:] == [None, None, None]
    out = figure_dynamics(ctx, "graft", "P", tmp_path / "dyn.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_figures_draw_each_cells_first_run(tree):
    from graft.report.figures import _selected_runs

    (run,) = _selected_runs(context(tree), [("grpo_n8", "A", "A")])
    assert run.seed == 0
    ctx = ReportContext.from_results(
        tree,
        ["A", "B"],
        {"P": ["A", "B"]},
        {},
        list(BENCH),
        workflow=plan(main_seeds=[0, 1], cell_seeds={"A": [1, 0], "B": [1]}),
    )
    (run,) = _selected_runs(ctx, [("grpo_n8", "A", "A")])
    assert run.seed == 1 and run.step == 5  # seed 1's best test checkpoint
    assert _selected_runs(ctx, [("grpo_n8", "B", "B")]) is None  # B's first seed, 1, never ran


def test_table4_averages_training_runs_beside_the_papers_table4(tree):
    t = table4(context(tree))
    grpo = row(t, "P", "A", "GRPO (n=8)")
    # seed 0 picks step 10 (avg 25), seed 1 step 5 (avg 50): mean and sample std over the two runs
    assert grpo[3] == 2 and grpo[6] == "37.50 ± 17.68"
    assert grpo[8] == "32.15 ± 1.48"
    graft = row(t, "P", "A", "GRAFT")
    assert graft[3] == 1 and graft[7] == pytest.approx(75.0 - 37.5)
    assert graft[8] == "36.12 ± 0.85" and graft[9] == pytest.approx(36.12 - 32.15)
    assert "GRPO n=8 and GRAFT seeds [0, 1]" in t.caption


def test_a_reevaluated_checkpoint_is_scored_by_its_reevaluations_not_the_selecting_run(tree):
    # GRPO n=8, A, seed 0 selected step 10 (avg 25 in the selecting run); two re-evaluations average 12.5 and 0
    write_reeval(tree, "grpo_n8", "A", 0, "A", 10, 0, {"b1": [[1, 0], [0, 0]], "b2": [[0, 0], [0, 0]]})
    write_reeval(tree, "grpo_n8", "A", 0, "A", 10, 1, {"b1": [[0, 0], [0, 0]], "b2": [[0, 0], [0, 0]]})
    ctx = context(tree, selection_runs=2)
    sel = ctx.selected()
    mine = sel[(sel.method == "grpo_n8") & (sel.model == "A") & (sel.seed == 0)].iloc[0]
    assert mine.step == 10  # selection still reads the checkpoint evaluations
    assert mine.average == pytest.approx(6.25) and mine.eval_runs == 2
    assert mine.average_std == pytest.approx(8.8388, abs=1e-3)
    t = table1(ctx)
    assert row(t, "A", "", "GRPO (n=8)")[5] == "6.25 ± 8.84"
    assert "mean of 2 re-evaluations" in t.caption
    # the bootstrap reads the re-evaluations' samples: GRAFT A (75) minus 6.25
    graft = row(t, "A", "B", "GRAFT")
    assert graft[6] == pytest.approx(75.0 - 6.25)
    low, high = graft[7]
    assert low <= 68.75 <= high
    # seed 1 was not re-evaluated: it keeps its own score
    other = sel[(sel.method == "grpo_n8") & (sel.model == "A") & (sel.seed == 1)].iloc[0]
    assert other.average == pytest.approx(50.0) and other.eval_runs == 1


def test_passk_table_from_the_samples(tree):
    t = table_passk(context(tree))
    assert t.header == ["method", "cell", "model", "seeds", "pass@1", "pass@2"]
    graft_b = row(t, "graft", "P", "B")
    # b1 and b2 each [[1, 1], [0, 0]]: pass@1 = pass@2 = 50
    assert graft_b[4] == pytest.approx(50.0) and graft_b[5] == pytest.approx(50.0)
    grpo_b = row(t, "grpo_n8", "B", "B")
    # b1 0; b2 [[1, 0], [0, 0]]: pass@1 25, pass@2 50 -> averages 12.5 and 25
    assert grpo_b[4] == pytest.approx(12.5) and grpo_b[5] == pytest.approx(25.0)


def test_method_seeds_set_a_presets_first_run_and_the_captions_name_them(tree):
    ctx = ReportContext.from_results(
        tree,
        ["A", "B"],
        {"P": ["A", "B"]},
        {},
        list(BENCH),
        workflow=plan(main_seeds=[0, 1], other_seeds=[0], method_seeds={"grpo_n8": [1], "hacpo": [2, 3]}),
    )
    cells = {"grpo_n8": "A", "graft": "P", "hacpo": "P", "sgt": "P"}
    assert [ctx.first_seed(m, c, "A") for m, c in cells.items()] == [1, 0, 2, 0]
    assert "; grpo_n8 seeds [1]; hacpo seeds [2, 3]" in ctx.seed_note()


def test_cell_seeds_set_a_cells_first_run_before_method_seeds(tree):
    ctx = ReportContext.from_results(
        tree,
        ["A", "B"],
        {"P": ["A", "B"]},
        {},
        list(BENCH),
        workflow=plan(
            main_seeds=[0, 1], other_seeds=[0], method_seeds={"hacpo": [2, 3]}, cell_seeds={"P": [4], "B": [5]}
        ),
    )
    assert ctx.first_seed("hacpo", "P", "A") == 4  # the pair's entry wins over the method's
    assert ctx.first_seed("grpo_n8", "A", "A") == 0 and ctx.first_seed("grpo_n8", "B", "B") == 5
    assert ctx.first_seed("replay", "B_from_A", "B") == 5  # a replay cell answers to its receiver's entry
    assert "; cells of P seeds [4]; cells of B seeds [5]" in ctx.seed_plan()
    assert "means of [1, 2] seeds stand side by side" in ctx.seed_note()
