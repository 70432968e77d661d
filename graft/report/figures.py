"""Figures of the paper from a results tree: Figure 1 (complementarity over training), Figure 3a (score against
compute per method) and Figure 3b (stored vs online gains). PNG files, rendered without a display."""

from __future__ import annotations

import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

from graft.report.paper import GPU_HOURS_PAIR1
from graft.report.tables import ReportContext, cost_to
from graft.results import atomic_path, replay_cell


def _save(fig, path: Path) -> Path:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def figure1(ctx: ReportContext, out: Path) -> Path:
    """Fraction of each receiver's all-fail prompts that its peer solved, per GRAFT step, per pair (each pair's
    first GRAFT run)."""
    fig, axes = plt.subplots(1, max(len(ctx.pairs), 1), figsize=(4.2 * max(len(ctx.pairs), 1), 3.2), squeeze=False)
    for ax, (pair, members) in zip(axes[0], ctx.pairs.items(), strict=False):
        for receiver in members:
            peer = next(m for m in members if m != receiver)
            mine = ctx.metrics("graft", pair, [ctx.first_seed("graft", pair, receiver)], receiver)
            mine = mine[mine["all_fail"] > 0] if "all_fail" in mine else mine.iloc[:0]
            if mine.empty:
                continue
            fractions = mine["peer_solved_all_fail"] / mine["all_fail"]
            line = ax.plot(mine["step"], fractions, marker="o", ms=3, label=f"{peer} solves {receiver}'s all-fail")[0]
            ax.axhline(fractions.mean(), ls=":", color=line.get_color())
        ax.set_title(f"{pair}: {' / '.join(members)}")
        ax.set_xlabel("training step")
        ax.set_ylabel("fraction of all-fail prompts")
        ax.set_ylim(0, 1)
        if ax.lines:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "no GRAFT metrics", ha="center", transform=ax.transAxes)
    fig.suptitle("Figure 1: complementary successes during GRAFT co-training", y=1.04)
    return _save(fig, out)


def _selected_runs(ctx: ReportContext, runs: list[tuple[str, str, str]]) -> list[pd.Series] | None:
    """The selected checkpoint of each (method, cell, model)'s first run; None unless every one exists."""
    found = []
    for method, cell, model in runs:
        run = ctx.first_run(method, cell, model).selected
        if run.empty:
            return None
        found.append(run.iloc[0])
    return found


def figure3a_points(ctx: ReportContext) -> tuple[str, dict[str, tuple[float, float]]]:
    """Figure 3a's pair (the ablation pair) and, per method with every first run selected, the hours to the
    selected checkpoints of both models and their pair-mean score."""
    pair, (a, b) = ctx.ablation_pair()
    points = {}
    for method in ("grpo_n8", "grpo_n16", "grpo_n32", "grpo_n8_ds"):
        sel = _selected_runs(ctx, [(method, m, m) for m in (a, b)])
        if sel:
            cost = sum(cost_to(ctx.metrics(method, s.cell, [s.seed]), s.step) for s in sel)
            points[method] = (cost, statistics.fmean(s.average for s in sel))
    for method in ("graft", "hacpo", "sgt"):
        sel = _selected_runs(ctx, [(method, pair, m) for m in (a, b)])
        if sel:
            last = max(s.step for s in sel)  # the joint run up to the later checkpoint
            points[method] = (
                cost_to(ctx.metrics(method, pair, [sel[0].seed]), last),
                statistics.fmean(s.average for s in sel),
            )
    sel = _selected_runs(ctx, [("replay", replay_cell(m, p), m) for m, p in ((a, b), (b, a))])
    if sel:
        cost = sum(cost_to(ctx.metrics("replay", s.cell, [s.seed]), s.step) for s in sel)
        points["replay"] = (cost, statistics.fmean(s.average for s in sel))
    return pair, points


def figure3a(ctx: ReportContext, out: Path) -> Path:
    """The ablation pair (the paper's Pair 1): pair-mean score of the selected checkpoints against the cost of
    obtaining both models (each cell's first run, as in Table 1)."""
    fig, ax = plt.subplots(figsize=(5, 3.6))
    if ctx.pairs:
        pair, points = figure3a_points(ctx)
        # tiny CPU runs take minutes, not hours: plot minutes so the axis stays readable
        minutes = bool(points) and max(x for x, _ in points.values()) < 1.0
        if minutes:
            points = {m: (60 * x, y) for m, (x, y) in points.items()}
        ax.set_xlabel(
            "minutes to the selected checkpoints (wall clock)"
            if minutes
            else "hours to the selected checkpoints (GPU-hours; wall hours on CPU)"
        )
        grpo = [points[m] for m in ("grpo_n8", "grpo_n16", "grpo_n32") if m in points]
        if grpo:
            ax.plot(*zip(*grpo, strict=True), ls="--", color="grey", label="GRPO n=8/16/32")
        for method, (x, y) in points.items():
            ax.scatter([x], [y], label=method, zorder=3)
        ax.set_title(f"Figure 3a: {pair} pair-mean score vs cost (first runs)")
        paper = ", ".join(f"{m} {h}" for m, h in GPU_HOURS_PAIR1.items() if m in points)
        fig.text(0.01, -0.04, f"paper, Pair 1 GPU-hours to the selected checkpoints: {paper}", fontsize=7)
    ax.set_ylabel("pair-mean average pass@1 (%)")
    if ax.collections:
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "no runs to plot", ha="center", transform=ax.transAxes)
    return _save(fig, out)


def figure3b(ctx: ReportContext, out: Path) -> Path:
    """Gain over GRPO n=8 of online GRAFT and of stored-trajectory replay, per model block."""
    labels, online, stored = [], [], []
    for model in ctx.models:
        base = ctx.cell("grpo_n8", model, model).mean
        for peer, pair in ctx.peers(model):
            on = ctx.cell("graft", pair, model).mean
            st = ctx.cell("replay", replay_cell(model, peer), model).mean
            labels.append(f"{model}\n← {peer}")
            online.append(None if on is None or base is None else on - base)
            stored.append(None if st is None or base is None else st - base)
    fig, ax = plt.subplots(figsize=(max(4, 1.1 * len(labels)), 3.4))
    xs = range(len(labels))
    ax.bar([x - 0.2 for x in xs], [v if v is not None else 0 for v in online], 0.4, label="online GRAFT")
    ax.bar([x + 0.2 for x in xs], [v if v is not None else 0 for v in stored], 0.4, label="stored trajectories")
    for x, (on, st) in enumerate(zip(online, stored, strict=True)):
        for dx, v in ((-0.2, on), (0.2, st)):
            if v is None:
                ax.text(x + dx, 0, "missing", rotation=90, ha="center", va="bottom", fontsize=7)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(list(xs), labels, fontsize=7)
    ax.set_ylabel("Δ average vs GRPO n=8 (points)")
    ax.set_title("Figure 3b: stored vs online gains")
    ax.legend(fontsize=7)
    return _save(fig, out)


DYNAMICS = (
    ("reward_mean", "training reward (T = 1)"),
    ("all_fail_frac", "all-fail fraction of prompts"),
    (("candidates", "selected"), "candidates (solid) / selected (dashed)"),
    (("gate_pass_rate_correct", "gate_pass_rate_wrong"), "gate pass: correct (solid) / wrong (dashed)"),
    ("admitted", "admitted peer responses"),
    (("clip_frac_own", "clip_frac_peer"), "clipped tokens: own (solid) / peer (dashed)"),
)


def figure_dynamics(ctx: ReportContext, method: str, pair: str, out: Path) -> Path:
    """The mechanism of one co-training cell's first run, by step and receiving model: rewards, all-fail
    prompts, candidates and selections, the gate's pass rates for correct and wrong peer responses, admitted
    responses and clipped-token fractions."""
    members = ctx.pairs.get(pair, [])
    seed = ctx.first_seed(method, pair, members[0]) if members else 0
    receivers = [ctx.metrics(method, pair, [seed], m).sort_values("step") for m in members]
    fig, axes = plt.subplots(2, 3, figsize=(12, 6), squeeze=False)
    for ax, (columns, title) in zip(axes.flat, DYNAMICS, strict=True):
        for i, (model, mine) in enumerate(zip(ctx.pairs.get(pair, []), receivers, strict=True)):
            color = f"C{i}"
            for column, style in zip((columns,) if isinstance(columns, str) else columns, ("-", "--"), strict=False):
                if column in mine and mine[column].notna().any():
                    ax.plot(
                        mine["step"],
                        mine[column],
                        style,
                        color=color,
                        label=f"{model} receives" if style == "-" else None,
                    )
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("step", fontsize=8)
        if ax.lines:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "no metrics", ha="center", transform=ax.transAxes)
    fig.suptitle(f"Training dynamics: {method} on {pair} (seed {seed})")
    fig.tight_layout()
    return _save(fig, out)
