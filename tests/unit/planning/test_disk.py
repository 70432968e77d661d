"""The disk that graft plan prints per kind of output (graft/planning/disk.py): a hand-worked cell and the paper
config."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from graft.config import ModelSizes, load_config
from graft.errors import ConfigError
from graft.planning import plan
from graft.planning.disk import cells_in_flight, disk_use, peak_bytes
from graft.planning.memory import GB
from graft.planning.plan import (
    FREE_SHARE,
    TrainingCell,
    base_evaluations,
    checkpoint_steps,
    describe,
    disk_order,
    disk_problem,
    disk_turns,
    training_cells,
    tree_bytes,
)

PAPER = Path("config/paper.yaml")


def tiny_config(tmp_path: Path, **workflow):
    """The paper config with qwen3 made tiny and not downloaded: 212 parameters (embeddings 10 x 4, tied; one layer
    of 4 x 12 + 4 x 4 + 3 x 4 x 8 + 2 x 4 = 168; the final norm 4), 20 steps of 2 prompts with a checkpoint every 5
    and one by wall time, responses of 3 tokens, one benchmark of 5 problems at k = 2, one re-evaluation."""
    cfg = load_config(PAPER)
    sizes = ModelSizes(layers=1, hidden=4, intermediate=8, heads=1, kv_heads=1, head_dim=4, vocab=10)
    qwen3 = dataclasses.replace(cfg.models["qwen3"], path=str(tmp_path / "absent"), sizes=sizes, dtype="bfloat16")
    bench = tmp_path / "b.jsonl"
    bench.write_text("".join(f'{{"problem": "p{i}", "answer": "{i}"}}\n' for i in range(5)))
    return dataclasses.replace(
        cfg,
        models={**cfg.models, "qwen3": qwen3},
        train=dataclasses.replace(
            cfg.train, steps=20, checkpoint_every=5, checkpoint_minutes=60, prompts_per_step=2, max_response_tokens=3
        ),
        eval=dataclasses.replace(cfg.eval, benchmarks={"b": str(bench)}, validation=None, k=2, selection_runs=1),
        workflow=dataclasses.replace(cfg.workflow, mean_response_tokens=None, **workflow),
    )


def by_kind(uses):
    return {u.kind: (u.cell, u.kept, u.everything) for u in uses}


def test_a_hand_worked_cell(tmp_path):
    cfg = tiny_config(tmp_path)
    cell = TrainingCell("grpo_n8", "qwen3", 0, ("qwen3",))
    uses = by_kind(disk_use(cfg, [cell], [5, 10, 15, 20], ["qwen3"]))
    # a checkpoint: 212 x 2 bytes (bf16) = 424; running, its 4 and the interim one; kept, 3 (one per selection rule)
    assert uses["checkpoints"] == (5 * 424, 3 * 424, 4 * 424)
    # resume state: 212 x 12 = 2,544 bytes in the newest 2 and the interim one while running; none once done
    assert uses["resume state"] == (3 * 2544, 0, 2 * 2544)
    # 20 steps x 2 prompts x 8 responses x 3 tokens x 12 bytes
    assert uses["trajectories"] == (11520, 11520, 11520)
    # an evaluation: 5 problems x (2 samples x 3 + 32) = 190 bytes; 4 checkpoints in 3 copies (the job's part, the
    # collected directory, kept beside the run), the re-evaluation in 2; the base model's evaluation once
    assert uses["evaluations"] == (14 * 190, 15 * 190, 15 * 190)
    assert uses["total"] == (2120 + 7632 + 11520 + 2660, 1272 + 11520 + 2850, 1696 + 5088 + 11520 + 2850)


def test_keeping_everything_keeps_the_unpruned_figures_and_unknown_sizes_show_as_unknown(tmp_path):
    cfg = tiny_config(tmp_path, keep_checkpoints=True)
    cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, keep_resume_state=True))
    cell = TrainingCell("grpo_n8", "qwen3", 0, ("qwen3",))
    assert all(kept == everything for _, kept, everything in by_kind(disk_use(cfg, [cell], [5, 10], [])).values())
    unknown = dataclasses.replace(
        cfg, models={**cfg.models, "qwen3": dataclasses.replace(cfg.models["qwen3"], sizes=None)}
    )
    uses = by_kind(disk_use(unknown, [cell], [5, 10], []))
    assert uses["checkpoints"] == uses["total"] == (None, None, None) and uses["trajectories"][1] == 11520


def parameters_by_hand(layers, hidden, intermediate, heads, kv_heads, head_dim, vocab) -> int:
    """A decoder's parameters from its config.json sizes: the embeddings (tied: stored once), per layer q, k, v and
    o, the gated MLP's three matrices and two norms, and the final norm."""
    q, kv = heads * head_dim, kv_heads * head_dim
    layer = hidden * (q + 2 * kv) + q * hidden + 3 * hidden * intermediate + 2 * hidden
    return vocab * hidden + layers * layer + hidden


def test_the_paper_config_plans_16_tb_of_checkpoints_and_keeps_under_2_tb():
    """The figures the README states: 15.8 TB of model directories and 5.4 TB of resume state with nothing removed
    (56 cells, 35 checkpoints of each model), 1.8 TB once every cell is pruned; each computed here by hand from the
    models' sizes in config/paper.yaml and the paper's cells."""
    cfg = load_config(PAPER)
    lines = describe(cfg, str(PAPER)).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("disk"))
    rows = {line[:18].strip(): line[18:].split() for line in lines[start + 2 : start + 7]}
    assert all(m.sizes.tied and m.dtype == "bfloat16" for m in cfg.models.values())
    sizes = ("layers", "hidden", "intermediate", "heads", "kv_heads", "head_dim", "vocab")
    params = {name: parameters_by_hand(*(getattr(m.sizes, f) for f in sizes)) for name, m in cfg.models.items()}
    # the cells each model trains in: 3 GRPO n=8 seeds, n=16, n=32, n=8 with dynamic sampling; per pair of it
    # 3 GRAFT seeds, HACPO, SGT and its replay; smollm3 and qwen3 (P1) also in the 17 ablations
    runs = {"smollm3": 6 + 2 * 6 + 17, "qwen3": 6 + 2 * 6 + 17, "octothinker": 6 + 2 * 6}
    checkpoints, kept, interim, resumable = 35, 3, 1, cfg.train.resumable_checkpoints
    all_runs = sum(runs[m] * params[m] for m in params)
    largest = params["smollm3"] + params["octothinker"]  # P3, the pair of the two largest models
    # bfloat16 weights: 2 bytes a parameter; resume state (AdamW's two moments and an fp32 copy): 12
    weights = (largest * 2 * (checkpoints + interim), all_runs * 2 * kept, all_runs * 2 * checkpoints)
    resume = (largest * 12 * (resumable + interim), 0, all_runs * 12 * resumable)
    assert rows["checkpoints"] == [f"{b / GB:,.1f}" for b in weights] == ["452.7", "1,354.1", "15,797.4"]
    assert rows["resume state"] == [f"{b / GB:,.1f}" for b in resume] == ["226.4", "0.0", "5,416.3"]
    # the total adds up the kinds' rows (trajectories and evaluations besides), up to their rounding
    kinds = [rows[k] for k in ("checkpoints", "resume state", "trajectories", "evaluations")]
    for column, total in enumerate(rows["total"]):
        assert float(total.replace(",", "")) == pytest.approx(
            sum(float(k[column].replace(",", "")) for k in kinds), abs=0.2
        )


def test_the_peak_counts_the_cells_in_flight_beyond_what_every_cell_keeps():
    # (while it runs, kept) per cell, in bytes; 10 of base evaluations
    footprints = [(100.0, 10.0), (300.0, 20.0), (200.0, 30.0)]
    assert peak_bytes(footprints, 10.0, 1) == 280 + 60 + 10  # the cell holding most beyond its kept: 300 - 20
    assert peak_bytes(footprints, 10.0, 2) == 280 + 170 + 60 + 10
    assert peak_bytes(footprints, 10.0, 3) == 600 + 10  # every cell in flight: all it holds while it runs
    assert peak_bytes([(None, 1.0)], 0.0, 1) is None


def test_a_budget_admits_the_most_cells_that_fit_and_refuses_one_below_a_single_cell(tmp_path):
    footprints = [(100e9, 10e9), (300e9, 20e9), (200e9, 30e9)]
    cfg = lambda budget, keep=False: dataclasses.replace(  # noqa: E731
        tiny_config(tmp_path),
        workflow=dataclasses.replace(tiny_config(tmp_path).workflow, disk_budget_gb=budget, keep_checkpoints=keep),
    )
    assert cells_in_flight(cfg(None), footprints, 0.0) == 3
    assert cells_in_flight(cfg(340), footprints, 0.0) == 1
    assert cells_in_flight(cfg(510), footprints, 0.0) == 2
    with pytest.raises(ConfigError, match=r"workflow.disk_budget_gb: 300 GB is less than the 340.0 GB"):
        cells_in_flight(cfg(300), footprints, 0.0)
    with pytest.raises(ConfigError, match=r"workflow\.keep_checkpoints: true"):
        cells_in_flight(cfg(500, keep=True), footprints, 0.0)


def test_cells_wait_only_on_cells_before_them_in_the_disk_order():
    """On the paper config every replay cell comes after the GRPO run it reads, and with a budget each cell waits
    for the cell k places before it: no cell waits, through any chain, on itself."""
    cfg = load_config(PAPER)
    cfg = dataclasses.replace(cfg, workflow=dataclasses.replace(cfg.workflow, disk_budget_gb=5000))
    cells = training_cells(cfg)
    order = disk_order(cfg, cells)
    assert sorted(order, key=id) == sorted(cells, key=id) and len(order) == len(cells)
    position = {c: i for i, c in enumerate(order)}
    for c in order:
        if c.peer is not None:
            source = next(s for s in cells if s.method == "grpo_n8" and (s.cell, s.seed) == (c.peer, c.seed))
            assert position[source] < position[c]
    k, turns = disk_turns(cfg, cells)
    assert k == 5 and len(turns) == len(cells) - k
    assert all(position[waited] == position[c] - k for c, waited in turns.items())


def test_a_failed_cell_keeps_its_place_and_its_replays_and_the_cells_behind_it_wait_elsewhere():
    """With a budget on the paper config and a GRPO run that two replay cells read failed for good: nothing but its
    replays waits for it, each cell waits for at most one and is waited for by at most one, no cell waits (through
    its turn or the run it replays) on itself, and k lanes start at once."""
    cfg = load_config(PAPER)
    cfg = dataclasses.replace(cfg, workflow=dataclasses.replace(cfg.workflow, disk_budget_gb=5000))
    cells = training_cells(cfg)
    failed = next(c for c in cells if c.method == "grpo_n8" and any(r.peer == c.cell for r in cells))
    readers = {c for c in cells if c.peer == failed.cell and c.seed == failed.seed}
    k, turns = disk_turns(cfg, cells, {failed: "2026-12-01T00:00:00.000000Z"})
    assert readers and {c for c, waited in turns.items() if waited == failed} <= readers
    assert len(set(turns.values())) == len(turns) and len(cells) - len(turns) == k
    runs = {(c.cell, c.seed): c for c in cells if c.method == "grpo_n8"}
    source = {c: runs[(c.peer, c.seed)] for c in cells if c.peer is not None}
    for cell in cells:
        seen, todo = set(), [cell]
        while todo:
            node = todo.pop()
            for up in (turns.get(node), source.get(node)):
                assert up != cell, f"{cell} waits on itself"
                if up is not None and up not in seen:
                    seen.add(up)
                    todo.append(up)


def footprint_peaks(cfg, cells) -> tuple[float, float]:
    """The paper's peak with every cell in flight and with one, from its cells' footprints."""
    footprints: list = []
    disk_use(cfg, cells, checkpoint_steps(cfg), base_evaluations(cfg), footprints)
    base = plan._base_bytes(cfg)
    return peak_bytes(footprints, base, len(cells)), peak_bytes(footprints, base, 1)


def test_a_peak_beyond_the_free_space_names_the_budget_that_fits(monkeypatch):
    cfg = load_config(PAPER)
    cfg = dataclasses.replace(cfg, workflow=dataclasses.replace(cfg.workflow, disk_budget_gb=None))
    cells = training_cells(cfg)
    every, least = footprint_peaks(cfg, cells)
    space = {"free": every / 2, "held": 0.0}
    monkeypatch.setattr(plan, "free_bytes", lambda results: space["free"])
    monkeypatch.setattr(plan, "tree_bytes", lambda results: space["held"])
    line = disk_problem(cfg, cells)
    fits = math.floor(FREE_SHARE * space["free"] / GB)
    assert line == (
        f"{cfg.results}: {space['free'] / 1e12:,.2f} TB free, less than the workflow's peak of {every / 1e12:,.2f} TB "
        f"with all {len(cells)} cells in flight; set workflow.disk_budget_gb: {fits} (90% of that), below your quota "
        "(docs/paper-on-slurm.md)"
    )
    budgeted = dataclasses.replace(cfg, workflow=dataclasses.replace(cfg.workflow, disk_budget_gb=fits))
    assert disk_problem(budgeted, cells) is None  # the figure it names fits
    assert any(line in shown for shown in describe(cfg, str(PAPER)).splitlines())  # graft plan warns
    space["held"] = every / 2  # a resumed workflow's outputs are part of its peak
    assert disk_problem(cfg, cells) is None
    space.update(free=least / 2, held=0.0)
    assert disk_problem(cfg, cells).endswith(
        f"one cell in flight at a time needs {least / 1e12:,.2f} TB: point results: at storage with that much free"
    )


def test_the_tree_counts_its_files_and_not_what_links_point_to(tmp_path):
    assert tree_bytes(str(tmp_path / "absent")) == 0
    (tmp_path / "runs" / "a").mkdir(parents=True)
    (tmp_path / "runs" / "a" / "w.bin").write_bytes(b"x" * 1000)
    (tmp_path / "metrics.jsonl").write_bytes(b"y" * 24)
    (tmp_path / "elsewhere").symlink_to(tmp_path / "runs")
    assert tree_bytes(str(tmp_path)) == 1024
